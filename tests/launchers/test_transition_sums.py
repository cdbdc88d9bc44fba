"""The expected size transition summed piece by piece (topo_gate/launchers/plan/transition_sums.py) is the
sum prior by prior that it replaces, over generated transition tables, earlier sizes and steps
(``benchmarks/input_caps.py`` times it at the most token counts a workload file holds)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from price_tables import PLAIN, SIZES, flat, table

from topo_gate.launchers.plan.pricing import PriceTable
from topo_gate.launchers.plan.transition_sums import expected_transition

NAME = "trtllm_oneshot"


def _prior_by_prior(
    table_: PriceTable, rung: int, nbytes: int, before, *, pessimistic: bool, share: float
) -> float | str:
    """The sum as ``costmodel`` took it before: every earlier size in turn."""
    expected = 0.0
    for prior, chance in before:
        if prior <= nbytes:
            continue
        low, high = table_.transition_bounds(NAME, rung, prior)
        if not pessimistic:
            expected += chance * low
            continue
        if high is None:
            return f"{NAME}: its size transition after {prior}-byte messages was not measured"
        if not table_.transition_measured(NAME, rung, prior):
            high = low + share * (high - low)
        expected += chance * high
    return expected


@st.composite
def _cases(draw: st.DrawFn):
    timed = draw(st.sets(st.sampled_from(SIZES[1:]), min_size=1, max_size=5))
    cost = st.one_of(st.none(), st.floats(0.0, 1000.0))
    transition = {after: [draw(cost) for _ in SIZES] for after in timed}
    plain = {"nccl": {"median": flat(8.0)}, NAME: {"median": flat(4.0), "transition": transition}}
    near = st.sampled_from(SIZES).flatmap(lambda size: st.sampled_from((size - 1, size, size + 1)))
    sizes = sorted(draw(st.sets(st.one_of(near, st.integers(1, 2 * SIZES[-1])), min_size=1, max_size=12)))
    chances = [draw(st.floats(0.01, 1.0)) for _ in sizes]
    before = tuple((size, chance / sum(chances)) for size, chance in zip(sizes, chances, strict=True))
    rung = draw(st.integers(0, len(SIZES) - 1))
    nbytes = draw(st.one_of(near, st.sampled_from(sizes)))
    return table(PLAIN, plain), rung, nbytes, before, draw(st.booleans()), draw(st.floats(0.0, 1.0))


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_the_piecewise_sum_is_the_sum_prior_by_prior(case) -> None:
    table_, rung, nbytes, before, pessimistic, share = case
    want = _prior_by_prior(table_, rung, nbytes, before, pessimistic=pessimistic, share=share)
    got = expected_transition(
        table_, NAME, rung, nbytes, before, pessimistic=pessimistic, bounded_share=share
    )
    if isinstance(want, str):
        assert got == want
    else:
        assert isinstance(got, float) and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)


def test_an_equal_but_distinct_prior_set_is_not_taken_for_a_kept_one() -> None:
    """Prefix sums are kept by the prior set's identity: a new tuple is summed afresh."""
    table_ = table(
        PLAIN,
        {NAME: {"median": flat(4.0), "transition": {SIZES[-1]: flat(100.0)}}, "nccl": {"median": flat(8.0)}},
    )
    first = ((SIZES[-1], 1.0),)
    assert expected_transition(table_, NAME, 0, SIZES[0], first, pessimistic=True, bounded_share=1.0) == 100.0
    second = ((SIZES[-1], 0.5), (SIZES[-1] + 1, 0.5))
    assert expected_transition(table_, NAME, 0, SIZES[0], second, pessimistic=True, bounded_share=1.0) == (
        f"{NAME}: its size transition after {SIZES[-1] + 1}-byte messages was not measured"
    )
