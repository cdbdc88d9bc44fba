"""Each TRT-LLM trial backend with its launcher's own call settings (``launch_styles``), on 2 GPUs:
admitted where its launcher's one/two-shot rule runs it, and then correct -- the plain pattern bit
for bit against NCCL, bf16 accumulation (TensorRT-LLM's ``trtllm_*``) included, since the trials'
small-integer inputs sum exactly in either type -- and recorded in the evidence with those settings.

Skipped without 2 CUDA devices. Run on the GPU machine:
``python -m pytest -m gpu tests/gpu/test_trtllm_call_settings.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from topo_gate.trials.backends.launch_styles import STYLES, call_settings
from topo_gate.trials.plan import SessionPlan, TrialPlan
from topo_gate.trials.runner import run_trial_session

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices"),
]


def test_every_trtllm_variant_is_correct_with_its_launchers_settings(tmp_path: Path) -> None:
    plans = tuple(
        TrialPlan(
            tp=2,
            group=(0, 1),
            group_class="nvswitch",
            pattern=pattern,
            dtype="bfloat16",
            hidden=4096,
            tokens=(1, 4, 32, 256),
            backends=(
                "nccl",
                *sorted(name for name in STYLES if ("_fused" in name) == (pattern != "allreduce")),
            ),
            graph_calls=8,
            rounds=3,
            warmup=2,
        )  # fmt: skip
        for pattern in ("allreduce", "allreduce_rmsnorm")
    )
    session = run_trial_session(
        SessionPlan(plans), device="cuda", cuda_devices=["0", "1"], timeout_s=120, workdir=tmp_path
    )
    for result in session.runs:
        run = result.as_run()
        for name in result.plan.backends[1:]:
            assert run["backends"][name]["status"] == "ok", (name, run["backends"][name])
            assert run["backends"][name]["call"] == call_settings(name)
        for cell in result.results:
            assert cell["status"] in ("ok", "unavailable"), cell
            if cell["status"] == "ok" and result.plan.pattern == "allreduce":
                assert cell["max_abs_err"] == 0.0, cell
