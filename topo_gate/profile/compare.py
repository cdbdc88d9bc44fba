"""Which message-size ranges changed backend between two profiles. Pure.

Each ladder is a function size -> backend; the comparison cuts sizes at every boundary either
profile has, compares the two backends on each piece, and merges neighbouring pieces with the same
change. A (tp, pattern, group_class) decided by one profile only is NCCL at every size in the other,
which is exactly what the reader would do with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from topo_gate.profile.schema import NCCL, DecisionEntry, Profile, Rule

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
