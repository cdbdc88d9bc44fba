"""Which message-size ranges changed backend between two profiles, and how their price tables moved. Pure.

Each ladder is a function size -> backend; the comparison cuts sizes at every boundary either
profile has, compares the two backends on each piece, and merges neighbouring pieces with the same
change. A (tp, pattern, group_class) decided by one profile only is NCCL at every size in the other,
which is exactly what the reader would do with it. Price tables (v1.3) are summarised, not listed:
backends and sizes added or removed, cells whose status changed or whose CIs no longer overlap, and
the largest move of a median.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from topo_gate.profile.schema import NCCL, DecisionEntry, Measurement, Profile, Rule

_ALL_NCCL = (Rule(max_bytes=None, backend=NCCL, reason="no decision in this profile"),)


@dataclass(frozen=True)
class BackendChange:
    """Sizes in ``(min_bytes, max_bytes]`` moved from ``before`` to ``after`` for one decision key."""

    tp: int
    pattern: str
    group_class: str
    min_bytes: int
    max_bytes: int | None
    before: str
    after: str
    note: str | None = None  # set when one profile has no decision for this key at all

    def to_dict(self) -> dict[str, object]:
        return {
            "tp": self.tp,
            "pattern": self.pattern,
            "group_class": self.group_class,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "before": self.before,
            "after": self.after,
            "note": self.note,
        }


def diff_decisions(before: Profile, after: Profile) -> list[BackendChange]:
    """Every size range whose backend differs, in ``before``'s decision order, then ``after``'s."""
    keys = list(dict.fromkeys([d.key for d in before.decisions] + [d.key for d in after.decisions]))
    changes: list[BackendChange] = []
    for key in keys:
        old, new = before.find(*key), after.find(*key)
        note = "no decision in the first profile" if old is None else None
        note = "no decision in the second profile" if new is None else note
        for min_bytes, max_bytes, was, now in _ladder_changes(_rules(old), _rules(new)):
            changes.append(BackendChange(*key, min_bytes, max_bytes, was, now, note))
    return changes


def _rules(entry: DecisionEntry | None) -> tuple[Rule, ...]:
    return _ALL_NCCL if entry is None else entry.rules


def _backend_at(rules: tuple[Rule, ...], nbytes: int) -> str:
    return next(r.backend for r in rules if r.max_bytes is None or nbytes <= r.max_bytes)


def _ladder_changes(old: tuple[Rule, ...], new: tuple[Rule, ...]) -> list[tuple[int, int | None, str, str]]:
    bounds = sorted({r.max_bytes for r in (*old, *new) if r.max_bytes is not None})
    pieces: list[tuple[int, int | None]] = list(zip([0, *bounds], [*bounds, None], strict=True))
    merged: list[tuple[int, int | None, str, str]] = []
    for low, high in pieces:
        probe = low + 1 if high is None else high  # any size inside (low, high] has the same answer
        was, now = _backend_at(old, probe), _backend_at(new, probe)
        if merged and merged[-1][1] == low and merged[-1][2:] == (was, now):
            merged[-1] = (merged[-1][0], high, was, now)
        else:
            merged.append((low, high, was, now))
    return [piece for piece in merged if piece[2] != piece[3]]


@dataclass(frozen=True)
class PriceChange:
    """How one price table (v1.3 ``measurements``) differs between two profiles, summarised:
    ``change`` is ``added``, ``removed`` or ``changed``; the largest median move is over the
    (backend, size) cells both price."""

    tp: int
    pattern: str
    group_class: str
    change: str
    backends_added: tuple[str, ...] = ()
    backends_removed: tuple[str, ...] = ()
    sizes_added: tuple[int, ...] = ()
    sizes_removed: tuple[int, ...] = ()
    status_changes: int = 0  # cells priced in both tables whose status differs
    beyond_ci: int = 0  # cells whose two CIs do not overlap
    largest_move: tuple[str, int, float, float] | None = None  # backend, size, median before, after

    def to_dict(self) -> dict[str, object]:
        move = self.largest_move
        return {
            "tp": self.tp,
            "pattern": self.pattern,
            "group_class": self.group_class,
            "change": self.change,
            "backends_added": list(self.backends_added),
            "backends_removed": list(self.backends_removed),
            "sizes_added": list(self.sizes_added),
            "sizes_removed": list(self.sizes_removed),
            "status_changes": self.status_changes,
            "beyond_ci": self.beyond_ci,
            "largest_move": None
            if move is None
            else {"backend": move[0], "nbytes": move[1], "before_us": move[2], "after_us": move[3]},
        }


def diff_measurements(before: Profile, after: Profile) -> list[PriceChange]:
    """Every price table that differs, in ``before``'s order, then ``after``'s."""
    keys = list(dict.fromkeys([t.key for t in before.measurements] + [t.key for t in after.measurements]))
    changes = []
    for tp, pattern, group_class in keys:
        old, new = before.measurement(tp, group_class, pattern), after.measurement(tp, group_class, pattern)
        if old is None or new is None:
            changes.append(PriceChange(tp, pattern, group_class, "added" if old is None else "removed"))
            continue
        change = _table_change(old, new)
        if change != PriceChange(tp, pattern, group_class, "changed"):
            changes.append(change)
    return changes


def _table_change(old: Measurement, new: Measurement) -> PriceChange:
    status_changes = beyond_ci = 0
    largest: tuple[str, int, float, float] | None = None
    for name in old.backends.keys() & new.backends.keys():
        was, now = old.backends[name], new.backends[name]
        for nbytes in set(old.sizes) & set(new.sizes):
            i, j = old.sizes.index(nbytes), new.sizes.index(nbytes)
            status_changes += was.status[i] != now.status[j]
            a, b, ci_a, ci_b = was.median_us[i], now.median_us[j], was.ci_us[i], now.ci_us[j]
            if a is None or b is None or ci_a is None or ci_b is None:
                continue
            beyond_ci += ci_a[1] < ci_b[0] or ci_b[1] < ci_a[0]
            if largest is None or abs(math.log(b / a)) > abs(math.log(largest[3] / largest[2])):
                largest = (name, nbytes, a, b)
    if largest is not None and largest[2] == largest[3]:
        largest = None
    return PriceChange(
        *old.key,
        "changed",
        backends_added=tuple(sorted(new.backends.keys() - old.backends.keys())),
        backends_removed=tuple(sorted(old.backends.keys() - new.backends.keys())),
        sizes_added=tuple(sorted(set(new.sizes) - set(old.sizes))),
        sizes_removed=tuple(sorted(set(old.sizes) - set(new.sizes))),
        status_changes=status_changes,
        beyond_ci=beyond_ci,
        largest_move=largest,
    )
