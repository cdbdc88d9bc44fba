"""What a Lamport-style kernel's size transitions cost a step: which earlier messages it pays for,
at which bound on either side, and how a buffer's charge is spread over its calls.

The plan pays the upper bound (the cost measured after the nearest larger-or-equal earlier size,
or ``bounded_share`` of the way there from the lower bound), the default the lower bound (the
largest cost measured after an earlier size no larger than the one it saw): uncertainty never makes
a change look good. Routes are written by hand (``((high_exclusive, backend), ...)``, backend None:
NCCL); tables come from ``price_tables``; the step is 10 known layers: 1 plain + 20 norm sites.
"""

from __future__ import annotations

import pytest
from price_tables import FUSED, NCCL_EVERYWHERE, PLAIN, ROW, SIZES, STEP, flat, table

from topo_gate.launchers.plan.costmodel import Pricing, Side, price_at, same_path, step_check, total
from topo_gate.launchers.plan.pricing import NCCL
from topo_gate.launchers.plan.workload import Workload

#: Every step of the fused sites on NCCL: 20 x 10 us.
FUSED_NCCL_US = 20 * 10.0


def tables(plain: dict, fused: dict | None = None) -> dict:
    fused = fused or {"nccl": {"median": flat(10.0)}}
    return {PLAIN: table(PLAIN, plain), FUSED: table(FUSED, fused)}


def lamport_tables(after: dict) -> dict:
    """NCCL at 8 us, the one-shot kernel at 4 us plus its transition cost ``after`` {bytes: per size}."""
    return tables(
        {"nccl": {"median": flat(8.0)}, "trtllm_oneshot": {"median": flat(4.0), "transition": after}}
    )


def side(plain, fused=NCCL_EVERYWHERE, *, workload: Workload) -> Side:
    return Side.of({PLAIN: plain, FUSED: fused}, NCCL, ROW, workload, STEP)


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


def step_at(tokens: int, plan: Side, default: Side, pricing: Pricing, workload: Workload):
    return next(s for s in total(plan, default, pricing, workload).steps if s.tokens == tokens)


# -- which earlier messages a call pays for ------------------------------------------------------


def test_a_smaller_earlier_message_costs_no_transition_even_above_the_rung_below() -> None:
    """5- and 6-token steps, priced between the 4- and 8-token rungs: 5 tokens is larger than the
    4-token rung, yet a 6-token message after it pays nothing; the 5-token one after a 6-token one
    pays the bound (420 us, half the time) at the 4-token rung, interpolated towards none at 8."""
    workload = Workload.from_weights("five-six", {5: 0.5, 6: 0.5})
    tabs = lamport_tables({SIZES[-1]: flat(420.0)})
    plan, default = (
        side(upto(8, "trtllm_oneshot"), workload=workload),
        side(NCCL_EVERYWHERE, workload=workload),
    )
    pricing = Pricing(tabs, STEP, ROW)
    six = price_at(PLAIN, "trtllm_oneshot", 6 * ROW, plan, pricing, pessimistic=True)
    assert six.transition == 0.0
    assert step_at(6, plan, default, pricing, workload).plan_us == pytest.approx(4.0 + FUSED_NCCL_US)
    five = price_at(PLAIN, "trtllm_oneshot", 5 * ROW, plan, pricing, pessimistic=True)
    assert five.transition == pytest.approx(0.5 * 420.0 * (1 - 0.32192809), rel=1e-6)  # log2(5/4)


def test_the_default_pays_the_lower_bound_after_every_larger_earlier_message() -> None:
    """Steps of 1, 4 and 8 tokens, a third each; the kernel's transition at 1 token was timed after
    4 tokens (90 us) and after 8 (300 us): after the 4-token step the default pays 90, after the
    8-token one the larger 300, so a one-token step expects (90 + 300) / 3."""
    workload = Workload.from_weights("three", {1: 1.0, 4: 1.0, 8: 1.0})
    tabs = lamport_tables({4 * ROW: flat(90.0), 8 * ROW: flat(300.0)})
    default = side(upto(8, "trtllm_oneshot"), workload=workload)
    price = price_at(PLAIN, "trtllm_oneshot", ROW, default, Pricing(tabs, STEP, ROW), pessimistic=False)
    assert price.transition == pytest.approx((90.0 + 300.0) / 3)
    assert step_at(1, default, default, Pricing(tabs, STEP, ROW), workload).default_us == pytest.approx(
        4.0 + (90.0 + 300.0) / 3 + FUSED_NCCL_US
    )


