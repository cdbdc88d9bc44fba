"""The cost model at its edges: exact prices per call, the boundaries of the constraint, the sizes a
piece is checked at, and the workload total over its measured share.

Routes are written by hand (``((high_exclusive, backend), ...)``, backend None: NCCL) and tables are
built through the real profile dataclasses (``price_tables``), as in ``test_costmodel.py``; the
numbers are the tests' own, stated where each test builds them.
"""

from __future__ import annotations

import pytest
from price_tables import FUSED, NCCL_EVERYWHERE, ONE_TOKEN, PLAIN, ROW, SIZES, STEP, flat, table

from topo_gate.launchers.plan.costmodel import (
    Price,
    Pricing,
    Side,
    Step,
    checked_sizes,
    pieces,
    price_at,
    problems,
    step_check,
    total,
)
from topo_gate.launchers.plan.pricing import NCCL
from topo_gate.launchers.plan.workload import Workload

#: Half the steps one token, half 512 tokens: a one-token call follows a 512-token message half the time.
MIXED = Workload.from_weights("mixed", {1: 0.5, 512: 0.5})
#: A Lamport-style kernel whose transition was measured only after the largest size: after any
#: smaller message it is bounded (at most 420 us, at least nothing measured).
BOUNDED_LAMPORT = {"median": flat(4.0), "transition": {SIZES[-1]: flat(420.0)}}
BEYOND = SIZES[-1] // ROW * 2  # a token count past the largest measured size


def tables(plain: dict, fused: dict | None = None) -> dict:
    fused = fused or {"nccl": {"median": flat(10.0)}}
    return {PLAIN: table(PLAIN, plain), FUSED: table(FUSED, fused)}


def side(plain, fused=NCCL_EVERYWHERE, workload: Workload = ONE_TOKEN) -> Side:
    return Side.of({PLAIN: plain, FUSED: fused}, NCCL, ROW, workload)


def pricing(tabs: dict) -> Pricing:
    return Pricing(tabs, STEP, ROW)


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


# -- a price per call: the median (or CI high) plus the transition spread over a step's calls ------


def test_a_transition_is_spread_over_the_calls_in_its_buffer_only() -> None:
    """Per call, a buffer's transition is spread over the step's calls that use that buffer: a plain
    Lamport kernel alone in its buffer carries all of it on its one call, not 1/21 of it."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": BOUNDED_LAMPORT})
    plan = side(upto(512, "trtllm_oneshot"), workload=MIXED)
    check = step_check(ROW, plan, side(NCCL_EVERYWHERE, workload=MIXED), pricing(tabs))
    assert check.per_call(PLAIN, 1) == pytest.approx(4.0 + 0.5 * 420.0)
    assert check.per_call(FUSED, 1) == pytest.approx(10.0)


def test_a_step_of_unknown_depth_is_a_32_layer_one() -> None:
    """DEFAULT_LAYERS: without --model a step is 32 layers, 2 x 32 fused + 1 plain calls, and assumed."""
    step = Step()
    assert step.layers == 32 and step.calls == 65
    assert not step.layers_known
    assert not Step(layers=48).layers_known


# -- transitions: which earlier messages a call pays for, and at which bound ----------------------


def test_a_message_pays_no_transition_after_one_of_its_own_size() -> None:
    """Only larger earlier messages cost a transition: a step of 3 tokens after another of 3 pays none,
    also where its price is interpolated from the rung below (2 tokens), where 3 tokens is larger."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": BOUNDED_LAMPORT})
    three = Workload.from_weights("three", {3: 1.0})
    plan = side(upto(4, "trtllm_oneshot"), workload=three)
    price = price_at(PLAIN, "trtllm_oneshot", 3 * ROW, plan, pricing(tabs), pessimistic=True)
    assert isinstance(price, Price) and price.transition == 0.0


