"""The ratio arm/default over paired rounds, its CI and the verdict (topo_gate/ab/verdict.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.ab.benchmarks import HIGHER, LOWER
from topo_gate.ab.verdict import (
    EXIT_CODES,
    NO_VERDICT,
    REGRESSION,
    SAME,
    WIN,
    compare,
    judge,
    overall,
    summarize,
)

DEFAULT = {1: 100.0, 2: 101.0, 3: 102.0, 4: 99.0, 5: 100.0}


def scaled(factor: float, series=DEFAULT) -> dict[int, float | None]:
    return {r: None if v is None else v * factor for r, v in series.items()}


@pytest.mark.parametrize(
    "factor, direction, verdict",
    [
        (1.10, HIGHER, WIN),
        (0.90, HIGHER, REGRESSION),
        (1.00, HIGHER, SAME),
        (1.01, HIGHER, SAME),  # inside the 2% margin
        (0.90, LOWER, WIN),  # 10% less latency
        (1.10, LOWER, REGRESSION),
        (1.01, LOWER, SAME),
    ],
)
def test_verdict_follows_the_ci_against_the_margin(factor, direction, verdict) -> None:
    found = compare("plan", scaled(factor), DEFAULT, direction=direction)
    assert found.verdict == verdict
    assert found.ratio == pytest.approx(factor)
    assert found.ci[0] <= found.ratio <= found.ci[1]
    assert found.pairs == 5


def test_noise_larger_than_the_effect_is_no_difference() -> None:
    plan = {1: 98.0, 2: 106.0, 3: 97.0, 4: 105.0, 5: 100.0}
    found = compare("plan", plan, DEFAULT, direction=HIGHER)
    assert found.verdict == SAME and "includes 1" in found.reason


def test_a_ci_clear_of_one_but_not_of_the_margin_says_so() -> None:
    found = compare("plan", scaled(1.01), DEFAULT, direction=HIGHER, margin=0.05)
    assert found.verdict == SAME and "excludes 1" in found.reason


def test_fewer_than_three_successes_is_no_verdict() -> None:
    plan = {1: 110.0, 2: None, 3: None, 4: 110.0, 5: None}
    found = compare("plan", plan, DEFAULT, direction=HIGHER)
    assert (found.verdict, found.ratio, found.ci) == (NO_VERDICT, None, None)
    assert found.reason == "plan has 2 successful runs of 5 (a verdict needs 3)"


def test_only_rounds_where_both_arms_succeeded_pair() -> None:
    plan = {1: 110.0, 2: None, 3: 112.2, 4: 108.9, 5: 110.0}
    default = {1: 100.0, 2: 101.0, 3: None, 4: 99.0, 5: 100.0}
    found = compare("plan", plan, default, direction=HIGHER)
    assert found.pairs == 3  # rounds 1, 4 and 5
    assert found.ratio == pytest.approx(110.0 / 100.0)
    few = compare("plan", {**plan, 4: None}, default, direction=HIGHER)
    assert few.verdict == NO_VERDICT and "only 2 rounds" in few.reason


def test_the_bootstrap_is_seeded() -> None:
    plan = {1: 98.0, 2: 106.0, 3: 97.0, 4: 105.0, 5: 100.0}
    first = compare("plan", plan, DEFAULT, direction=HIGHER, seed=7)
    assert compare("plan", plan, DEFAULT, direction=HIGHER, seed=7) == first


@given(
    low=st.floats(0.5, 2.0),
    width=st.floats(0.0, 0.5),
    margin=st.floats(0.0, 0.2),
)
def test_judging_a_lower_is_better_ci_is_judging_its_inverse_higher_is_better(low, width, margin) -> None:
    high = low + width
    assert judge((low, high), direction=LOWER, margin=margin) == judge(
        (1 / high, 1 / low), direction=HIGHER, margin=margin
    )


@given(st.lists(st.floats(1.0, 1e6), min_size=3, max_size=9), st.floats(0.01, 100.0), st.floats(0.5, 2.0))
def test_the_verdict_does_not_depend_on_the_unit(values, unit, effect) -> None:
    default = dict(enumerate(values, start=1))
    plan = {r: v * effect for r, v in default.items()}
    one = compare("plan", plan, default, direction=HIGHER)
    other = compare("plan", scaled(unit, plan), scaled(unit, default), direction=HIGHER)
    assert one.verdict == other.verdict
    assert one.ratio == pytest.approx(other.ratio)


def test_summary_is_the_successful_rounds_with_their_drift() -> None:
    summary = summarize("default", {1: 100.0, 2: None, 3: 104.0, 4: 98.0})
    assert summary.rounds == (1, 3, 4) and summary.samples == (100.0, 104.0, 98.0)
    assert (summary.failures, summary.median, summary.mean) == (1, 100.0, pytest.approx(302 / 3))
    assert summary.spread == pytest.approx(0.06)
    assert summarize("plan", {1: None}).median is None


def test_the_exit_code_follows_the_plan_comparison() -> None:
    nccl = compare("nccl", scaled(0.9), DEFAULT, direction=HIGHER)
    plan = compare("plan", scaled(1.1), DEFAULT, direction=HIGHER)
    assert overall([nccl, plan]) is plan
    assert overall([nccl]) is nccl
    assert {k: EXIT_CODES[k] for k in (WIN, SAME, REGRESSION, NO_VERDICT)} == {
        WIN: 0,
        SAME: 0,
        REGRESSION: 1,
        NO_VERDICT: 1,
    }
