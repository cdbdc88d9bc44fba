"""The cost model on hand-built routes and tables: the per-size constraint, transitions, the objective.

Routes here are written by hand (``((high_exclusive, backend), ...)``), so these tests pin the pricing
rules themselves, not a launcher's routing.
"""

from __future__ import annotations

import pytest
from price_tables import FUSED, NCCL_EVERYWHERE, ONE_TOKEN, PLAIN, ROW, SIZES, STEP, flat, scaled, table

from topo_gate.launchers.plan.costmodel import (
    Pricing,
    Side,
    checked_sizes,
    pieces,
    price_at,
    problems,
    total,
)
from topo_gate.launchers.plan.pricing import NCCL
from topo_gate.launchers.plan.workload import Workload


def tables(plain: dict, fused: dict | None = None) -> dict:
    fused = fused or {"nccl": {"median": flat(10.0)}}
    return {PLAIN: table(PLAIN, plain), FUSED: table(FUSED, fused)}


def side(plain, fused=NCCL_EVERYWHERE, workload: Workload = ONE_TOKEN, nccl: str = NCCL) -> Side:
    return Side.of({PLAIN: plain, FUSED: fused}, nccl, ROW, workload)


def pricing(tabs: dict, context: frozenset = frozenset()) -> Pricing:
    return Pricing(tabs, STEP, ROW, context)


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


