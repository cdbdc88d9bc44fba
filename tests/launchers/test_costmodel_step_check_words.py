"""A step check as the planner reports it: the token count a size reads as ("1 token", "8192
tokens", "1.5 tokens"), the words and names of a refusal, how close a plan comes to the default's
limit (slack, the binding size), and paths not measured on either side or in the workload total.

Routes are written by hand (``((high_exclusive, backend), ...)``, backend None: NCCL); tables come
from ``price_tables``; the step is 10 known layers: 1 plain + 20 norm sites.
"""

from __future__ import annotations

import pytest
from price_tables import FUSED, NCCL_EVERYWHERE, ONE_TOKEN, PLAIN, ROW, SIZES, STEP, flat, table

from topo_gate.launchers.plan.costmodel import (
    Pricing,
    Side,
    binding,
    problems,
    step_check,
    step_checks,
    tokens_of,
    total,
)
from topo_gate.launchers.plan.pricing import NCCL
from topo_gate.launchers.plan.workload import Workload

#: A default step on NCCL: 8 us plain + 20 x 10 us fused; CI half-widths 1%.
NCCL_PLAIN = {"nccl": {"median": flat(8.0)}}
NCCL_FUSED = {"nccl": {"median": flat(10.0)}}


def tables(plain: dict, fused: dict | None = None, sizes: tuple[int, ...] = SIZES) -> dict:
    fused = fused or NCCL_FUSED
    return {PLAIN: table(PLAIN, plain, sizes=sizes), FUSED: table(FUSED, fused)}


def side(plain, fused=NCCL_EVERYWHERE, workload: Workload = ONE_TOKEN) -> Side:
    return Side.of({PLAIN: plain, FUSED: fused}, NCCL, ROW, workload, STEP)


def pricing(tabs: dict) -> Pricing:
    return Pricing(tabs, STEP, ROW)


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


