"""A size transition never timed is never free: a Lamport-style kernel whose table has no
``transition`` (evidence without after-size replays, or the block removed and resealed) pays a
transition it has no bound for, so the plan is refused wherever a larger message went before it in
its buffer. On a node whose fused kernel wins (the knob cases' nodes: the synthetic PCIe example no
longer plans one, since a real SM 12.0 trial refuses the fused kernels), removing every such block
must never give a plan that sends larger messages through a Lamport kernel than measured 3000 us
transitions do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from knob_cases import BY_NAME
from price_tables import FUSED, ROW, SIZES, table

from topo_gate.cli import main
from topo_gate.launchers.plan.costmodel import Pricing, Side, Step, price_at
from topo_gate.launchers.plan.pricing import PriceTable, lamport_style
from topo_gate.launchers.plan.workload import Workload
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

MEASURED_US = 3000.0


def _resealed(source: Path, tmp_path: Path, name: str, transition_us: float | None) -> Path:
    """``source`` with every transition cost at ``transition_us``, or (None) every ``transition``
    block removed, resealed by ``topo-gate validate --reseal``."""
    data = parse_yaml(source.read_text(encoding="utf-8"))
    for measurement in data["measurements"]:
        for prices in measurement["backends"].values():
            transition = prices.get("transition")
            if transition is None:
                continue
            if transition_us is None:
                del prices["transition"]
            else:
                transition["cost_us"] = [
                    [None if cost is None else transition_us for cost in row] for row in transition["cost_us"]
                ]
    path = tmp_path / name
    path.write_text(to_yaml(data), encoding="utf-8")  # the old digest: a hand edit
    assert main(["validate", "--reseal", str(path)]) == 0
    return path


def _largest_lamport_bytes(plan: Any) -> int:
    """The largest message the plan's routes send to a Lamport-style kernel (0: none)."""
    largest = 0
    for route in plan.choice.routes.values():
        low = 0
        for high, backend in route:
            if backend is not None and lamport_style(backend):
                largest = max(largest, high - 1 if high is not None else 2**62)
            low = high if high is not None else low
    return largest


@pytest.mark.parametrize("name", ["vllm-fusion-size", "sglang-fusion-on"])
def test_removing_the_transitions_never_gives_a_larger_plan_than_measured_ones(
    tmp_path: Path, name: str
) -> None:
    case = BY_NAME[name]
    source = case.write(tmp_path / "case.yaml")
    plans = {}
    for label, cost in (("untimed", None), ("measured", MEASURED_US), ("free", 0.0)):
        plans[label] = case.plan(_resealed(source, tmp_path, f"{label}.yaml", cost))
        assert not plans[label].fallback, plans[label].reason
    assert _largest_lamport_bytes(plans["untimed"]) <= _largest_lamport_bytes(plans["measured"])
    assert _largest_lamport_bytes(plans["measured"]) <= _largest_lamport_bytes(plans["free"])


def test_the_issue_s_case_vllm_fuses_no_more_without_transitions_than_with_3000_us(tmp_path: Path) -> None:
    """The issue's case on a node where vLLM's fusion wins: with every transition free the pass fuses
    16 tokens (0.21875 MB); with measured 3000 us transitions, and with none measured, 2 tokens only."""
    case = BY_NAME["vllm-fusion-size"]
    source = case.write(tmp_path / "case.yaml")
    limits = {}
    for label, cost in (("untimed", None), ("measured", MEASURED_US), ("free", 0.0)):
        args = case.plan(_resealed(source, tmp_path, f"{label}.yaml", cost)).args
        limits[label] = args[-1]
    assert limits["untimed"] == limits["measured"]
    assert '"fi_allreduce_fusion_max_size_mb":0.02734375' in limits["measured"]
    assert '"fi_allreduce_fusion_max_size_mb":0.21875' in limits["free"]


# -- at the unit ---------------------------------------------------------------------------------------

ONESHOT = "trtllm_fused_oneshot"
SMALL, LARGE = SIZES[0], SIZES[3]


def _table(transition: dict[int, list[float]] | None) -> PriceTable:
    spec: dict[str, Any] = {"median": [5.0] * len(SIZES)}
    if transition is not None:
        spec["transition"] = transition
    return table(FUSED, {"nccl": {"median": [10.0] * len(SIZES)}, ONESHOT: spec, "vllm_custom+rmsnorm": spec})


def test_a_lamport_kernel_without_a_transition_block_has_no_bound_after_a_larger_message() -> None:
    untimed = _table(None)
    assert untimed.lamport(ONESHOT)
    assert untimed.transition_bounds(ONESHOT, 0, LARGE) == (0.0, None)
    assert untimed.transition_bounds(ONESHOT, 0, None) == (0.0, None)
    assert not untimed.transition_measured(ONESHOT, 0, LARGE)
    # Nothing larger went before: no transition to pay, timed or not.
    assert untimed.transition_bounds(ONESHOT, 3, LARGE) == (0.0, 0.0)
    assert untimed.transition_measured(ONESHOT, 3, LARGE)


def test_a_kernel_that_is_not_lamport_style_pays_no_transition() -> None:
    untimed = _table(None)
    assert not untimed.lamport("vllm_custom+rmsnorm")
    assert untimed.transition_bounds("vllm_custom+rmsnorm", 0, LARGE) == (0.0, 0.0)


def test_a_timed_transition_is_still_bounded_by_its_measurement() -> None:
    timed = _table({LARGE: [MEASURED_US] * len(SIZES)})
    assert timed.transition_bounds(ONESHOT, 0, LARGE) == (MEASURED_US, MEASURED_US)
    assert timed.transition_measured(ONESHOT, 0, LARGE)


@pytest.mark.parametrize(("pessimistic", "expected"), [(True, "not measured"), (False, 0.0)])
def test_the_plan_is_refused_and_the_default_charged_its_lower_bound(
    pessimistic: bool, expected: Any
) -> None:
    """A plan's untimed transition refuses it ("not measured"); the default's is charged at its lower
    bound, 0: uncertainty never makes a change look good."""
    tables = {FUSED: _table(None)}
    workload = Workload.from_weights("mixed", {1: 0.5, 8: 0.5})
    step = Step(layers=10, layers_known=True)
    side = Side.of({FUSED: ((None, ONESHOT),)}, "nccl", ROW, workload, step)
    price = price_at(FUSED, ONESHOT, SMALL, side, Pricing(tables, step, ROW), pessimistic=pessimistic)
    if pessimistic:
        assert isinstance(price, str) and price.endswith(
            f"its size transition after {8 * ROW}-byte messages was not measured"
        )
    else:
        assert not isinstance(price, str) and price.transition == expected
