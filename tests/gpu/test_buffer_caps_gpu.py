"""On 2 GPUs, a plan whose ladder holds a launcher's buffer cap (SGLang's custom all-reduce v2 16 MiB
= 1170 tokens at hidden 7168) measures the cap like any rung and times the Lamport transitions after
it at every decode rung below -- as ``make_sessions(buffer_caps=)`` builds it for a probe.

Skipped without 2 CUDA devices. Run on the GPU machine:
``python -m pytest -m gpu tests/gpu/test_buffer_caps_gpu.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from topo_gate.trials.plan import SessionPlan, TrialPlan, ladder_with_caps
from topo_gate.trials.runner import run_trial_session

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices"),
]
HIDDEN = 7168
CAP = 16 * 1024 * 1024 // (HIDDEN * 2)  # 1170


def test_a_cap_rung_is_measured_and_transitions_are_timed_after_it(tmp_path: Path) -> None:
    tokens, caps = ladder_with_caps(2048, (CAP,))
    plan = TrialPlan(
        tp=2, group=(0, 1), group_class="nvswitch", pattern="allreduce", dtype="bfloat16", hidden=HIDDEN,
        tokens=tokens, backends=("nccl", "trtllm_oneshot_sglang"), graph_calls=8, rounds=5, warmup=2,
        buffer_caps=caps, context_backends=("trtllm_oneshot_sglang",),
    )  # fmt: skip
    assert CAP in plan.tokens and CAP in plan.after_tokens
    (result,) = run_trial_session(
        SessionPlan((plan,)), device="cuda", cuda_devices=["0", "1"], timeout_s=120, workdir=tmp_path
    ).runs
    cells = {(c["backend"], c["tokens"]): c for c in result.results}
    assert cells[("nccl", CAP)]["status"] == "ok" and cells[("trtllm_oneshot_sglang", CAP)]["status"] == "ok"
    cap_bytes = plan.nbytes(CAP)
    for rung in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        after = [e["after_nbytes"] for e in cells[("trtllm_oneshot_sglang", rung)].get("after_sizes", [])]
        assert cap_bytes in after, (rung, after)
