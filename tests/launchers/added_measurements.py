"""A profile with one transition measurement more or fewer, resealed: what a re-probe would add,
for holding an unlock line ("one more measurement would unlock ...") to its word.

``with_transition(profile, kernel, after_bytes, cost_us)`` times ``kernel``'s transition after
``after_bytes`` (a size of its table) as ``cost_us`` at every smaller size where it was not timed yet,
as a probe's replay after that size would; ``after_largest_only(profile, kernel)`` keeps only its transitions after the largest
size it was timed after, as an evidence v1.1 probe (one replay after the largest size) leaves them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from topo_gate.probe import DecideSettings, build_profile
from topo_gate.profile import Profile
from topo_gate.profile.measurements import BackendPrices, Measurement, Transition


def _edited(
    profile: Profile, kernel: str, edit: Callable[[Measurement, BackendPrices], Transition]
) -> Profile:
    tables = []
    for table in profile.measurements:
        prices = table.backends.get(kernel)
        if prices is not None:
            backends = {**table.backends, kernel: replace(prices, transition=edit(table, prices))}
            table = replace(table, backends=backends)
        tables.append(table)
    return replace(profile, measurements=tuple(tables)).with_digest()


def with_transition(profile: Profile, kernel: str, after_bytes: int, cost_us: float) -> Profile:
    def edit(table: Measurement, prices: BackendPrices) -> Transition:
        old = prices.transition
        rows = {} if old is None else dict(zip(old.after_bytes, old.cost_us, strict=True))
        row = list(rows.get(after_bytes, (None,) * len(table.sizes)))
        for rung, size in enumerate(table.sizes):
            if size < after_bytes and row[rung] is None:
                row[rung] = cost_us
        rows[after_bytes] = tuple(row)
        return Transition(tuple(sorted(rows)), tuple(rows[after] for after in sorted(rows)))

    return _edited(profile, kernel, edit)


def after_largest_only(profile: Profile, kernel: str) -> Profile:
    def edit(_table: Measurement, prices: BackendPrices) -> Transition:
        old = prices.transition
        assert old is not None, f"{kernel}'s transitions were never timed"
        return Transition(old.after_bytes[-1:], old.cost_us[-1:])

    return _edited(profile, kernel, edit)


def in_context_times(evidence: dict[str, Any], kernel: str, factor: float) -> Profile:
    """The profile ``decide`` derives from ``evidence`` (``priced_profiles.priced_evidence`` with
    ``context=True``) with ``kernel``'s in-context price (its layer graph minus the GEMM alone) times
    ``factor``: a kernel that overlaps better with the GEMM before it than its isolated replays say."""
    document = copy.deepcopy(evidence)
    for run in document["runs"]:
        gemm = {
            entry["tokens"]: entry["samples_us"] for entry in run["context"] if entry["backend"] == "gemm"
        }
        for entry in run["context"]:
            if entry["backend"] == kernel:
                entry["samples_us"] = [
                    round(g + (s - g) * factor, 6)
                    for g, s in zip(gemm[entry["tokens"]], entry["samples_us"], strict=True)
                ]
    profile, _ = build_profile(document, None, DecideSettings())
    return replace(profile, created=document["created"]).with_digest()
