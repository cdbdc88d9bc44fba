"""Statistics for trial samples: medians, their order-statistic CIs, and bootstrap CIs of speedups.

Pure, stdlib. ``median_interval`` is the CI of one series' median (a latency: the profile's price
table and the report's figures); the rest of this docstring is about speedups.

The quantity decided on is the *speedup* of a backend at one message size:
``median(nccl samples) / median(backend samples)`` (> 1: the backend is faster).  Each sample is one
round's per-call latency of the whole group, and the rounds interleave backends (round r measured
NCCL, then each backend, back to back), so drift during the run hits round r of every backend alike.

Method: *paired percentile bootstrap over rounds*.  One resample draws n round indices with
replacement and takes, for every backend at that size, the median of its samples at those indices;
the speedup of that resample is ``median(nccl[idx]) / median(backend[idx])``.  The CI is the
``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the resampled speedups.  Drawing the *same*
indices for NCCL and the candidate keeps the pairing the interleaving created, which gives narrower,
honest intervals when drift is common to both (the Hoefler & Belli SC'15 advice: medians, and
nonparametric CIs, because latency distributions are skewed and multi-modal).  When a backend has a
different number of rounds than NCCL (a trial stopped early), pairing is impossible and its samples
are resampled independently of NCCL's.

Cost: the indices and NCCL's resampled median are shared by every backend at the size, so a resample
costs one index draw plus one sort of ~15 values per series: 2000 resamples over 100 (backend, size)
cells of 15 rounds take ~0.3 s of CPU on one core (0.27 s measured: 10 sizes of 10 candidates each).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median  # the mean of the two middle values for an even count; ValueError on none


@dataclass(frozen=True)
class Speedup:
    """A backend's speedup over NCCL at one size: point estimate (ratio of medians) and its CI."""

    ratio: float
    low: float
    high: float
    rounds: int  # samples the estimate rests on (the smaller of the two series)


def median_interval(samples: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free CI of the median: the order statistics ``(x_(k), x_(n+1-k))`` with the
    largest ``k`` whose binomial(n, 1/2) tail ``P(B < k)`` is at most ``(1 - level) / 2``.

    15 rounds at 95% give ``(x_(4), x_(12))`` (coverage 96.5%).  Too few samples for any such ``k``
    (n < 6 at 95%): the whole range, which is wider than the interval, never narrower.
    """
    ordered = sorted(samples)
    n = len(ordered)
    if n == 0:
        raise ValueError("interval of no samples")
    alpha_half = (1.0 - level) / 2.0
    tail, k = 0.0, 0
    while k < n:
        tail_next = tail + math.comb(n, k) / 2.0**n  # P(B <= k) = P(B < k + 1)
        if tail_next > alpha_half:
            break
        tail, k = tail_next, k + 1
    if k == 0:
        return ordered[0], ordered[-1]
    return ordered[k - 1], ordered[n - k]


def bootstrap_speedups(
    baseline_us: Sequence[float],
    candidates_us: Mapping[str, Sequence[float]],
    *,
    level: float = 0.95,
    resamples: int = 2000,
    rng: random.Random,
) -> dict[str, Speedup]:
    """Speedup of each candidate over the baseline, with a paired percentile bootstrap CI.

    ``baseline_us`` and every candidate series are per-round latencies (all > 0).  ``rng`` is the
    caller's seeded generator, so results are reproducible; the caller seeds it per size so that one
    cell's interval does not depend on which other cells exist.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"CI level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"need at least one resample, got {resamples}")
    for name, vals in candidates_us.items():
        if not vals:
            raise ValueError(f"{name}: no samples")
    base = list(baseline_us)
    base_median = median(base)
    n = len(base)
    paired = {name: list(vals) for name, vals in candidates_us.items() if len(vals) == n}
    unpaired = {name: list(vals) for name, vals in candidates_us.items() if len(vals) != n}

    draws: dict[str, list[float]] = {name: [] for name in candidates_us}
    uniform = rng.random  # a local name: this loop runs ~10^5 times per decide()
    for _ in range(resamples):
        idx = [int(uniform() * n) for _ in range(n)]
        base_resampled = median([base[i] for i in idx])
        for name, vals in paired.items():
            draws[name].append(base_resampled / median([vals[i] for i in idx]))
        for name, vals in unpaired.items():
            m = len(vals)
            own = median([vals[int(uniform() * m)] for _ in range(m)])
            draws[name].append(base_resampled / own)

    result = {}
    for name, vals in candidates_us.items():
        ratios = sorted(draws[name])
        result[name] = Speedup(
            ratio=base_median / median(vals),
            low=_percentile(ratios, (1.0 - level) / 2.0),
            high=_percentile(ratios, (1.0 + level) / 2.0),
            rounds=min(n, len(vals)),
        )
    return result


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default, "linear") of an already sorted series."""
    pos = q * (len(ordered) - 1)
    lower = math.floor(pos)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (pos - lower)
