"""The expected size-transition cost of one call after the messages before it in its buffer, in time
logarithmic in their number.

A step of ``n`` bytes pays, per earlier message size larger than it, that size's chance of having been
the last in the buffer times the transition cost after it (``costmodel``, "Size transitions"). Summed
prior by prior, every step of a workload walks every size of it: quadratic in the workload's token
counts (4,096 counts, the most a workload file holds, took minutes to plan). The cost after an earlier
message, ``PriceTable.transition_bounds``, depends on that message only through where it falls among
the sizes the transitions were timed after (a *piece*: below the rung, one timed size, or the open gap
between two), so the sum is taken piece by piece over prefix sums of the chances: a bisection per
piece, the pieces being the profile's few timed sizes.
"""

from __future__ import annotations

import bisect
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from itertools import accumulate

from topo_gate.launchers.plan.pricing import PriceTable

#: (bytes, chance it was the last message in the buffer), ascending by bytes (``costmodel.priors``).
Priors = tuple[tuple[int, float], ...]
#: Prefix sums kept for this many distinct prior sets at once: a plan compares a few route sets at a
#: time, each with a handful of buffers, and a set of 4,096 sizes costs about 100 KB.
KEPT_PRIOR_SETS = 64


@dataclass(frozen=True)
class _Piece:
    """Earlier sizes in ``(after, up_to]`` (``after`` exclusive, ``up_to`` inclusive; None: no end),
    all with the same transition bounds."""

    after: int
    up_to: int | None
    low: float
    high: float | None
    measured: bool


@dataclass(frozen=True)
class _Sums:
    """One prior set as bisectable sizes and prefix sums of their chances (``chances[i]``: the first
    ``i`` sizes')."""

    priors: Priors
    sizes: tuple[int, ...]
    chances: tuple[float, ...]


_pieces: weakref.WeakKeyDictionary[PriceTable, dict[tuple[str, int], tuple[_Piece, ...]]] = (
    weakref.WeakKeyDictionary()
)
_sums: OrderedDict[int, _Sums] = OrderedDict()


def expected_transition(
    table: PriceTable,
    name: str,
    rung: int,
    nbytes: int,
    before: Priors,
    *,
    pessimistic: bool,
    bounded_share: float,
) -> float | str:
    """The transition ``name`` at ``rung`` is expected to pay for a message of ``nbytes`` after the
    messages ``before``: per larger earlier size, chance x the low bound (optimistic) or the high one
    (pessimistic; where the size was only bracketed, ``low + bounded_share x (high - low)``). A string
    (pessimistic) names the smallest larger earlier size with no bound: its transition was not
    measured."""
    sums = _sums_of(before)
    start = bisect.bisect_right(sums.sizes, nbytes)
    expected = 0.0
    for piece in _pieces_of(table, name, rung):
        first = max(start, bisect.bisect_right(sums.sizes, piece.after))
        end = len(sums.sizes) if piece.up_to is None else bisect.bisect_right(sums.sizes, piece.up_to)
        if first >= end:
            continue
        chance = sums.chances[end] - sums.chances[first]
        if not pessimistic:
            expected += chance * piece.low
        elif piece.high is None:
            return f"{name}: its size transition after {sums.sizes[first]}-byte messages was not measured"
        elif piece.measured:
            expected += chance * piece.high
        else:
            expected += chance * (piece.low + bounded_share * (piece.high - piece.low))
    return expected


def _pieces_of(table: PriceTable, name: str, rung: int) -> tuple[_Piece, ...]:
    """The pieces above the rung's own size (no transition at or below it), ascending; each one's
    bounds are the table's own for a size inside it."""
    per_table = _pieces.setdefault(table, {})
    found = per_table.get((name, rung))
    if found is not None:
        return found
    size = table.sizes[rung]
    timed = sorted(after for after in set(table.transition_priors(name)) if after > size)
    pieces = []
    edge = size
    for after in timed:
        if after > edge + 1:  # the open gap (edge, after): its sizes share the bounds of edge + 1
            pieces.append(_piece(table, name, rung, edge, after - 1, edge + 1))
        pieces.append(_piece(table, name, rung, after - 1, after, after))
        edge = after
    pieces.append(_piece(table, name, rung, edge, None, edge + 1))
    per_table[(name, rung)] = found = tuple(pieces)
    return found


def _piece(table: PriceTable, name: str, rung: int, after: int, up_to: int | None, inside: int) -> _Piece:
    low, high = table.transition_bounds(name, rung, inside)
    return _Piece(after, up_to, low, high, table.transition_measured(name, rung, inside))


def _sums_of(before: Priors) -> _Sums:
    """``before`` with its prefix sums, kept for the most recent prior sets (by identity: a route
    set's priors are one tuple for as long as it is priced)."""
    kept = _sums.get(id(before))
    if kept is not None and kept.priors is before:
        _sums.move_to_end(id(before))
        return kept
    sums = _Sums(
        before, tuple(size for size, _ in before), (0.0, *accumulate(chance for _, chance in before))
    )
    _sums[id(before)] = sums
    if len(_sums) > KEPT_PRIOR_SETS:
        _sums.popitem(last=False)
    return sums
