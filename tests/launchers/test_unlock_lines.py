"""Unlock lines keep their word: "if <kernel>'s size transition after N tokens is at most X us ...,
<knobs> would be planned". Each line is held to it by adding the measurement it names to the price
table, at 0.99x and at 1.01x its limit, and planning again: at 0.99x the plan carries the knobs, at
1.01x it does not. The measurement is added as a probe's replay after that size would add it: at each
smaller size of the kernel's table where it was not timed yet.

On the stand-in launcher of ``test_planning_rules`` (its router replaces TensorRT-LLM's here too);
TensorRT-LLM's own ONESHOT line is held to its word in ``test_unlock_lines_trtllm``.
"""

from __future__ import annotations

import copy

import pytest
from price_tables import PLAIN, ROW, SIZES, flat
from test_planning_rules import NCCL_8, facts, fast, lamport, plan, stand_in_launcher

from topo_gate.launchers.plan.choice import Candidate, Unlock
from topo_gate.launchers.plan.workload import Workload

__all__ = ["stand_in_launcher"]  # the stand-in router, used here as there

ONE_AND_EIGHT = Workload.from_weights("one-eight", {1: 0.5, 8: 0.5})
SIDES = ((0.99, True), (1.01, False))


def timed_in_context(isolated_us: float, in_context_us: float) -> dict:
    return {"median": flat(isolated_us), "context": flat(in_context_us)}


def measured(spec: dict, unlock: Unlock, cost_us: float) -> dict:
    """``spec`` (one pattern's backends) with the unlock's measurement added at ``cost_us``."""
    out = copy.deepcopy(spec)
    backend = out[unlock.kernel]
    rows = backend.setdefault("transition", {})
    row = list(rows.get(unlock.largest_prior, [None] * len(SIZES)))
    for rung, size in enumerate(SIZES):
        if size < unlock.largest_prior and row[rung] is None:
            row[rung] = cost_us
    rows[unlock.largest_prior] = row
    return out


def held_to_its_word(
    plain: dict, fused: dict | None, candidates: list[Candidate], workload: Workload = ONE_AND_EIGHT
) -> Unlock:
    """The unlock the plan names, after checking that its measurement, added at 0.99x its limit,
    plans its knobs and at 1.01x does not."""
    fused = fused or {"nccl": {"median": flat(10.0)}}
    found = plan(facts(plain, fused), candidates, workload=workload).unlock
    assert found is not None
    pattern = next(site.pattern for site in found.check.plan if site.name == found.kernel)
    for factor, plans in SIDES:
        cost = factor * found.threshold_us
        again = (
            facts(measured(plain, found, cost), fused)
            if pattern == PLAIN
            else facts(plain, measured(fused, found, cost))
        )
        assert (plan(again, candidates, workload=workload).candidate == found.candidate) is plans, factor
    return found


def test_a_line_keeps_its_word_where_the_tie_share_binds_before_the_room() -> None:
    found = held_to_its_word(
        {**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})}, None, [fast(8, "trtllm_oneshot")]
    )
    assert found.threshold_us < found.room_us / found.chance


def test_a_refusal_on_isolated_prices_that_context_would_pass_is_named() -> None:
    """In context the one-shot kernel costs 2 us against NCCL's 8, and even at today's bound (6 us
    after the 8-token step, from the one after 16) the step passes there; in isolation it costs 7 us
    and the bound refuses it. Admission screens isolated prices first, so the plan waits for a
    measurement, and the line names it: at most 2.16 us, what the isolated 1-token step leaves."""
    plain = {
        "nccl": timed_in_context(8.0, 8.0),
        "trtllm_oneshot": {**timed_in_context(7.0, 2.0), "transition": {16 * ROW: flat(6.0)}},
    }
    candidate = fast(8, "trtllm_oneshot")
    assert plan(facts(plain), [candidate]).candidate != candidate
    found = held_to_its_word(plain, None, [candidate])
    assert (found.kernel, found.largest_prior, found.check.nbytes) == ("trtllm_oneshot", 8 * ROW, ROW)
    assert found.threshold_us == pytest.approx(2.16, rel=2e-3)


def test_a_line_on_in_context_prices_keeps_the_isolated_screens_word() -> None:
    """In context the one-shot kernel is cheaper (3 us) than in isolation (5 us): the room in context
    is larger than the isolated screen allows, and the line states the isolated one's limit."""
    plain = {
        "nccl": timed_in_context(8.0, 8.0),
        "trtllm_oneshot": {**timed_in_context(5.0, 3.0), "transition": {16 * ROW: flat(300.0)}},
    }
    found = held_to_its_word(plain, None, [fast(8, "trtllm_oneshot")])
    assert found.threshold_us == pytest.approx(6.16, rel=2e-3)  # (8.08 - 5) / 0.5


ONE_FOUR_EIGHT = Workload.from_weights("one-four-eight", {1: 1, 4: 1, 8: 1})
ONE_TWO_EIGHT_32 = Workload.from_weights("one-two-eight-32", {1: 1, 2: 1, 8: 1, 32: 1})


def falling(first: int, second: int, first_us: float, second_us: float, median: float) -> dict:
    """One-shot at ``median`` us, its transitions timed after ``first`` tokens (``first_us``) and
    after ``second`` (``second_us``, less: they fall as the earlier message grows)."""
    return {
        **NCCL_8,
        "trtllm_oneshot": lamport({first * ROW: flat(first_us), second * ROW: flat(second_us)}, median),
    }


@pytest.mark.parametrize(
    ("plain", "workload", "limit_us"),
    [
        (falling(4, 16, 20.0, 2.0, 1.0), ONE_TWO_EIGHT_32, 1.24),
        (falling(8, 64, 9.0, 1.0, 3.0), ONE_TWO_EIGHT_32, 2.04),
    ],
    ids=["the-room-understates-it", "the-room-overstates-it"],
)
def test_where_transitions_fall_as_the_earlier_message_grows_the_line_keeps_its_word(
    plain: dict, workload: Workload, limit_us: float
) -> None:
    """A measurement after the step below the larger one moves the bounds of the messages around it,
    which the room at the binding size alone does not see (1.24 us against a room of 0.62 / share
    1/2; 2.04 against 6.24): the limit is the one re-planning finds."""
    found = held_to_its_word(plain, None, [fast(8, "trtllm_oneshot")], workload)
    assert found.threshold_us == pytest.approx(limit_us, rel=2e-3)


def test_where_transitions_fall_no_line_names_a_measurement_that_would_not_unlock_the_plan() -> None:
    """Timed after 8 tokens at 9 us, after 64 at 1 us, one-shot at 5 us: a measurement after 4 tokens
    leaves the room at 1 token 0.24 us, but even at 0 us the one-shot plan saves less than the tie
    share (the after-8 transition is measured, and charged in full): no measurement unlocks it."""
    candidate = fast(8, "trtllm_oneshot")
    choice = plan(facts(falling(8, 64, 9.0, 1.0, 5.0)), [candidate], workload=ONE_FOUR_EIGHT)
    assert choice.candidate != candidate and choice.rejected
    assert choice.unlock is None