def test_a_transition_measured_as_nothing_costs_nothing() -> None:
    """A measured zero is an upper bound of zero: the plan pays nothing for it."""
    lamport = {"median": flat(4.0), "transition": {SIZES[-1]: flat(0.0)}}
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": lamport})
    plan = side(upto(512, "trtllm_oneshot"), workload=MIXED)
    price = price_at(PLAIN, "trtllm_oneshot", ROW, plan, pricing(tabs), pessimistic=True)
    assert isinstance(price, Price) and price.transition == 0.0
    assert problems(plan, side(NCCL_EVERYWHERE, workload=MIXED), pricing(tabs)) == []


def test_a_lamport_default_is_judged_at_its_lower_transition_bound() -> None:
    """Uncertainty never makes a change look good: replacing a Lamport default (4 us, a bounded
    transition) by NCCL (8 us) is judged against the default's lower bound, nothing, and refused."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": BOUNDED_LAMPORT})
    default = side(upto(512, "trtllm_oneshot"), workload=MIXED)
    [problem] = problems(side(NCCL_EVERYWHERE, workload=MIXED), default, pricing(tabs))
    assert problem.why == (
        "step slower at 1 token (14336 B): 208.0 us/step against the default's 204.0 (CI up to 204.0)"
    )


def test_a_step_charges_the_plan_the_upper_transition_bound_and_the_default_none() -> None:
    """The per-step total: the plan's Lamport buffer pays, once per step, 420 us (its upper bound)
    times the chance its last message was the 512-token one: every step uses that buffer, so half;
    the default (NCCL) nothing. Per call, all of it on the one call in that buffer."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": BOUNDED_LAMPORT})
    plan, default = side(upto(512, "trtllm_oneshot"), workload=MIXED), side(NCCL_EVERYWHERE, workload=MIXED)
    one_token = next(s for s in total(plan, default, pricing(tabs), MIXED).steps if s.tokens == 1)
    assert one_token.default_us == pytest.approx(8.0 + 20 * 10.0)
    assert one_token.plan_us == pytest.approx(4.0 + 20 * 10.0 + 0.5 * 420.0)
    assert one_token.per_call[PLAIN] == pytest.approx((8.0, 4.0 + 0.5 * 420.0))


# -- the constraint: at the default's CI high, beyond the ladder, after a same-path piece ---------


