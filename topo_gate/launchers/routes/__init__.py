"""Route models of the pinned launcher releases: with these knobs, on this node, for this model,
which kernel does the launcher run for a message of each size? Pure; every rule cites its source.

``route(launcher, knobs, ctx)`` -> ``{pattern: Route}``; ``check.violations`` compares a route with a
profile's measured ladders. See ``base`` for the route shape and names. SGLang and vLLM route by the
served architecture: with ``ctx.architecture`` (and its ``model`` preset) unknown, the sizes where
``architecture_variants(launcher)`` disagree are ``model_dependent_<launcher>``.
"""

from __future__ import annotations

from collections.abc import Callable

from topo_gate.launchers.routes import sglang, trtllm, vllm
from topo_gate.launchers.routes.base import Context, Knobs, Route, RouteError

ROUTERS: dict[str, Callable[[Knobs, Context], dict[str, Route]]] = {
    "sglang": sglang.routes,
    "vllm": vllm.routes,
    "trtllm": trtllm.routes,
}
#: Launchers whose routes depend on the served architecture, with one architecture per class of a
#: release (None: the newest modelled).
_VARIANTS: dict[str, Callable[[str | None], tuple[str, ...]]] = {
    "sglang": lambda release: sglang.architecture_variants(),  # one release modelled
    "vllm": vllm.architecture_variants,
}

__all__ = ["ROUTERS", "Context", "Knobs", "Route", "RouteError", "architecture_variants", "route"]


def route(launcher: str, knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, what ``launcher`` runs at each size with ``knobset`` on ``ctx``."""
    if launcher not in ROUTERS:
        raise RouteError(f"unknown launcher {launcher!r} (known: {', '.join(ROUTERS)})")
    return ROUTERS[launcher](knobset, ctx)


def architecture_variants(launcher: str, release: str | None = None) -> tuple[str | None, ...]:
    """One HF architecture per class ``launcher`` ``release`` (None: the newest modelled) routes
    differently (price each to cover a model whose architecture is unknown); ``(None,)`` for a
    launcher that does not route by architecture."""
    if launcher not in ROUTERS:
        raise RouteError(f"unknown launcher {launcher!r} (known: {', '.join(ROUTERS)})")
    variants = _VARIANTS.get(launcher)
    return (None,) if variants is None else variants(release)
