"""The trial harness on real GPUs: NCCL baseline measured, a hang in a GPU backend killed.

Skipped without 2 CUDA devices. Run on the GPU machine: ``pytest tests/gpu -m gpu``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from topo_gate.trials.plan import SessionPlan, TrialPlan, token_ladder
from topo_gate.trials.results import PlanResult
from topo_gate.trials.runner import run_trial_session

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices"),
]


def plan_without_profile(**overrides: object) -> TrialPlan:
    fields: dict[str, object] = dict(
        tp=2, group=(0, 1), group_class="gpu", pattern="allreduce", dtype="bfloat16", hidden=4096,
        tokens=token_ladder(64), backends=("nccl",), graph_calls=16, rounds=15, warmup=3,
    )  # fmt: skip
    fields.update(overrides)
    return TrialPlan(**fields)  # type: ignore[arg-type]


def run_plan(plan: TrialPlan, **options: object) -> PlanResult:
    """``plan`` alone in a worker session on GPUs 0 and 1."""
    return run_trial_session(SessionPlan((plan,)), **options).runs[0]  # type: ignore[arg-type]


def test_nccl_is_checked_and_measured_on_two_gpus(tmp_path: Path) -> None:
    result = run_plan(
        plan_without_profile(), device="cuda", cuda_devices=["0", "1"], timeout_s=60, workdir=tmp_path
    )
    assert result.backends["nccl"].status == "ok", result.backends["nccl"]
    assert result.software["nccl"]
    for cell in result.results:
        assert cell["status"] == "ok" and cell["max_abs_err"] == 0.0
        assert len(cell["samples_us"]) == 15 and all(0 < s < 10_000 for s in cell["samples_us"])


def test_a_hanging_gpu_backend_is_killed_and_nccl_still_measured(tmp_path: Path) -> None:
    plan = plan_without_profile(backends=("nccl", "gloo"), faults={"nccl": "hang"}, rounds=3)
    result = run_plan(
        plan, device="cuda", cuda_devices=["0", "1"], timeout_s=10, workdir=tmp_path,
        env={"TOPO_GATE_ALLOW_FAULT_INJECTION": "1"},
    )  # fmt: skip
    assert result.backends["nccl"].status == "timeout"
    assert result.backends["gloo"].status == "unavailable"  # CPU-only backend, refused on a GPU