def test_a_plan_exactly_at_the_defaults_ci_high_is_admitted() -> None:
    """At most the upper end of the default's CI: equal to it is not slower."""
    at_high = 8.0 * (1 + 0.01)  # the default's CI high, computed as the table computes it
    tabs = tables({"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(at_high)}})
    assert problems(side(upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs)) == []


def test_a_refusal_beyond_the_ladder_names_the_largest_measured_size() -> None:
    """Sizes beyond the largest rung never change, and the reason says which rung that is."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(4.0)}})
    [problem] = problems(side(((None, "vllm_custom"),)), side(NCCL_EVERYWHERE), pricing(tabs))
    assert problem.why == f"changes sizes beyond the largest measured ({SIZES[-1]} bytes)"
    beyond = price_at(PLAIN, NCCL, BEYOND * ROW, side(NCCL_EVERYWHERE), pricing(tabs), pessimistic=False)
    assert beyond == f"beyond the largest measured size ({SIZES[-1]} bytes)"


def test_a_plan_up_to_the_largest_rung_is_checked_not_refused() -> None:
    """The largest rung itself is measured: a piece ending there is checked like any other."""
    assert checked_sizes(SIZES, SIZES[-2], SIZES[-1]) == [SIZES[-2], SIZES[-1]]
    assert checked_sizes(SIZES, SIZES[-1], SIZES[-1]) == [SIZES[-1]]
    tabs = tables({"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(4.0)}})
    largest = SIZES[-1] // ROW
    assert problems(side(upto(largest, "vllm_custom")), side(NCCL_EVERYWHERE), pricing(tabs)) == []


def test_a_slower_piece_after_an_unchanged_one_is_refused() -> None:
    """Every piece of a pattern is checked: one kept as the default does not end the check."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(12.0)}})
    plan = side(((2 * ROW, None), (64 * ROW + 1, "pcie_ipc"), (None, None)))  # NCCL at 1 token
    [problem] = problems(plan, side(NCCL_EVERYWHERE), pricing(tabs))
    assert (problem.first, problem.last) == (2 * ROW, 2 * ROW)
    assert problem.why.startswith("step slower at 2 tokens (28672 B)")


def test_turning_off_a_faster_default_outside_the_workload_is_refused() -> None:
    """Never slower at any size, not only the workload's: NCCL instead of a faster default path the
    workload never reaches (2-64 tokens; the workload is one token) is still refused there."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(4.0)}})
    default = side(((2 * ROW, None), (64 * ROW + 1, "pcie_ipc"), (None, None)))
    [problem] = problems(side(NCCL_EVERYWHERE), default, pricing(tabs))
    assert (problem.plan, problem.default) == (NCCL, "pcie_ipc")
    assert (problem.first, problem.last) == (2 * ROW, 2 * ROW)
    assert problem.why.startswith("step slower at 2 tokens (28672 B)")


# -- pieces: whole-token ends at a boundary on a token and just past one --------------------------


def test_a_boundary_on_a_whole_token_starts_the_next_piece_there() -> None:
    """A route ending below 3 tokens exactly: 1-2 tokens on one side of it, 3 and up on the other."""
    plan = side(((3 * ROW, "a"), (None, None)))
    cut = [(p.first, p.last, p.plan) for p in pieces(plan, side(NCCL_EVERYWHERE), PLAIN, ROW)]
    assert cut == [(ROW, 2 * ROW, "a"), (3 * ROW, None, NCCL)]


def test_the_first_piece_starts_at_one_token() -> None:
    """The smallest message a pattern sends is one token: a refusal of the first piece says so."""
    tabs = tables({"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(12.0)}})
    [problem] = problems(side(upto(4, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs))
    assert (problem.first, problem.last) == (ROW, ROW)
    assert problem.why.startswith(f"step slower at 1 token ({ROW} B)")


# -- the workload total: weighted means over the measured share -----------------------------------

#: A quarter of the steps at 1 token, a quarter at 8, half beyond the ladder (not measured).
PART_MEASURED = Workload.from_weights("part", {1: 0.25, 8: 0.25, BEYOND: 0.5})


def test_totals_and_per_call_prices_are_means_over_the_measured_share() -> None:
    """Steps beyond the ladder are left out, and the rest weighted to a whole (0.25 + 0.25 -> 1)."""
    plain = {
        "nccl": {"median": [8.0, 9.0, 10.0, 12.0, *flat(20.0)[4:]]},
        "vllm_custom": {"median": flat(4.0)},
    }
    tabs = tables(plain)
    plan = side(upto(8, "vllm_custom"), workload=PART_MEASURED)
    cost = total(plan, side(NCCL_EVERYWHERE, workload=PART_MEASURED), pricing(tabs), PART_MEASURED)
    assert [s.default_us for s in cost.steps if s.tokens == BEYOND] == [None]
    assert cost.measured_weight == pytest.approx(0.5)
    assert cost.default_us == pytest.approx(0.5 * (8.0 + 200.0) + 0.5 * (12.0 + 200.0))
    assert cost.plan_us == pytest.approx(4.0 + 200.0)
    assert cost.per_call(PLAIN, 0) == pytest.approx(0.5 * 8.0 + 0.5 * 12.0)
    assert cost.per_call(PLAIN, 1) == pytest.approx(4.0)
    assert cost.per_call(FUSED, 0) == pytest.approx(10.0)


def test_a_workload_measured_nowhere_has_no_total() -> None:
    """No measured share: no mean, rather than a division by nothing."""
    beyond = Workload.from_weights("beyond", {BEYOND: 1.0})
    tabs = tables({"nccl": {"median": flat(8.0)}})
    cost = total(side(NCCL_EVERYWHERE), side(NCCL_EVERYWHERE), pricing(tabs), beyond)
    assert cost.measured_weight == 0
    assert (cost.default_us, cost.plan_us, cost.per_call(PLAIN, 0), cost.per_call(PLAIN, 1)) == (None,) * 4
