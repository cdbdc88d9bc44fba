"""SGLang general plugin (entry point ``sglang.srt.plugins``: ``topo_gate = topo_gate.plugins.sglang:register``).

SGLang 0.5.23 runs general plugins once per process, in every process (``sglang/srt/plugins/__init__.py:103-139``),
before the server arguments are prepared (``sglang/launch_server.py:79``, ``cli/serve.py:205-207``,
``srt/entrypoints/engine.py:286``), and then applies the hooks they registered on dotted paths
(``plugins/hook_registry.py``). ``register`` adds one BEFORE hook on ``ServerArgs.resolve_once``
(``srt/server_args.py:243``): ``ServerArgs.__post_init__`` resolves nothing in this release, so that is
the first point where the parsed arguments (``tp_size``, ``model_path``) are known and nothing has
been derived from the all-reduce knobs yet. There the plan is applied as ``exec`` would add it: each
flag as the ``ServerArgs`` field it sets (``topo_gate.plugins.fields``), and the env vars, which
SGLang's ``envs`` reads from the environment at each ``get()``. The scheduler and detokenizer
processes receive the resolved ``ServerArgs`` by pickle and inherit the env.
"""

from __future__ import annotations

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
from topo_gate.plugins.fields import FLAG_FIELDS

PLUGIN = "sglang"
TARGET = "sglang.srt.server_args.ServerArgs.resolve_once"


def register() -> None:
    """SGLang's general-plugin hook: a BEFORE hook on ``ServerArgs.resolve_once``; never raises."""
    try:
        if profile_path() is None or inherited(PLUGIN):
            return
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        HookRegistry.register(TARGET, before_resolve, HookType.BEFORE)
    except Exception as error:  # noqa: BLE001 -- never raise into SGLang
        _fall_back(None, f"plugin could not hook SGLang: {type(error).__name__}: {error}")


def before_resolve(server_args: Any, *args: Any, **kwargs: Any) -> None:
    """The hook: follow the profile on an unresolved ``ServerArgs`` of a launch.

    A resolved record is left alone, and so are SGLang's own placeholder records (``model_path``
    "dummy", e.g. ``srt/runtime_context.py:1231``): they launch nothing, and a plan for them would
    leave its env behind for the real launch.
    """
    if getattr(server_args, "_resolution_finished", False):
        return
    if str(getattr(server_args, "model_path", None)).lower() in ("dummy", "none"):
        return
    follow_profile(server_args)


def follow_profile(server_args: Any) -> None:
    """Apply the profile's plan to ``server_args`` and the environment; any error forces NCCL."""
    profile = profile_path()
    if profile is None:
        return
    try:
        plan, fingerprint = plan_in_launcher(PLUGIN, served=lambda: _served(server_args), profile=profile)
        notes: tuple[str, ...] = ()
        unapplied = _unapplicable(server_args, plan)
        if unapplied:
            plan = fallback(PLUGIN, f"cannot apply {', '.join(unapplied)} at SGLang's plugin point")
            notes = (f"{', '.join(unapplied)} not applied",)
        kept = _apply(server_args, plan)
        record(
            Outcome("sglang", profile_digest(profile, fingerprint), plan, notes, kept),
            fingerprint,
            os.environ,
        )
    except Exception as error:  # noqa: BLE001 -- never raise into SGLang
        _fall_back(server_args, f"plugin error: {type(error).__name__}: {error}")


def _fall_back(server_args: Any, reason: str) -> None:
    """Last resort: the fallback plan (nothing, or NCCL forced), on ``server_args`` when there is one."""
    plan = fallback(PLUGIN, reason)
    notes: tuple[str, ...] = ()
    args_applied = True
    try:
        if server_args is None:
            raise TypeError("no ServerArgs")
        kept = _apply(server_args, plan)
    except Exception:  # noqa: BLE001
        kept = export_env(plan.env, os.environ)
        args_applied = False
        if plan.args:  # the default fallback has none: nothing was left unapplied
            notes = (
                f"cannot apply {' '.join(plan.args)}: SGLang's defaults stay for custom all-reduce and fusion",
            )
    record(
        Outcome("sglang", profile_digest(profile_path() or ""), plan, notes, kept, args_applied),
        None,
        os.environ,
    )


def _unapplicable(server_args: Any, plan: LaunchPlan) -> tuple[str, ...]:
    """The plan's flags this plugin has no ``ServerArgs`` field for."""
    fields = FLAG_FIELDS[PLUGIN]
    return tuple(
        flag
        for flag, _ in split_flags(plan.args, PLUGIN)
        if flag not in fields or not hasattr(server_args, fields[flag][0])
    )


def _defaults(server_args: Any) -> dict[str, Any]:
    import msgspec

    # ServerArgs is a msgspec Struct (sglang/srt/server_args.py:231); fields with a factory have no default.
    return {f.name: f.default for f in msgspec.structs.fields(type(server_args))}


def _apply(server_args: Any, plan: LaunchPlan) -> tuple[str, ...]:
    """Set the plan's fields and env where the user has not; returns the user values kept."""
    _, kept = apply_flags(server_args, PLUGIN, plan, _defaults(server_args))
    return (*kept, *export_env(plan.env, os.environ))


def _served(server_args: Any) -> Served:
    """The TP size, the user's own all-reduce flags and the served model's shape from ``server_args``."""
    hidden, layers, architecture = _model_shape(server_args)
    flags = user_args(server_args, PLUGIN, _defaults(server_args))
    return Served(int(server_args.tp_size), hidden, layers, architecture, flags)


def _model_shape(server_args: Any) -> tuple[int | None, int | None, str | None]:
    """The served model's hidden size, layer count and architecture (``architectures[0]``, which
    SGLang's fusion auto-enable keys on) from its Hugging Face config; None where it cannot be read
    (the planner then says what it assumed)."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(
            server_args.model_path,
            trust_remote_code=bool(server_args.trust_remote_code),
            revision=server_args.revision,
        )
    except Exception:  # noqa: BLE001 -- the planner then uses the profile's, with a warning
        return None, None, None
    architectures = getattr(config, "architectures", None) or [None]
    text = config.get_text_config()
    layers = getattr(text, "num_hidden_layers", None)
    return int(text.hidden_size), int(layers) if isinstance(layers, int) else None, architectures[0]
