"""The tie rule among admissible knob sets: the ``TIE_FRACTION`` margin buys fewer knobs, so it is
asked only of a candidate with more knobs than the best so far; between as many knobs the cheaper
wins, whichever was tried first."""

from __future__ import annotations

import pytest
from knob_cases import FUSION_LIMIT_TIE
from price_tables import ROW, STEP

from topo_gate.launchers.plan.choice import TIE_FRACTION, Candidate, Variant, _best, _score
from topo_gate.launchers.plan.costmodel import Pricing, Side, StepCost, Total
from topo_gate.launchers.routes import Context, Knobs


def priced(knob_count: int, plan_us: float, name: str = "k", default_us: float = 100.0):
    """A candidate of ``knob_count`` knobs whose one variant costs ``plan_us`` per step."""
    ctx = Context(2, (9, 0), "nvswitch", 7168)
    side = Side({}, "nccl", {})
    total = Total((StepCost(1, 1.0, default_us, plan_us),))
    candidate = Candidate(Knobs(config={f"{name}{i}": i for i in range(knob_count)}))
    return candidate, (Variant(ctx, Pricing({}, STEP, ROW), side, side, (), total),)


def test_between_as_many_knobs_the_cheaper_wins_by_any_amount_in_either_order() -> None:
    base = priced(0, 100.0)
    first, second = priced(1, 90.0, "a"), priced(1, 89.9, "b")  # 0.1 apart: a tenth of the margin
    assert _best([base, first, second]) is second
    assert _best([base, second, first]) is second


def test_an_exact_tie_between_as_many_knobs_keeps_the_one_tried_first() -> None:
    base = priced(0, 100.0)
    first, second = priced(1, 90.0, "a"), priced(1, 90.0, "b")
    assert _best([base, first, second]) is first
    assert _best([base, second, first]) is second


@pytest.mark.parametrize(("plan_us", "wins"), [(89.0, False), (88.999, True)], ids=["at-margin", "beyond"])
def test_more_knobs_than_the_best_so_far_still_need_the_margin(plan_us: float, wins: bool) -> None:
    assert TIE_FRACTION == 0.01
    one, two = priced(1, 90.0), priced(2, plan_us)
    assert _best([priced(0, 100.0), one, two]) is (two if wins else one)


def test_a_cheaper_candidate_as_long_as_one_that_lost_on_the_margin_needs_the_margin_too() -> None:
    """The margin is asked against the best so far (no knobs), not against a candidate of the same
    count that never became best."""
    base = priced(0, 100.0)
    within, still_within = priced(1, 99.5, "a"), priced(1, 99.1, "b")
    assert _best([base, within, still_within]) is base


def saving(variants: tuple[Variant, ...]) -> float:
    plan_us, default_us = _score(variants)
    return default_us - plan_us


def test_the_plan_on_a_node_where_the_larger_fusion_limit_is_a_little_cheaper_is_that_limit() -> None:
    plan = FUSION_LIMIT_TIE.plan()
    assert plan.args == FUSION_LIMIT_TIE.args
    choice = plan.choice
    assert choice is not None
    chosen = saving(choice.variants)
    assert chosen == max(saving(variants) for _, variants in choice.admitted)
    # The smaller limit, as many knobs and tried first, is admissible and within the margin of it.
    smaller = choice.candidate.knobs.args[-1].replace("0.4375", "0.21875")
    (within,) = [
        variants
        for candidate, variants in choice.admitted
        if candidate.knobs.args[-1:] == (smaller,) and candidate.knob_count == choice.candidate.knob_count
    ]
    assert 0 < chosen - saving(within) < TIE_FRACTION * _score(choice.variants)[1]
