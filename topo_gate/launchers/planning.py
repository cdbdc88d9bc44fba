"""Choose a launcher's knobs by asking its route model: among candidate knob sets, the one whose
routes send the most of the measured size range to fast paths while every size lands on a backend
measured faster than NCCL there (or on NCCL). Candidates the launcher would refuse, or whose routes
cannot be checked, are dropped; the all-NCCL candidate is always safe.

When the profile does not record the GPUs' capability or the group's class, a candidate must be safe
for every variant the launcher's tables distinguish.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from topo_gate.launchers.common import Reading
from topo_gate.launchers.routes import Context, Knobs, Route, RouteError, route
from topo_gate.launchers.routes.check import fast_bytes, violations

if TYPE_CHECKING:
    from topo_gate.profile.schema import Rule

#: Capabilities tried when the profile does not record one: each row the launchers' tables key on.
CAPABILITY_VARIANTS = ((9, 0), (10, 0), (10, 3), (12, 0))
#: Group classes tried when unknown: one with NVLink multicast, one PCIe-only.
GROUP_VARIANTS = ("nvswitch", "pcie-switch")


@dataclass(frozen=True)
class Candidate:
    """One knob set and what it says about itself (the notes a plan carries when it is chosen)."""

    knobs: Knobs
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Choice:
    candidate: Candidate
    routes: Mapping[str, Route]  # under the first context variant


def contexts(reading: Reading, tp: int) -> list[Context]:
    """Every node variant the plan must be safe for."""
    capabilities = [reading.capability] if reading.capability else list(CAPABILITY_VARIANTS)
    classes = [reading.group_class] if reading.group_class else list(GROUP_VARIANTS)
    hidden = reading.served_hidden or reading.hidden or 1
    return [
        Context(
            tp=tp,
            capability=c,
            group_class=g,
            hidden=hidden,
            itemsize=reading.itemsize or 2,
            model=reading.model,
        )
        for c in capabilities
        for g in classes
    ]


def horizon(reading: Reading) -> int:
    """One past the largest finite size any measured ladder names: the range scores are taken over."""
    finite = [m for ladder in reading.ladders.values() for m, _ in ladder if m is not None]
    return max(finite, default=0) + 1


def checked_routes(
    launcher: str, candidate: Candidate, variants: Sequence[Context], reading: Reading
) -> list[dict[str, Route]] | None:
    """The candidate's routes per variant, or None if any variant is refused or unsafe."""
    found: list[dict[str, Route]] = []
    for ctx in variants:
        try:
            routes = route(launcher, candidate.knobs, ctx)
        except RouteError:
            return None
        if violations(routes, reading.ladders, ctx.row_bytes):
            return None
        found.append(routes)
    return found


def speedup_bytes(routes: Mapping[str, Route], reading: Reading, top: int) -> float:
    """Bytes below ``top`` weighted by the measured speed-up of the backend routed there (1 where the
    profile states none for it, e.g. a plain backend at an unfused size of the fused pattern)."""
    total = 0.0
    for pattern, spans in routes.items():
        low = 1
        for high, backend in spans:
            end = top if high is None else min(high, top)
            if backend is not None and end > low:
                total += (end - low) * _speedup(reading.rules.get(pattern, ()), backend, low)
            if high is None or high >= top:
                break
            low = high
    return total


def _speedup(rules: Sequence[Rule], backend: str, nbytes: int) -> float:
    rule = next((r for r in rules if r.max_bytes is None or nbytes <= r.max_bytes), None)
    if rule is None:
        return 1.0
    found = {rule.backend: rule.speedup, **{a.backend: a.speedup for a in rule.alternatives}}
    return found.get(backend) or 1.0


def choose(launcher: str, candidates: Iterable[Candidate], reading: Reading, tp: int) -> Choice:
    """The safe candidate with the most fast bytes; among equals, the one whose routed backends were
    measured fastest (speed-up-weighted bytes); then the earlier one."""
    variants = contexts(reading, tp)
    top = horizon(reading)
    best: tuple[tuple[int, float], Choice] | None = None
    for candidate in candidates:
        found = checked_routes(launcher, candidate, variants, reading)
        if found is None:
            continue
        score = (min(fast_bytes(r, top) for r in found), min(speedup_bytes(r, reading, top) for r in found))
        if best is None or score > best[0]:
            best = (score, Choice(candidate, found[0]))
    if best is None:
        raise RouteError(f"no candidate knob set of {launcher} is safe, not even the all-NCCL one")
    return best[1]


def thresholds(reading: Reading, patterns: Sequence[str]) -> list[int]:
    """Candidate byte limits: every finite rung end of the given patterns' ladders, ascending."""
    return sorted({m for p in patterns for m, _ in reading.ladders[p] if m is not None})


def size(nbytes: int) -> str:
    """Human size: ``8 MiB``, ``1.5 MiB``, ``512 KiB``, ``100 B``."""
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):g} MiB"
    if nbytes >= 1024:
        return f"{nbytes / 1024:g} KiB"
    return f"{nbytes} B"


def describe(route: Route) -> str:
    """``<= 7 MiB trtllm_oneshot, < 8 MiB vllm_custom, nccl above``: a launcher's ``<=`` limit reads
    as ``<=``, its ``<`` limit (a round number of KiB) as ``<``."""
    parts = []
    for high, backend in route:
        name = backend or "nccl"
        if high is None:
            parts.append(f"{name} above")
        else:
            parts.append(f"< {size(high)} {name}" if high % 1024 == 0 else f"<= {size(high - 1)} {name}")
    return ", ".join(parts) if len(parts) > 1 else f"{route[0][1] or 'nccl'} at every size"


#: NCCL's NVLink SHARP (NVLS) is off in every trial (trials.safety); at TP > 2 on an NVSwitch node a
#: launcher that leaves NCCL's default would compare the fast paths against a different NCCL.
NVLS_ENV = {"NCCL_NVLS_ENABLE": "0"}


def nccl_parity(tp: int, routes: Mapping[str, Route]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The NCCL env the baseline was measured under, where it changes the launcher's NCCL."""
    fast = any(b is not None for r in routes.values() for _, b in r)
    if tp > 2 and fast:
        return dict(NVLS_ENV), (
            "NCCL_NVLS_ENABLE=0: the NCCL baseline was measured with NVLS off; at TP > 2 NCCL's default "
            "may use NVLS, against which the measured speed-ups do not hold",
        )
    return {}, (
        "NCCL env left to the launcher: the baseline was measured with NVLS off and "
        "NCCL_GRAPH_MIXING_SUPPORT=0 (a faster NCCL than a launcher's default graph mixing), so "
        "speed-ups are conservative" + ("" if tp <= 2 else "; no fast path is enabled here"),
    )
