"""Pure size-range arithmetic: does a launcher's routing agree with what was measured?

A *measured* ladder is the profile's rules as ``((max_bytes, faster), ...)``: in sizes
``(previous max_bytes, max_bytes]``, ``faster`` is the set of backends measured faster than NCCL at
every measured size of the range -- the rule's own backend and its ``alternatives`` (schema v1.1);
empty on an NCCL rule. The last ``max_bytes`` is None (everything larger).
A *route* describes what a launcher would run at each size once a knob is on, in the same shape: a
set of acceptable measured backends per range (a launcher that lets FlashInfer pick one-shot vs
two-shot accepts either); an empty set means the launcher stays on NCCL there, which is always safe.

A route is *safe* where every size it sends to a fast path was measured with that fast path faster
than NCCL (the fastest, or an alternative that cleared the same bar). These functions find how far a
route stays safe, so a planner can set a threshold knob there (rounded down) or leave a
fixed-threshold path off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import combinations

Ladder = tuple[tuple[int | None, frozenset[str]], ...]
Route = tuple[tuple[int | None, frozenset[str]], ...]
NCCL_ROUTE: frozenset[str] = frozenset()


def ladder_from_rules(rules: Iterable[object]) -> Ladder:
    """The reader's ``Rule`` objects as ``(max_bytes, backends measured faster than NCCL)`` pairs."""
    return tuple((rule.max_bytes, rule.faster_than_nccl) for rule in rules)  # type: ignore[attr-defined]


def _at(spans: Sequence[tuple[int | None, object]], nbytes: int) -> object:
    for max_bytes, value in spans:
        if max_bytes is None or nbytes <= max_bytes:
            return value
    raise ValueError("a ladder must end with an open-ended (None) rung")


def _breakpoints(*ladders: Sequence[tuple[int | None, object]]) -> list[int | None]:
    finite = sorted({m for ladder in ladders for m, _ in ladder if m is not None})
    return [*finite, None]


def safe_until(measured: Ladder, route: Route) -> int | None:
    """The largest size up to which ``route`` is safe against ``measured`` (None: safe everywhere).

    Checked interval by interval over the union of both ladders' breakpoints: an interval is safe when
    the route keeps NCCL there or accepts a backend measured faster than NCCL there.
    """
    low = 0
    for high in _breakpoints(measured, route):
        probe = low + 1  # every size in (low, high] has the same rung in both ladders
        accepted = _at(route, probe)
        if accepted and not accepted & _at(measured, probe):  # type: ignore[operator]
            return low
        if high is None:
            return None
        low = high
    return None


def capped(route: Route, cap: int | None) -> Route:
    """``route`` with NCCL above ``cap`` (a launcher's own size limit for the path)."""
    if cap is None:
        return route
    kept = tuple((m, acc) for m, acc in route if m is not None and m < cap)
    return (*kept, (cap, _at(route, cap)), (None, NCCL_ROUTE))  # type: ignore[arg-type]


def first_match(routes: Sequence[Route]) -> Route:
    """The route of several paths tried in order: at each size the first one that takes it."""
    spans: list[tuple[int | None, frozenset[str]]] = []
    low = 0
    for high in _breakpoints(*routes):
        probe = low + 1
        taken = next((acc for acc in (_at(r, probe) for r in routes) if acc), NCCL_ROUTE)
        if spans and spans[-1][1] == taken:
            spans[-1] = (high, taken)
        else:
            spans.append((high, taken))  # type: ignore[arg-type]
        if high is not None:
            low = high
    return tuple(spans)


def fast_bytes(route: Route) -> int:
    """How many bytes of the size axis a route sends to fast paths (to compare safe choices)."""
    total, low = 0, 0
    for high, accepted in route:
        if high is None:
            break
        if accepted:
            total += high - low
        low = high
    return total


def best_safe_subset(
    measured: Ladder, names: Sequence[str], variants: int, route_of: Callable[[tuple[str, ...], int], Route]
) -> tuple[str, ...]:
    """Which fixed-threshold launcher paths to enable.

    ``route_of(subset, variant)`` is the launcher's combined route with exactly ``subset`` enabled, under
    node variant ``variant`` (e.g. each compute capability of the launcher's tables, when the profile
    does not record it: the choice must then be safe for all). A subset is acceptable only if its route
    is safe for every variant; among those, the one sending the most bytes to fast paths wins (ties:
    fewer paths). The empty subset (all NCCL) is always acceptable.
    """
    best: tuple[int, int, tuple[str, ...]] = (0, 0, ())
    for size in range(1, len(names) + 1):
        for subset in combinations(names, size):
            routes = [route_of(subset, v) for v in range(variants)]
            if all(safe_until(measured, r) is None for r in routes):
                candidate = (min(fast_bytes(r) for r in routes), -size, subset)
                if candidate[:2] > best[:2]:
                    best = candidate
    return best[2]
