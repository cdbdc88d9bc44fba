"""A step with no plain call site: vLLM's, whose embedding all-reduce is fused with the first norm
(``Step.embedding_fused``). Its plain route sends nothing: it is neither checked nor priced, leaves
nothing in any buffer, and has no per-call price, while the fused sites are checked and priced as
in any step.

Routes are written by hand (``((high_exclusive, backend), ...)``, backend None: NCCL); tables come
from ``price_tables``; the step is 10 known layers with the embedding fused: 0 plain + 21 norm sites.
"""

from __future__ import annotations

import pytest
from price_tables import FUSED, NCCL_EVERYWHERE, ONE_TOKEN, PLAIN, ROW, SIZES, flat, table

from topo_gate.launchers.plan.costmodel import Pricing, Side, Step, problems, step_check, step_sizes, total
from topo_gate.launchers.plan.pricing import NCCL
from topo_gate.launchers.plan.workload import Workload

VLLM_STEP = Step(layers=10, layers_known=True, embedding_fused=True)
#: Half the steps one token, half 512 tokens: a one-token call follows a 512-token message half the time.
MIXED = Workload.from_weights("mixed", {1: 0.5, 512: 0.5})
#: Anywhere, to a kernel nobody measured: a plain route no check may look at.
UNMEASURED_EVERYWHERE = ((None, "mystery"),)


def tables(fused: dict) -> dict:
    return {PLAIN: table(PLAIN, {"nccl": {"median": flat(8.0)}}), FUSED: table(FUSED, fused)}


def side(plain, fused, workload: Workload = ONE_TOKEN) -> Side:
    return Side.of({PLAIN: plain, FUSED: fused}, NCCL, ROW, workload, VLLM_STEP)


def pricing(tabs: dict) -> Pricing:
    return Pricing(tabs, VLLM_STEP, ROW)


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


def test_the_plain_route_is_not_checked_and_the_fused_sites_are_priced() -> None:
    """A plain route to an unmeasured kernel beyond the ladder would be refused in a step with a
    plain site; here only the fused change counts: checked at its rungs, admitted, 21 x 6 us."""
    tabs = tables({"nccl": {"median": flat(10.0)}, "vllm_custom+rmsnorm": {"median": flat(6.0)}})
    plan = side(UNMEASURED_EVERYWHERE, upto(64, "vllm_custom"))
    default = side(NCCL_EVERYWHERE, NCCL_EVERYWHERE)
    assert step_sizes(plan, default, pricing(tabs)) == [n for n in SIZES if n <= 64 * ROW]
    assert problems(plan, default, pricing(tabs)) == []
    cost = total(plan, default, pricing(tabs), ONE_TOKEN)
    assert (cost.default_us, cost.plan_us) == (pytest.approx(21 * 10.0), pytest.approx(21 * 6.0))


def test_a_pattern_without_a_site_has_no_per_call_price() -> None:
    tabs = tables({"nccl": {"median": flat(10.0)}, "vllm_custom+rmsnorm": {"median": flat(6.0)}})
    plan = side(UNMEASURED_EVERYWHERE, upto(64, "vllm_custom"))
    check = step_check(ROW, plan, side(NCCL_EVERYWHERE, NCCL_EVERYWHERE), pricing(tabs))
    assert [site.pattern for site in check.plan] == [FUSED]
    assert (check.per_call(PLAIN, 0), check.per_call(PLAIN, 1)) == (None, None)
    assert (check.per_call(FUSED, 0), check.per_call(FUSED, 1)) == (pytest.approx(10.0), pytest.approx(6.0))


def test_a_slower_fused_change_is_refused() -> None:
    tabs = tables({"nccl": {"median": flat(10.0)}, "vllm_custom+rmsnorm": {"median": flat(12.0)}})
    plan = side(NCCL_EVERYWHERE, upto(64, "vllm_custom"))
    [problem] = problems(plan, side(NCCL_EVERYWHERE, NCCL_EVERYWHERE), pricing(tabs))
    # 21 x 12 = 252 against 21 x 10 = 210 (CI up to 21 x 10.1 = 212.1).
    assert problem.pattern == FUSED
    assert problem.why == (
        "step slower at 1 token (14336 B): 252.0 us/step against the default's 210.0 (CI up to 212.1)"
    )


def test_the_fused_sites_fill_their_buffer_without_a_plain_site() -> None:
    """The fused one-shot kernel is the only user of vLLM's workspace in this step: a one-token step
    pays, once, the transition after the 512-token steps that went through it (half the time)."""
    lamport = {"median": flat(5.0), "transition": {SIZES[-1]: flat(420.0)}}
    tabs = tables({"nccl": {"median": flat(10.0)}, "trtllm_fused_oneshot_vllm": lamport})
    plan = side(NCCL_EVERYWHERE, upto(512, "trtllm_fused_oneshot_vllm"), MIXED)
    default = side(NCCL_EVERYWHERE, NCCL_EVERYWHERE, MIXED)
    one_token = next(s for s in total(plan, default, pricing(tabs), MIXED).steps if s.tokens == 1)
    assert one_token.plan_us == pytest.approx(21 * 5.0 + 0.5 * 420.0)
