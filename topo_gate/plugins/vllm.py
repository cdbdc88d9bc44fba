"""vLLM general plugin (entry point ``vllm.general_plugins``: ``topo_gate = topo_gate.plugins.vllm:register``).

vLLM 0.33.0 calls general plugins with no arguments, once per process, in every process
(``vllm/plugins/__init__.py:77-97``), first from ``AsyncEngineArgs.add_cli_args`` or
``EngineArgs.__post_init__`` (``vllm/engine/arg_utils.py:3256``, ``:929-931``): before the command
line is parsed, so neither the TP size nor the model is known there, and vLLM does not guard the call.
``register`` therefore only wraps ``EngineArgs.create_engine_config`` (``arg_utils.py:2245``), the
point where both are known and nothing has been built from them yet. There the plan is applied as
``exec`` would add it: ``--disable-custom-all-reduce`` as ``EngineArgs.disable_custom_all_reduce``,
``--compilation-config`` key by key into ``EngineArgs.compilation_config.pass_config`` (``VllmConfig``
derives its compile ranges from those, ``vllm/config/vllm.py:2658-2685``, so they must be set before it
is built), and the env vars, which ``vllm.envs`` reads lazily until the engine enables its cache
(``vllm/envs.py:2293-2320``, ``v1/engine/core.py:248``). The engine core and the workers get the
built ``VllmConfig`` and inherit the env.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
from typing import Any

from topo_gate.launchers import LaunchPlan
from topo_gate.launchers.command.merge import split_flags
from topo_gate.plugins import (
    Outcome,
    Served,
    apply_flags,
    export_env,
    fallback,
    inherited,
    plan_in_launcher,
    profile_digest,
    profile_path,
    record,
    user_args,
)
from topo_gate.plugins.fields import FLAG_FIELDS, VLLM_COMPILATION_FLAG

PLUGIN = "vllm"
WRAPPED = "__topo_gate_wrapped__"


def register() -> None:
    """vLLM's general-plugin hook: wrap ``EngineArgs.create_engine_config``; idempotent; never raises."""
    try:
        if profile_path() is None or inherited(PLUGIN):
            return
        from vllm.engine.arg_utils import EngineArgs

        original = EngineArgs.create_engine_config
        if getattr(original, WRAPPED, False):
            return

        @functools.wraps(original)
        def create_engine_config(self: Any, *args: Any, **kwargs: Any) -> Any:
            follow_profile(self)
            return original(self, *args, **kwargs)

        setattr(create_engine_config, WRAPPED, True)
        EngineArgs.create_engine_config = create_engine_config
    except Exception as error:  # noqa: BLE001 -- vLLM calls plugins unguarded: never raise into it
        _fall_back(None, f"plugin could not hook vLLM: {type(error).__name__}: {error}")


def follow_profile(engine_args: Any) -> None:
    """Apply the profile's plan to ``engine_args`` and the environment; any error forces NCCL."""
    profile = profile_path()
    if profile is None:
        return
    try:
        plan, fingerprint = plan_in_launcher(PLUGIN, served=lambda: _served(engine_args), profile=profile)
        notes: tuple[str, ...] = ()
        unapplicable = _unapplicable(plan)
        if unapplicable:
            plan = fallback(PLUGIN, f"cannot apply {', '.join(unapplicable)} at vLLM's plugin point")
            notes = (f"{', '.join(unapplicable)} not applied",)
        kept = _apply(engine_args, plan)
        record(
            Outcome("vllm", profile_digest(profile, fingerprint), plan, notes, kept), fingerprint, os.environ
        )
    except Exception as error:  # noqa: BLE001 -- never raise into vLLM
        _fall_back(engine_args, f"plugin error: {type(error).__name__}: {error}")


def _fall_back(engine_args: Any, reason: str) -> None:
    """Last resort: the fallback plan (nothing, or NCCL forced), on ``engine_args`` when there is
    one; env only otherwise."""
    plan = fallback(PLUGIN, reason)
    notes: tuple[str, ...] = ()
    args_applied = True
    kept: tuple[str, ...] = ()
    try:
        if engine_args is None:
            raise TypeError("no EngineArgs")
        kept = _apply(engine_args, plan)
    except Exception:  # noqa: BLE001
        kept = export_env(plan.env, os.environ)
        args_applied = False
        if plan.args:  # the default fallback has none: nothing was left unapplied
            notes = (
                f"cannot apply {' '.join(plan.args)}: vLLM's defaults stay for custom all-reduce and fusion",
            )
    profile = profile_path() or ""
    record(Outcome("vllm", profile_digest(profile), plan, notes, kept, args_applied), None, os.environ)