def test_a_faster_measured_path_is_admitted_and_saves() -> None:
    tabs = tables({"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(4.0)}})
    plan, default = side(upto(64, "vllm_custom")), side(NCCL_EVERYWHERE)
    assert problems(plan, default, pricing(tabs)) == []
    cost = total(plan, default, pricing(tabs), ONE_TOKEN)
    assert cost.default_us == pytest.approx(8.0 * 1 + 10.0 * 20)
    assert cost.plan_us == pytest.approx(4.0 * 1 + 10.0 * 20)


def test_a_slower_path_beyond_the_defaults_noise_is_refused() -> None:
    tabs = tables({"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(8.2)}})
    [problem] = problems(side(upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs))
    assert problem.pattern == PLAIN and problem.plan == "pcie_ipc" and problem.default == NCCL
    assert "slower at" in problem.why


def test_a_path_within_the_defaults_ci_is_admitted() -> None:
    # The default's CI reaches 8.08 (1%): a plan at 8.05 is inside its own noise, not slower.
    tabs = tables({"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(8.05)}})
    assert problems(side(upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs)) == []


def test_an_unmeasured_default_path_is_never_replaced() -> None:
    tabs = tables({"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(1.0)}})
    [problem] = problems(side(upto(64, "vllm_custom")), side(upto(64, "mystery")), pricing(tabs))
    assert problem.why.startswith("allreduce: default path not measured at 1 token")
    assert problem.why.endswith("left as it is")


def test_an_unmeasured_plan_path_is_never_taken() -> None:
    tabs = tables({"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": [4.0] * 5 + [None] + [4.0] * 8}})
    [problem] = problems(side(upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs))
    assert problem.why.startswith("allreduce: not measured at 32 tokens")


def test_sizes_beyond_the_largest_measured_are_never_changed() -> None:
    tabs = tables({"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(4.0)}})
    [problem] = problems(side(((None, "vllm_custom"),)), side(NCCL_EVERYWHERE), pricing(tabs))
    assert "beyond the largest measured" in problem.why


def test_a_piece_is_checked_at_its_ends_and_every_rung_inside() -> None:
    assert checked_sizes(SIZES, ROW * 3, ROW * 40) == [
        ROW * 3,
        ROW * 4,
        ROW * 8,
        ROW * 16,
        ROW * 32,
        ROW * 40,
    ]
    assert checked_sizes(SIZES, ROW, None) is None
    assert checked_sizes(SIZES, ROW, SIZES[-1] + ROW) is None


def test_between_rungs_prices_are_linear_in_log_size() -> None:
    tabs = tables({"nccl": {"median": scaled(8.0, 1.0)}})
    at_1, at_2 = 8.0, 9.0
    mid = price_at(PLAIN, NCCL, int(ROW * 2**0.5), side(NCCL_EVERYWHERE), pricing(tabs), pessimistic=False)
    assert mid.median == pytest.approx((at_1 + at_2) / 2, rel=1e-3)


def test_a_crossing_between_two_rungs_refuses_the_plan_at_the_rung_it_loses() -> None:
    # fast wins at 512 tokens, loses at 1024: a plan sending 600 tokens to it is checked at 600 (won,
    # by interpolation) -- but one sending up to 1024 is checked at 1024, where it loses.
    nccl = scaled(8.0, 0.1)
    fast = [m * 0.5 if size <= ROW * 512 else m * 1.2 for m, size in zip(nccl, SIZES, strict=True)]
    tabs = tables({"nccl": {"median": nccl}, "vllm_custom": {"median": fast}})
    assert problems(side(upto(513, "vllm_custom")), side(NCCL_EVERYWHERE), pricing(tabs)) == []
    assert problems(side(upto(1024, "vllm_custom")), side(NCCL_EVERYWHERE), pricing(tabs))


def test_in_context_prices_replace_isolated_ones_only_where_chosen() -> None:
    tabs = tables(
        {
            "nccl": {"median": flat(8.0), "context": flat(9.0)},
            "vllm_custom": {"median": flat(4.0), "context": flat(8.5)},
        }
    )
    plan, default = side(upto(1, "vllm_custom")), side(NCCL_EVERYWHERE)
    isolated = total(plan, default, pricing(tabs), ONE_TOKEN)
    in_context = total(plan, default, pricing(tabs, frozenset({(PLAIN, 0)})), ONE_TOKEN)
    assert isolated.default_us - isolated.plan_us == pytest.approx(4.0)
    assert in_context.default_us - in_context.plan_us == pytest.approx(0.5)


def test_the_plan_pays_the_upper_transition_bound_and_the_default_the_lower() -> None:
    # Transition of "trtllm_oneshot" measured only after the largest size: after a 512-token message it
    # is at most that (plan) and at least nothing measured (default).
    workload = Workload.from_weights("mixed", {1: 0.5, 512: 0.5})
    lamport = {"median": flat(4.0), "transition": {SIZES[-1]: flat(420.0)}}
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": lamport})
    plan = side(upto(512, "trtllm_oneshot"), workload=workload)
    default = side(upto(512, "trtllm_oneshot"), workload=workload)
    one = price_at(PLAIN, "trtllm_oneshot", ROW, plan, pricing(tabs), pessimistic=True)
    assert one.transition == pytest.approx(0.5 * 420.0)  # the 512-token step before it, half the time
    assert price_at(PLAIN, "trtllm_oneshot", ROW, default, pricing(tabs), pessimistic=False).transition == 0.0
    # The same path seeing the same messages is the same price: nothing to refuse.
    assert problems(plan, default, pricing(tabs)) == []


def test_a_lamport_plan_is_refused_when_its_transition_makes_it_dearer() -> None:
    workload = Workload.from_weights("mixed", {1: 0.5, 512: 0.5})
    lamport = {"median": flat(4.0), "transition": {SIZES[-1]: flat(420.0)}}  # 210 us / 21 calls = +10
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": lamport})
    assert problems(
        side(upto(512, "trtllm_oneshot"), workload=workload),
        side(NCCL_EVERYWHERE, workload=workload),
        pricing(tabs),
    )
    # Alone, without larger steps before it, the same path is cheaper.
    assert problems(side(upto(512, "trtllm_oneshot")), side(NCCL_EVERYWHERE), pricing(tabs)) == []


def test_transitions_are_paid_once_per_buffer_per_step() -> None:
    workload = Workload.from_weights("mixed", {1: 0.5, 8: 0.5})
    cost = {8 * ROW: [100.0] * 3 + [None] * 11}
    plain = {"nccl": {"median": flat(8.0)}, "trtllm_oneshot_vllm": {"median": flat(3.0), "transition": cost}}
    fused = {
        "nccl": {"median": flat(10.0)},
        "trtllm_fused_oneshot_vllm": {"median": flat(5.0), "transition": cost},
    }
    tabs = tables(plain, fused)
    plan = side(upto(8, "trtllm_oneshot_vllm"), upto(8, "trtllm_fused_oneshot_vllm"), workload=workload)
    steps = total(plan, side(NCCL_EVERYWHERE, workload=workload), pricing(tabs), workload).steps
    one_token = next(s for s in steps if s.tokens == 1)
    # 1 plain + 20 fused calls, and one transition of the shared vLLM workspace (after the 8-token step).
    assert one_token.plan_us == pytest.approx(3.0 + 20 * 5.0 + 0.5 * 100.0)


def test_pieces_cut_both_routes_at_whole_tokens() -> None:
    plan = side(((3 * ROW + 1, "a"), (None, None)))
    default = side(((2 * ROW + 100, "b"), (None, None)))
    cut = [
        (p.first // ROW, None if p.last is None else p.last // ROW, p.plan, p.default)
        for p in pieces(plan, default, PLAIN, ROW)
    ]
    assert cut == [(1, 2, "a", "b"), (3, 3, "a", NCCL), (4, None, NCCL, NCCL)]


def test_the_fused_pattern_prices_a_plain_kernel_as_its_composite() -> None:
    fused = {"nccl": {"median": flat(10.0)}, "vllm_custom+rmsnorm": {"median": flat(6.0)}}
    tabs = tables({"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(4.0)}}, fused)
    plan = side(upto(64, "vllm_custom"), upto(64, "vllm_custom"))
    assert problems(plan, side(NCCL_EVERYWHERE), pricing(tabs)) == []
    assert total(plan, side(NCCL_EVERYWHERE), pricing(tabs), ONE_TOKEN).plan_us == pytest.approx(
        4.0 + 20 * 6.0
    )


def test_an_nvls_nccl_is_not_the_measured_one() -> None:
    tabs = tables({"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(4.0)}})
    found = problems(
        side(upto(64, "vllm_custom"), nccl="nccl_nvls"),
        side(NCCL_EVERYWHERE, nccl="nccl_nvls"),
        pricing(tabs),
    )
    assert [p.pattern for p in found] == [PLAIN]
    assert found[0].why.startswith("allreduce: default path not measured") and "nccl_nvls" in found[0].why
