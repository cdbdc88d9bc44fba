"""Whether vLLM compiles the served model (compilation mode VLLM_COMPILE): the only mode in which its
fusion pass runs. Both modelled releases resolve the mode alike, in this order
(``VllmConfig.__post_init__``):

1. the user's ``mode`` (``-cc.mode=none``, ``--compilation-config '{"mode": 0}'``, ... : an integer
   0-3 or a ``CompilationMode`` name, any case);
2. ``--enforce-eager`` and ``TORCH_COMPILE_DISABLE=1`` force NONE;
3. breakable CUDA graphs force NONE: ``VLLM_USE_BREAKABLE_CUDAGRAPH`` where it is set (on only for
   "1"), else on for the release's default breakable architectures (its manifest's
   ``architectures.breakable_cudagraph``, which 0.34.0 extends on CUDA by Qwen3.5);
4. no mode yet: VLLM_COMPILE above ``-O0``, NONE at it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Context, Knobs, RouteError
from topo_gate.launchers.routes.vllm_fusion import optimization_level
from topo_gate.launchers.routes.vllm_release import LAUNCHER, cites, release_name

CITES = cites(
    {
        "compile_mode": (
            "config/vllm.py",
            {"0.33.0": "1766-1768,1786-1791,1827-1831", "0.34.0": "1697-1699,1717-1722,1758-1762"},
        ),
        "mode_values": ("config/compilation.py", {"0.33.0": "37-50,853-871", "0.34.0": "38-51,1003-1021"}),
        "dotted_args": ("utils/argparse_utils.py", {"0.33.0": "462-495", "0.34.0": "462-495"}),
        "breakable": (
            "config/vllm.py",
            {"0.33.0": "76-109,112-129,842-870", "0.34.0": "88-134,137-158,810-834"},
        ),
        "breakable_env": ("envs.py", {"0.33.0": "778-780", "0.34.0": "821-823"}),
    }
)

COMPILATION_FLAGS = ("--compilation-config", "-cc")
BREAKABLE_ENV = "VLLM_USE_BREAKABLE_CUDAGRAPH"
#: ``CompilationMode``: the pass runs in VLLM_COMPILE only (the others leave Inductor's passes out).
MODES = {"NONE": 0, "STOCK_TORCH_COMPILE": 1, "DYNAMO_TRACE_ONCE": 2, "VLLM_COMPILE": 3}
NONE, VLLM_COMPILE = MODES["NONE"], MODES["VLLM_COMPILE"]


def config_arg(knobset: Knobs, flags: tuple[str, ...]) -> Mapping[str, Any]:
    """A JSON config flag (``--x JSON`` / ``--x=JSON``) merged with its dotted keys (``--x.a.b=v`` /
    ``--x.a.b v``; a value that is not JSON is the string), in order: what vLLM's parser builds.
    Read-only: one answer per distinct command line, which a candidate's routes read several times."""
    return _config_arg(knobset.args, flags)


#: Command lines whose configs ``config_arg`` keeps: a plan reads each candidate's a few times in a row.
KEPT_CONFIGS = 64


@lru_cache(maxsize=KEPT_CONFIGS)
def _config_arg(args: tuple[str, ...], flags: tuple[str, ...]) -> Mapping[str, Any]:
    found: dict[str, Any] = {}
    for index, token in enumerate(args):
        name, eq, value = token.partition("=")
        following = args[index + 1] if index + 1 < len(args) else ""
        if name in flags:
            _merge(found, json.loads(value if eq else following or "{}"))
        elif name.startswith(tuple(flag + "." for flag in flags)):
            text = value if eq else following
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = text
            nested: Any = parsed
            for key in reversed(name.split(".")[1:]):
                nested = {key: nested}
            _merge(found, nested)
    return MappingProxyType(found)


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def user_mode(knobset: Knobs, ctx: Context) -> int | None:
    """The compilation mode the user's config names (``validate_mode_before``), None if none."""
    mode = config_arg(knobset, COMPILATION_FLAGS).get("mode")
    if mode is None:
        return None
    if isinstance(mode, str) and mode.upper() in MODES:
        return MODES[mode.upper()]
    if isinstance(mode, int) and mode in MODES.values():
        return mode
    raise RouteError(f"compilation mode {mode!r}: {release_name(ctx)} takes 0-3 or {', '.join(MODES)}")


def breakable(knobset: Knobs, ctx: Context) -> bool:
    """Whether vLLM runs the served architecture under breakable CUDA graphs (compilation mode NONE)."""
    value = knobset.env.get(BREAKABLE_ENV)
    if value is not None:
        return value == "1"
    sets = knobs.manifest(LAUNCHER, ctx.release)["architectures"]
    return ctx.served_architecture in sets["breakable_cudagraph"]


def compilation_mode(knobset: Knobs, ctx: Context) -> int:
    """The mode vLLM ends up with (module docstring, steps 1-4)."""
    explicit = user_mode(knobset, ctx)
    eager = "--enforce-eager" in knobset.args and "--no-enforce-eager" not in knobset.args
    if eager or knobset.env.get("TORCH_COMPILE_DISABLE") == "1" or breakable(knobset, ctx):
        return NONE
    if explicit is not None:
        return explicit
    return VLLM_COMPILE if optimization_level(knobset.args) > 0 else NONE


def compiles(knobset: Knobs, ctx: Context) -> bool:
    """Whether the fusion pass can run: compilation mode VLLM_COMPILE."""
    return compilation_mode(knobset, ctx) == VLLM_COMPILE