def _unapplicable(plan: LaunchPlan) -> tuple[str, ...]:
    """The plan's flags (or compilation-config keys) this plugin has no field for."""
    from vllm.config.compilation import PassConfig

    missing = []
    for flag, value in split_flags(plan.args, PLUGIN):
        if flag == VLLM_COMPILATION_FLAG:
            assert value is not None, "the vLLM manifest says --compilation-config takes a value"
            config = json.loads(value)
            missing += [f"{flag} {key}" for key in config if key != "pass_config"]
            known = {field.name for field in dataclasses.fields(PassConfig)}
            missing += [f"pass_config.{key}" for key in config.get("pass_config", {}) if key not in known]
        elif flag not in FLAG_FIELDS[PLUGIN]:
            missing.append(flag)
    return tuple(missing)


def _defaults(engine_args: Any) -> dict[str, Any]:
    return {
        f.name: f.default for f in dataclasses.fields(engine_args) if f.default is not dataclasses.MISSING
    }


def _apply(engine_args: Any, plan: LaunchPlan) -> tuple[str, ...]:
    """Set the plan's fields and env where the user has not; returns the user values kept."""
    _, kept = apply_flags(
        engine_args, PLUGIN, plan, _defaults(engine_args), special=frozenset({VLLM_COMPILATION_FLAG})
    )
    for flag, value in split_flags(plan.args, PLUGIN):
        if flag == VLLM_COMPILATION_FLAG:
            assert value is not None, "the vLLM manifest says --compilation-config takes a value"
            # A copy: the object may be the parser's default, shared by every EngineArgs it parses.
            compilation = copy.deepcopy(engine_args.compilation_config)
            kept += _apply_pass_config(compilation.pass_config, json.loads(value)["pass_config"])
            engine_args.compilation_config = compilation
    return (*kept, *export_env(plan.env, os.environ))


def _apply_pass_config(pass_config: Any, meant: dict[str, Any]) -> tuple[str, ...]:
    defaults = {f.name: f.default for f in dataclasses.fields(pass_config)}
    kept = []
    for key, value in meant.items():
        current = getattr(pass_config, key)
        if current != defaults.get(key) and current != value:
            kept.append(f"pass_config.{key}={current}")
        else:
            setattr(pass_config, key, value)
    return tuple(kept)


def _served(engine_args: Any) -> Served:
    """The TP size, the user's own all-reduce flags and the served model's shape from ``engine_args``."""
    args = user_args(engine_args, PLUGIN, _defaults(engine_args))
    pass_config = _user_pass_config(engine_args)
    if pass_config:
        args += (VLLM_COMPILATION_FLAG, json.dumps({"pass_config": pass_config}, separators=(",", ":")))
    hidden, layers, architecture = _model_shape(engine_args)
    return Served(int(engine_args.tensor_parallel_size), hidden, layers, architecture, args)


def _user_pass_config(engine_args: Any) -> dict[str, Any]:
    """The all-reduce pass_config keys the user set (non-default) in ``engine_args.compilation_config``."""
    pass_config = getattr(getattr(engine_args, "compilation_config", None), "pass_config", None)
    if pass_config is None or not dataclasses.is_dataclass(pass_config):
        return {}
    defaults = {f.name: f.default for f in dataclasses.fields(pass_config)}
    return {
        key: getattr(pass_config, key)
        for key in ("fuse_allreduce_rms", "fi_allreduce_fusion_max_size_mb")
        if hasattr(pass_config, key) and getattr(pass_config, key) != defaults.get(key)
    }


def _model_shape(engine_args: Any) -> tuple[int | None, int | None, str | None]:
    """The served model's hidden size, layer count and architecture as vLLM reads them (its
    ModelConfig); None where they cannot be read (the planner then says what it assumed). Passed on
    as read, not made whole: a ``config.json`` with ``num_hidden_layers: -3`` or ``2.5`` is no model,
    and the planner falls back saying so (``plan.request.shape_problem``)."""
    try:
        config = engine_args.create_model_config()
        hidden = config.get_hidden_size()
    except Exception:  # noqa: BLE001 -- the planner then uses the profile's, with a warning
        return None, None, None
    try:
        layers = config.hf_text_config.num_hidden_layers
    except Exception:  # noqa: BLE001 -- a model without the field: the planner assumes a depth and says so
        layers = None
    architectures = getattr(config, "architectures", None) or [None]
    return hidden, layers, architectures[0]
