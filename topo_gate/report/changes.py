"""What changed from a baseline profile to a new one, for a reviewer: ranges and backends, speed-ups,
software, node class. Pure.

Backend changes per size range come from ``profile.compare.diff_decisions`` (the ``diff`` command's
logic).  A speed-up change is a fast-path rule of the new profile whose backend the baseline also
chose somewhere in that rule's sizes, with a different range or a different speed-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from topo_gate.profile.compare import BackendChange, diff_decisions
from topo_gate.profile.schema import NCCL, DecisionEntry, Profile, Rule


@dataclass(frozen=True)
class SpeedupChange:
    tp: int
    pattern: str
    group_class: str
    backend: str
    before_range: tuple[int, int | None]  # (min_bytes, max_bytes]
    after_range: tuple[int, int | None]
    before: float | None
    after: float | None


@dataclass(frozen=True)
class SoftwareChange:
    name: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class Changes:
    backends: list[BackendChange]
    speedups: list[SpeedupChange]
    software: list[SoftwareChange]
    same_node_class: bool

    @property
    def none(self) -> bool:
        return not (self.backends or self.speedups or self.software) and self.same_node_class


def changes(before: Profile, after: Profile) -> Changes:
    return Changes(
        backends=diff_decisions(before, after),
        speedups=_speedup_changes(before, after),
        software=_software_changes(before, after),
        same_node_class=before.node.fingerprint == after.node.fingerprint,
    )


def ranges(entry: DecisionEntry) -> list[tuple[int, Rule]]:
    """Each rule with the lower bound of its sizes ``(lower, max_bytes]``."""
    bounded, lower = [], 0
    for rule in entry.rules:
        bounded.append((lower, rule))
        lower = rule.max_bytes or lower
    return bounded


def _speedup_changes(before: Profile, after: Profile) -> list[SpeedupChange]:
    found = []
    for entry in after.decisions:
        old = before.find(*entry.key)
        if old is None:
            continue
        for lower, rule in ranges(entry):
            if rule.backend == NCCL:
                continue
            for old_lower, old_rule in ranges(old):
                same_backend = old_rule.backend == rule.backend
                if not same_backend or not _overlap((lower, rule.max_bytes), (old_lower, old_rule.max_bytes)):
                    continue
                moved = (old_lower, old_rule.max_bytes) != (lower, rule.max_bytes)
                if moved or old_rule.speedup != rule.speedup:
                    found.append(
                        SpeedupChange(
                            *entry.key,
                            rule.backend,
                            (old_lower, old_rule.max_bytes),
                            (lower, rule.max_bytes),
                            old_rule.speedup,
                            rule.speedup,
                        )
                    )
    return found


def _overlap(a: tuple[int, int | None], b: tuple[int, int | None]) -> bool:
    a_high = float("inf") if a[1] is None else a[1]
    b_high = float("inf") if b[1] is None else b[1]
    return a[0] < b_high and b[0] < a_high


def _software_changes(before: Profile, after: Profile) -> list[SoftwareChange]:
    old, new = before.node.software, after.node.software
    names = list(dict.fromkeys([*old, *new]))
    return [
        SoftwareChange(name, old.get(name), new.get(name)) for name in names if old.get(name) != new.get(name)
    ]
