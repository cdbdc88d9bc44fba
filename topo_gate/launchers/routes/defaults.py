"""The launchers' default paths that trials can time: what a probe puts into its layer graphs.

A plan is priced against what the launcher runs with no topo-gate knobs, so the probe must confirm
those paths in a layer-like context too. ``default_paths`` collects, over every pinned launcher and
every architecture variant its route tells apart, the measured backends the no-knob route (empty user
env) sends a whole-token message of the pattern to. In the ``allreduce_rmsnorm`` pattern an unfused
size runs the plain backend then add + RMSNorm: its trial is the ``<plain>+rmsnorm`` composite.
NCCL (the baseline, always in the graphs) and names no trial times are left out.
"""

from __future__ import annotations

from collections.abc import Collection

from topo_gate.launchers.routes import ROUTERS, architecture_variants, route
from topo_gate.launchers.routes.base import Context, Knobs, RouteError, is_fused, takes_whole_tokens
from topo_gate.profile.schema import COMPOSITE_SUFFIX, FUSED_PATTERN, PATTERNS


def default_paths(
    *, tp: int, capability: tuple[int, int], group_class: str, hidden: int, itemsize: int, pattern: str
) -> frozenset[str]:
    """Every measured backend a pinned launcher's default route sends a ``pattern`` message to."""
    from topo_gate.profile import BACKENDS  # the names trials time (schema's list)

    return measured_default_paths(
        tp=tp,
        capability=capability,
        group_class=group_class,
        hidden=hidden,
        itemsize=itemsize,
        pattern=pattern,
        measured=BACKENDS,
    )


def measured_default_paths(
    *,
    tp: int,
    capability: tuple[int, int],
    group_class: str,
    hidden: int,
    itemsize: int,
    pattern: str,
    measured: Collection[str],
) -> frozenset[str]:
    """``default_paths`` with the set of measured (plain) backend names given."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r} (known: {', '.join(PATTERNS)})")
    row_bytes = hidden * itemsize
    found: set[str] = set()
    for launcher in ROUTERS:
        for architecture in architecture_variants(launcher):
            ctx = Context(tp, capability, group_class, hidden, itemsize, architecture=architecture)
            try:
                spans = route(launcher, Knobs(), ctx)[pattern]
            except RouteError:
                continue  # the launcher refuses this node with no knobs: nothing it runs to time
            low = 1
            for high, backend in spans:
                if backend is not None and backend in measured and takes_whole_tokens(low, high, row_bytes):
                    unfused = pattern == FUSED_PATTERN and not is_fused(backend)
                    found.add(backend + COMPOSITE_SUFFIX if unfused else backend)
                low = high if high is not None else low
    return frozenset(found)


def default_routes(
    *,
    tp: int,
    capability: tuple[int, int],
    group_class: str,
    hidden: int,
    itemsize: int,
    model: str | None = None,
) -> list[dict[str, object]]:
    """What every pinned launcher runs with no knobs (empty user env) on this group, as plain data
    for the probe's preflight, which imports no launcher.

    One entry per launcher and per class of served architectures it routes apart (the served one
    alone when ``model`` names a preset with a known architecture; variants whose routes agree are
    one entry): ``{"launcher", "release", "variants": [architecture, ...] (empty: the launcher does
    not route by architecture), "nccl": the NCCL it runs (``routes.nccl``), "routes": {pattern:
    [[high, backend], ...]}}`` (``base.Route`` as lists; backend None is NCCL), or, where the
    launcher refuses this node with no knobs, ``{"launcher", "release", "variants", "refused": why}``.
    """
    from topo_gate.launchers.knobs import PINNED
    from topo_gate.launchers.routes.nccl import nccl_path

    entries: list[dict[str, object]] = []
    for launcher in ROUTERS:
        served = Context(tp, capability, group_class, hidden, itemsize, model=model).served_architecture
        variants = (served,) if served is not None else architecture_variants(launcher)
        merged: dict[str, dict[str, object]] = {}
        for architecture in variants:
            ctx = Context(
                tp, capability, group_class, hidden, itemsize, model=model, architecture=architecture
            )
            try:
                found: dict[str, object] = {
                    "nccl": nccl_path(launcher, Knobs(), ctx),
                    "routes": {
                        p: [list(span) for span in spans]
                        for p, spans in route(launcher, Knobs(), ctx).items()
                    },
                }
            except RouteError as error:
                found = {"refused": str(error)}
            key = repr(sorted(found.items()))
            entry = merged.setdefault(
                key, {"launcher": launcher, "release": PINNED[launcher], "variants": [], **found}
            )
            if architecture is not None and launcher in _ROUTES_BY_ARCHITECTURE:
                variants_seen = entry["variants"]
                assert isinstance(variants_seen, list)
                variants_seen.append(architecture)
        entries.extend(merged.values())
    return entries


#: Launchers whose routes depend on the served architecture (``routes.architecture_variants``).
_ROUTES_BY_ARCHITECTURE = ("sglang", "vllm")
