"""SGLang's custom all-reduce v2 (``custom_v2_sglang`` and its ``+rmsnorm`` composite) on 2 GPUs,
through the real harness: bit for bit against ``torch.distributed.all_reduce`` on integer inputs,
eagerly and inside its captured CUDA graphs (fresh inputs with negative zeros, odd sizes, right after
the largest size), up to SGLang's 16 MiB limit and refused above it; size transitions recorded.

Needs 2 CUDA devices on NVLink and SGLang 0.5.23's kernels: ``TOPO_GATE_SGLANG_BUNDLE`` (built by
``scripts/sglang_v2_bundle.py build``) or an installed sglang 0.5.23; ``SGLANG_JIT_CACHE_DIR`` may
point at prebuilt modules (docs/backends.md). Run there: ``pytest tests/gpu -m gpu``.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

from topo_gate.trials.backends.custom_v2_bundle import ENV
from topo_gate.trials.plan import SessionPlan, TrialPlan
from topo_gate.trials.runner import run_trial_session

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices"),
    pytest.mark.skipif(
        not os.environ.get(ENV) and importlib.util.find_spec("sglang") is None,
        reason=f"needs SGLang 0.5.23's kernels: set {ENV} (scripts/sglang_v2_bundle.py build)",
    ),
]

HIDDEN = 7168
#: Decode to prefill; 1170 tokens is the largest message under SGLang's 16 MiB limit at hidden 7168.
TOKENS = (1, 8, 64, 512, 1170, 1171)


@pytest.mark.parametrize(
    ("pattern", "name"),
    [("allreduce", "custom_v2_sglang"), ("allreduce_rmsnorm", "custom_v2_sglang+rmsnorm")],
)
def test_v2_matches_torch_distributed_inside_cuda_graphs(pattern: str, name: str, tmp_path: Path) -> None:
    plan = TrialPlan(
        tp=2, group=(0, 1), group_class="nvswitch", pattern=pattern, dtype="bfloat16", hidden=HIDDEN,
        tokens=TOKENS, backends=("nccl", name), graph_calls=8, rounds=3, warmup=2,
    )  # fmt: skip
    session = run_trial_session(
        SessionPlan((plan,)), device="cuda", cuda_devices=["0", "1"], timeout_s=120, workdir=tmp_path
    )
    (result,) = session.runs
    assert result.error is None
    assert result.backends[name].status == "ok", result.backends[name]
    cells = {cell["tokens"]: cell for cell in result.results if cell["backend"] == name}
    for tokens in TOKENS[:-1]:
        cell = cells[tokens]
        assert cell["status"] == "ok", cell
        if pattern == "allreduce":
            assert cell["max_abs_err"] == 0.0, cell  # the check compares bit for bit
        assert len(cell["samples_us"]) == plan.rounds
    assert cells[1171]["status"] == "unavailable"
    assert "SGLang sends 16787456 B to NCCL" in cells[1171]["reason"]
    # Lamport-style: every smaller size timed again right after the largest size's calls.
    assert all(len(cells[tokens].get("after_larger_us", [])) == 3 for tokens in TOKENS[:-2])
    graph_checks = [check for check in result.graph_checks if check["backend"] == name]
    # odd sizes between the ladder's (one-call graphs), and the ladder's sizes it was not an early loser at
    assert {check["tokens"] for check in graph_checks} >= {3, 24}
    assert all(check["status"] == "ok" for check in graph_checks), graph_checks
    if pattern == "allreduce":
        assert all(check["max_abs_err"] == 0.0 for check in graph_checks), graph_checks
