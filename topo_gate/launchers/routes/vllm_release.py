"""Which vLLM release a route is computed for, and citations into each modelled release.

The route modules of vLLM share code wherever the releases dispatch alike; a rule cites the lines of
every release it models (line numbers move between releases even where the code does not), and a
rule only one release has cites that release alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite, Context, RouteError

LAUNCHER = "vllm"


def release_of(ctx: Context) -> str:
    """The modelled release ``ctx`` routes (``ctx.release``; None: the newest)."""
    modelled = knobs.SUPPORTED[LAUNCHER]
    release = ctx.release or modelled[-1]
    if release not in modelled:
        raise RouteError(f"vllm {release} has no route model (modelled: {', '.join(modelled)})")
    return release


def release_name(ctx: Context) -> str:
    """``vllm <release>``, as route errors and citations name it."""
    return f"{LAUNCHER} {release_of(ctx)}"


def cites(spans: Mapping[str, tuple[str, Mapping[str, str]]]) -> dict[str, dict[str, Cite]]:
    """``{release: {key: Cite}}`` from ``{key: (path under vllm/, {release: lines})}``."""
    out: dict[str, dict[str, Cite]] = {release: {} for release in knobs.SUPPORTED[LAUNCHER]}
    for key, (path, lines) in spans.items():
        for release, span in lines.items():
            out[release][key] = Cite(f"{LAUNCHER} {release}", "vllm/" + path, span)
    return out
