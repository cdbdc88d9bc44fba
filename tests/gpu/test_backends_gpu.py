"""Every GPU backend through the real harness on 2 GPUs, at small sizes: admitted or refused with a
reason, and when admitted, correct (bit-exact all-reduce; fused pattern within bf16 tolerance) --
eagerly, and again through its captured graphs on fresh inputs with negative zeros, at odd sizes,
right after the largest size. Lamport backends get size transitions timed; the faster backends are
timed in layer-like graphs. Both patterns run in one worker session, as the probe runs them: the
plain backends under their ``+rmsnorm`` composites and FlashInfer's workspace are set up once.

Skipped without 2 CUDA devices. Run on the GPU machine: ``pytest tests/gpu -m gpu``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from topo_gate.trials.plan import SessionPlan, TrialPlan, default_backends
from topo_gate.trials.results import PlanResult
from topo_gate.trials.runner import run_trial_session

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices"),
]

#: Sizes across the interesting edges: tokens <= TP (two-shot refused), decode, small prefill.
TOKENS = (1, 2, 4, 16, 128)


def test_every_backend_is_refused_with_a_reason_or_correct(tmp_path: Path) -> None:
    plans = tuple(
        TrialPlan(
            tp=2,
            group=(0, 1),
            group_class="nvswitch",
            pattern=pattern,
            dtype="bfloat16",
            hidden=4096,
            tokens=TOKENS,
            backends=tuple(default_backends(pattern, "cuda")),
            graph_calls=8,
            rounds=3,
            warmup=2,
        )
        for pattern in ("allreduce", "allreduce_rmsnorm")
    )
    session = run_trial_session(
        SessionPlan(plans), device="cuda", cuda_devices=["0", "1"], timeout_s=120, workdir=tmp_path
    )
    assert session.attempts == 1 and [run.plan.pattern for run in session.runs] == [
        "allreduce",
        "allreduce_rmsnorm",
    ]
    for result in session.runs:
        _check_run(result.plan.pattern, result)


def _check_run(pattern: str, result: PlanResult) -> None:
    for name, verdict in result.backends.items():
        assert verdict.status in ("ok", "unavailable"), (name, verdict)
        assert verdict.status == "ok" or verdict.reason, name
    for cell in result.results:
        if cell["status"] == "unavailable":
            assert cell["reason"], cell
            continue
        assert cell["status"] == "ok", cell
        if pattern == "allreduce":
            assert cell["max_abs_err"] == 0.0, cell
        assert all(0 < sample < 10_000 for sample in cell["samples_us"]), cell
    assert {c["tokens"] for c in result.graph_checks} >= {3, 24}  # odd sizes between the ladder's
    assert all(c["status"] == "ok" for c in result.graph_checks), [
        c for c in result.graph_checks if c["status"] != "ok"
    ]
    lamport = [c for c in result.results if c["backend"].startswith("trtllm") and c["tokens"] < TOKENS[-1]]
    assert all(len(c.get("after_larger_us", [])) == 3 for c in lamport if c["status"] == "ok")
    assert {e["backend"] for e in result.context} >= {"gemm", "nccl"}
    if pattern == "allreduce":  # FlashInfer's heuristic picks one-shot at TP2 for every size here
        assert {c["status"] for c in result.results if c["backend"] == "trtllm_twoshot_vllm"} == {
            "unavailable"
        }
    two_shot = "trtllm_twoshot" if pattern == "allreduce" else "trtllm_fused_twoshot"
    refused = {
        cell["tokens"]
        for cell in result.results
        if cell["backend"] == two_shot and cell["status"] == "unavailable"
    }
    assert refused == {1, 2}  # two-shot needs tokens > TP
