"""evidence.stats: medians and the paired percentile bootstrap of speedups."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.evidence.stats import bootstrap_speedups, median

latencies = st.lists(st.floats(min_value=1.0, max_value=1e4, allow_nan=False), min_size=3, max_size=25)


def test_median_odd_and_even():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_median_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        median([])


def test_proportional_series_give_an_exact_interval_because_rounds_are_paired():
    # Drift common to both series (the reason rounds are interleaved) must not widen the interval:
    # every paired resample of x and x/2 has a ratio of exactly 2.  Unpaired resampling would not.
    nccl = [10.0, 14.0, 11.0, 30.0, 12.0, 10.5, 13.0, 25.0, 11.5, 12.5, 10.2, 14.5, 11.1, 28.0, 12.2]
    fast = [x / 2 for x in nccl]
    result = bootstrap_speedups(nccl, {"fast": fast}, rng=random.Random(0))["fast"]
    assert (result.ratio, result.low, result.high) == (2.0, 2.0, 2.0)
    assert result.rounds == 15


def test_unequal_round_counts_are_resampled_independently():
    nccl = [10.0 + (i % 3) for i in range(15)]
    short = [5.0 + (i % 3) / 2 for i in range(9)]
    result = bootstrap_speedups(nccl, {"short": short}, rng=random.Random(0))["short"]
    assert result.rounds == 9
    assert result.low < result.ratio < result.high  # independent draws: a real spread


def test_same_seed_same_interval_and_wider_level_wider_interval():
    rng_seed = 7
    nccl = [random.Random(1).uniform(9, 13) for _ in range(15)]
    other = [random.Random(2).uniform(7, 12) for _ in range(15)]
    a = bootstrap_speedups(nccl, {"b": other}, rng=random.Random(rng_seed))["b"]
    b = bootstrap_speedups(nccl, {"b": other}, rng=random.Random(rng_seed))["b"]
    assert a == b
    narrow = bootstrap_speedups(nccl, {"b": other}, level=0.5, rng=random.Random(rng_seed))["b"]
    assert a.low <= narrow.low <= narrow.high <= a.high


@settings(max_examples=60, deadline=None)
@given(base=latencies, scale=st.floats(min_value=0.2, max_value=5.0), data=st.data())
def test_interval_lies_within_the_range_of_round_ratios(base, scale, data):
    # A resampled ratio of medians can never leave [min, max] of the per-sample ratio extremes.
    other = data.draw(
        st.lists(st.floats(min_value=1.0, max_value=1e4), min_size=len(base), max_size=len(base))
    )
    result = bootstrap_speedups(base, {"b": other}, resamples=200, rng=random.Random(0))["b"]
    lowest = min(base) / max(other)
    highest = max(base) / min(other)
    assert lowest <= result.low <= result.high <= highest


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        bootstrap_speedups([1.0], {"b": [1.0]}, level=1.0, rng=random.Random(0))
    with pytest.raises(ValueError):
        bootstrap_speedups([1.0], {"b": []}, rng=random.Random(0))
