"""Does a launcher's route land only on measured winners? Route vs the profile's measured ladders.

A measured ladder (the reader's rules) says, per size range ``(previous max_bytes, max_bytes]``,
which backends were measured faster than NCCL there (the rule's own and its ``alternatives``). A
route is *safe* at a size when it runs NCCL there or a backend in that set. The fused pattern's
unfused sizes (a plain backend + RMSNorm) are judged on the plain all-reduce ladder: the plain
all-reduce is what differs from the measured NCCL + RMSNorm baseline there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from topo_gate.launchers.routes.base import Route, at

if TYPE_CHECKING:  # routes need only the reader's Rule type, not the profile package
    from topo_gate.profile.schema import Rule

Measured = tuple[tuple[int | None, frozenset[str]], ...]


def measured_from_rules(rules: Iterable[Rule]) -> Measured:
    """The reader's ``Rule`` objects as ``(max_bytes inclusive, backends measured faster than NCCL)``."""
    return tuple((rule.max_bytes, rule.faster_than_nccl) for rule in rules)


def faster_at(measured: Measured, nbytes: int) -> frozenset[str]:
    for max_bytes, faster in measured:
        if max_bytes is None or nbytes <= max_bytes:
            return faster
    return frozenset()


def is_fused(backend: str) -> bool:
    """A fused all-reduce + RMSNorm kernel (``trtllm_fused_*``, ``mnnvl_fused_*``), not a plain one."""
    return "_fused" in backend


@dataclass(frozen=True)
class Piece:
    """A byte range ``[low, high)`` (high None: unbounded) over which the route and both ladders agree."""

    low: int
    high: int | None
    routed: str | None
    faster: frozenset[str]

    @property
    def safe(self) -> bool:
        return self.routed is None or self.routed in self.faster


def pieces(route: Route, measured: Mapping[str, Measured], pattern: str, row_bytes: int) -> list[Piece]:
    """``route`` cut at every boundary of the route and of the measured ladders, keeping only the
    ranges that contain a whole number of ``row_bytes`` (a size the launcher can send)."""
    cuts = {h for h, _ in route if h is not None}
    for ladder in measured.values():
        cuts |= {m + 1 for m, _ in ladder if m is not None}
    out: list[Piece] = []
    low = 1
    for high in [*sorted(cuts), None]:
        first_row = -(-low // row_bytes) * row_bytes
        if high is None or first_row < high:
            routed = at(route, low)
            ladder = measured["allreduce"] if routed and not is_fused(routed) else measured[pattern]
            out.append(Piece(low, high, routed, faster_at(ladder, low)))
        if high is None:
            break
        low = high
    return out


def violations(
    routes: Mapping[str, Route], measured: Mapping[str, Measured], row_bytes: int
) -> list[tuple[str, Piece]]:
    """Every (pattern, range) a route sends to a backend not measured faster than NCCL there."""
    return [
        (pattern, piece)
        for pattern, route in routes.items()
        for piece in pieces(route, measured, pattern, row_bytes)
        if not piece.safe
    ]


def fast_bytes(routes: Mapping[str, Route], horizon: int) -> int:
    """How much of ``[1, horizon)`` the routes send to a fast path, summed over patterns."""
    total = 0
    for route in routes.values():
        low = 1
        for high, backend in route:
            top = horizon if high is None else min(high, horizon)
            if backend is not None and top > low:
                total += top - low
            if high is None or high >= horizon:
                break
            low = high
    return total