# -- the plan's charge where the transition after the size it saw was not timed -------------------


@pytest.mark.parametrize(
    ("bounded_share", "charge"),
    [(1.0, 300.0), (0.5, 200.0), (0.0, 100.0)],
    ids=["the-bound", "half-way", "the-lower-bound"],
)
def test_an_untimed_transition_is_charged_between_its_bounds_by_the_bounded_share(
    bounded_share: float, charge: float
) -> None:
    """After an 8-token message, timed only after 4 tokens (100 us: the lower bound) and after 16
    (300 us: the upper): the constraint charges the bound; ``unlock``'s share moves it towards 100."""
    workload = Workload.from_weights("one-eight", {1: 0.5, 8: 0.5})
    tabs = lamport_tables({4 * ROW: flat(100.0), 16 * ROW: flat(300.0)})
    plan, default = (
        side(upto(8, "trtllm_oneshot"), workload=workload),
        side(NCCL_EVERYWHERE, workload=workload),
    )
    pricing = Pricing(tabs, STEP, ROW, bounded_share=bounded_share)
    price = price_at(PLAIN, "trtllm_oneshot", ROW, plan, pricing, pessimistic=True)
    assert price.transition == pytest.approx(0.5 * charge)
    assert step_check(ROW, plan, default, pricing).plan_us == pytest.approx(
        4.0 + 0.5 * charge + FUSED_NCCL_US
    )


# -- the same kernel with different messages before it is a changed path --------------------------


def test_shrinking_a_lamport_defaults_range_frees_its_calls_of_the_larger_steps() -> None:
    """The default runs one-shot up to 512 tokens, so a one-token call pays, half the time, the
    transition after the 512-token step (420 us, timed); the plan keeps one-shot at one token only,
    where it now sees one-token messages alone: the same kernel at a different price, a change."""
    workload = Workload.from_weights("mixed", {1: 0.5, 512: 0.5})
    tabs = lamport_tables({512 * ROW: flat(420.0)})
    plan = side(upto(1, "trtllm_oneshot"), workload=workload)
    default = side(upto(512, "trtllm_oneshot"), workload=workload)
    pricing = Pricing(tabs, STEP, ROW)
    assert not same_path(PLAIN, ROW, plan, default, pricing)
    check = step_check(ROW, plan, default, pricing)
    assert check.changed == (PLAIN,)
    assert check.default_us == pytest.approx(4.0 + 0.5 * 420.0 + FUSED_NCCL_US)
    assert check.plan_us == pytest.approx(4.0 + FUSED_NCCL_US)


# -- a buffer's charge per call -------------------------------------------------------------------


def test_a_shared_buffers_transition_is_spread_over_all_its_calls() -> None:
    """vLLM's one workspace serves the plain and the fused one-shot kernels: a one-token step pays its
    transition (100 us after the 8-token step, half the time) once, spread over its 1 + 20 calls."""
    workload = Workload.from_weights("mixed", {1: 0.5, 8: 0.5})
    cost = {8 * ROW: [100.0] * 3 + [None] * 11}
    plain = {"nccl": {"median": flat(8.0)}, "trtllm_oneshot_vllm": {"median": flat(3.0), "transition": cost}}
    fused = {
        "nccl": {"median": flat(10.0)},
        "trtllm_fused_oneshot_vllm": {"median": flat(5.0), "transition": cost},
    }
    plan = side(upto(8, "trtllm_oneshot_vllm"), upto(8, "trtllm_fused_oneshot_vllm"), workload=workload)
    default = side(NCCL_EVERYWHERE, workload=workload)
    one_token = step_at(1, plan, default, Pricing(tables(plain, fused), STEP, ROW), workload)
    spread = 0.5 * 100.0 / 21
    assert one_token.per_call[PLAIN] == (pytest.approx(8.0), pytest.approx(3.0 + spread))
    assert one_token.per_call[FUSED] == (pytest.approx(10.0), pytest.approx(5.0 + spread))