# -- a size in tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nbytes", "words"),
    [
        (ROW, "1 token"),
        (2 * ROW, "2 tokens"),
        (512 * ROW, "512 tokens"),
        (8192 * ROW, "8192 tokens"),  # whole counts in full, never "8.19e+03"
        (ROW * 3 // 2, "1.5 tokens"),  # a measured rung between whole tokens, never rounded to "2"
        (25805, "1.8 tokens"),  # three significant digits
        (ROW // 2, "0.5 tokens"),  # plural for anything but exactly one
    ],
)
def test_a_size_reads_as_its_token_count(nbytes: int, words: str) -> None:
    assert tokens_of(nbytes, ROW) == words


def test_a_refusal_at_the_largest_rung_names_8192_tokens() -> None:
    slow_at_the_top = {"median": [4.0] * (len(SIZES) - 1) + [12.0]}
    tabs = tables({**NCCL_PLAIN, "pcie_ipc": slow_at_the_top})
    [problem] = problems(side(upto(8192, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs))
    assert problem.why == (
        "step slower at 8192 tokens (117440512 B): 212.0 us/step against the default's 208.0 (CI up to 208.1)"
    )


def test_a_refusal_at_a_rung_between_whole_tokens_names_its_fraction() -> None:
    """A table measured at 1.5 tokens too: the plan loses there only, and the refusal says so."""
    sizes = (ROW, ROW * 3 // 2, *SIZES[1:])
    tabs = tables(
        {"nccl": {"median": flat(8.0, sizes)}, "pcie_ipc": {"median": [4.0, 12.0, *flat(4.0, SIZES[1:])]}},
        sizes=sizes,
    )
    [problem] = problems(side(upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs))
    assert problem.why.startswith("step slower at 1.5 tokens (21504 B): 212.0 us/step")


# -- a refusal's pattern and names ----------------------------------------------------------------


def test_a_refusal_where_both_patterns_change_names_both_and_the_plain_paths() -> None:
    tabs = tables(
        {**NCCL_PLAIN, "pcie_ipc": {"median": flat(12.0)}},
        {**NCCL_FUSED, "pcie_ipc+rmsnorm": {"median": flat(14.0)}},
    )
    [problem] = problems(
        side(upto(64, "pcie_ipc"), upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs)
    )
    assert (problem.pattern, problem.plan, problem.default) == (f"{PLAIN}+{FUSED}", "pcie_ipc", NCCL)
    # 12 + 20 x 14 = 292 against 8 + 200 = 208 (CI up to 8.08 + 202 = 210.08).
    assert problem.why == (
        "step slower at 1 token (14336 B): 292.0 us/step against the default's 208.0 (CI up to 210.1)"
    )


def test_an_unmeasured_plan_path_does_not_end_the_check_of_the_step() -> None:
    """The plain path the plan would take was never measured: refused for it, and the fused change
    at the same size is still priced, so the refusal covers both patterns."""
    tabs = tables(NCCL_PLAIN, {**NCCL_FUSED, "pcie_ipc+rmsnorm": {"median": flat(6.0)}})
    plan = side(upto(64, "mystery"), upto(64, "pcie_ipc"))
    [problem] = problems(plan, side(NCCL_EVERYWHERE), pricing(tabs))
    assert problem.pattern == f"{PLAIN}+{FUSED}"
    assert (
        problem.why
        == "allreduce: not measured at 1 token (14336 B) (mystery not in the trials at 14336 bytes)"
    )
    assert [site.pattern for site in problem.check.plan] == [PLAIN, FUSED]


def test_a_shared_unmeasured_default_path_does_not_hide_a_slower_fused_change() -> None:
    """The plain path is the same unmeasured one on both sides: it drops out of the step, which is
    then the fused sites alone (20 x 12 against 20 x 10, CI up to 20 x 10.1), refused."""
    tabs = tables(NCCL_PLAIN, {**NCCL_FUSED, "pcie_ipc+rmsnorm": {"median": flat(12.0)}})
    plan = side(upto(64, "mystery"), upto(64, "pcie_ipc"))
    [problem] = problems(plan, side(upto(64, "mystery")), pricing(tabs))
    assert problem.pattern == FUSED and not problem.check.complete
    assert problem.why == (
        "step slower at 1 token (14336 B): 240.0 us/step against the default's 200.0 (CI up to 202.0)"
    )


# -- how close a plan comes to the default's limit ------------------------------------------------


@pytest.mark.parametrize(("plain_us", "slack"), [(12.0, 8.08 - 12.0), (6.0, 8.08 - 6.0), (8.08, 0.0)])
def test_slack_is_the_defaults_limit_less_the_plans_step(plain_us: float, slack: float) -> None:
    """Only the plain site changes: the limit is 8 + 200 plus the plain site's CI half-width, 0.08."""
    tabs = tables({**NCCL_PLAIN, "pcie_ipc": {"median": flat(plain_us)}})
    check = step_check(ROW, side(upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs))
    assert check.limit_us == pytest.approx(208.08)
    assert check.slack_us == pytest.approx(slack, abs=1e-9)


def test_the_binding_size_is_the_one_with_the_least_slack() -> None:
    tabs = tables({**NCCL_PLAIN, "pcie_ipc": {"median": [6.0, 6.0, 6.0, 7.5, *flat(6.0)[4:]]}})
    checks = step_checks(side(upto(64, "pcie_ipc")), side(NCCL_EVERYWHERE), pricing(tabs))
    found = binding(checks)
    assert found is not None and found.nbytes == 8 * ROW
    assert found.slack_us == pytest.approx(8.08 - 7.5)


# -- the workload total over its measured share ---------------------------------------------------


def test_a_step_unmeasured_on_the_default_leaves_the_later_steps_in_the_per_call_mean() -> None:
    """The default's plain path was not measured at 1 token: that half of the workload is left out
    and the per-call price is the 8-token step's (6 us), not cut short at the gap."""
    workload = Workload.from_weights("one-eight", {1: 0.5, 8: 0.5})
    tabs = tables({**NCCL_PLAIN, "pcie_ipc": {"median": [None, *flat(6.0)[1:]]}})
    default = side(upto(64, "pcie_ipc"), workload=workload)
    cost = total(default, default, pricing(tabs), workload)
    assert [s.default_us for s in cost.steps] == [None, pytest.approx(6.0 + 200.0)]
    assert cost.measured_weight == pytest.approx(0.5)
    assert (cost.per_call(PLAIN, 0), cost.per_call(PLAIN, 1)) == (pytest.approx(6.0), pytest.approx(6.0))
    assert cost.default_us == pytest.approx(6.0 + 200.0)
