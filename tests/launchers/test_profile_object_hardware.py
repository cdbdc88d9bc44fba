"""A sealed ``Profile`` object whose ``node.hardware`` changed after it was built (a GPU list of ``7``,
an SM of ``'².0'``: ``str.isdigit`` says yes, ``int`` says no) is refused by every planner with the
reason, as the same content in a file is; the planners raised ``TypeError`` / ``ValueError`` on it
(the API promises a decision for every input)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import topo_gate
from topo_gate.launchers.plan.request import PlanRequest
from topo_gate.launchers.sglang import sglang_plan
from topo_gate.launchers.trtllm import trtllm_plan
from topo_gate.launchers.vllm import vllm_plan
from topo_gate.profile import Profile, load_profile

PCIE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml"
FINGERPRINT = "sha256:" + "5c" * 32
PLANNERS = (sglang_plan, vllm_plan, trtllm_plan)


def _gpus_seven(hardware: dict[str, Any]) -> None:
    hardware["gpus"] = 7


def _superscript_sm(hardware: dict[str, Any]) -> None:
    hardware["gpus"][0]["sm"] = "².0"


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "gpus is 7": (_gpus_seven, "profile object unusable: node.hardware.gpus: must be a list, found int 7"),
    "sm is '².0'": (
        _superscript_sm,
        "profile object unusable: node.hardware.gpus[0].sm: must be a compute capability like '9.0', "
        "or null, found str '².0'",
    ),
}


def _sealed(edit: Callable[[dict[str, Any]], None]) -> Profile:
    profile = load_profile(PCIE)
    edit(profile.node.hardware)  # type: ignore[arg-type]  # plain data, changed after it was built
    return profile.with_digest()


@pytest.mark.parametrize("planner", PLANNERS, ids=lambda planner: planner.__name__)
@pytest.mark.parametrize("case", sorted(EDITS))
def test_every_planner_falls_back_with_the_reason(planner: Callable[..., Any], case: str) -> None:
    edit, reason = EDITS[case]
    plan = planner(PlanRequest(_sealed(edit), tp=2, model="qwen3-32b", fingerprint=FINGERPRINT))
    assert plan.fallback and plan.args == () and plan.env == {}
    assert plan.reason == f"allreduce: {reason}"


@pytest.mark.parametrize("case", sorted(EDITS))
def test_gate_answers_nccl_with_the_reason(case: str) -> None:
    edit, reason = EDITS[case]
    decision = topo_gate.gate(_sealed(edit), tp=2, fingerprint=FINGERPRINT)
    assert decision.backend == "nccl" and decision.fallback
    assert decision.reason == reason


def test_an_unchanged_object_is_planned_from() -> None:
    # The control: the same object, unedited, is planned from (this node's plan is "no knobs").
    plan = vllm_plan(PlanRequest(load_profile(PCIE), tp=2, model="qwen3-32b", fingerprint=FINGERPRINT))
    assert not plan.fallback and plan.reason == "following the profile"
