"""Each TRT-LLM trial backend calls FlashInfer's kernel as its launcher does (``launch_styles``), and
the evidence records those settings per backend.

``prepare`` is run on CPU tensors with the kernel replaced by a recorder of its keyword arguments:
what is checked is the call topo-gate builds (every argument of FlashInfer 0.7.2.post1's
``trtllm_allreduce_fusion``), not FlashInfer. The GPU run of the same backends is
``tests/gpu/test_trtllm_call_settings.py``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from topo_gate.trials.backends import load_backend  # noqa: E402
from topo_gate.trials.backends.base import BackendContext, TrialBuffers  # noqa: E402
from topo_gate.trials.backends.launch_styles import STYLES, call_settings  # noqa: E402
from topo_gate.trials.plan import TrialPlan  # noqa: E402
from topo_gate.trials.results import BackendOutcome, PlanResult  # noqa: E402

HIDDEN = 64
#: (backend, tokens) -> (fp32_acc, launch_with_pdl, trigger_completion_at_end, use_oneshot), from the
#: pinned sources (launch_styles' docstring cites each line).
EXPECTED = {
    # TensorRT-LLM: bf16 accumulation (use_fp32_acc() off unless ALL_REDUCE_FUSION_KERNEL_ACC_FP32),
    # PDL only with TRTLLM_ENABLE_PDL=1, AllReduceParams.trigger_completion_at_end defaults true.
    ("trtllm_oneshot", 4): (False, False, True, True),
    ("trtllm_twoshot", 32): (False, False, True, False),
    ("trtllm_fused_oneshot", 4): (False, False, True, True),
    ("trtllm_fused_twoshot", 32): (False, False, True, False),
    # vLLM plain: fp32_acc left at FlashInfer's False, trigger iff tokens > 16.
    ("trtllm_oneshot_vllm", 4): (False, True, False, True),
    ("trtllm_oneshot_vllm", 32): (False, True, True, True),
    ("trtllm_twoshot_vllm", 32): (False, True, True, False),
    # vLLM fused: fp32_acc=True, trigger iff one-shot or tokens > 16.
    ("trtllm_fused_oneshot_vllm", 4): (True, True, True, True),
    ("trtllm_fused_twoshot_vllm", 4): (True, True, False, False),
    ("trtllm_fused_twoshot_vllm", 32): (True, True, True, False),
    # SGLang plain and fused: fp32_acc=True, trigger never.
    ("trtllm_oneshot_sglang", 32): (True, True, False, True),
    ("trtllm_twoshot_sglang", 32): (True, True, False, False),
    ("trtllm_fused_oneshot_sglang", 32): (True, True, False, True),
    ("trtllm_fused_twoshot_sglang", 32): (True, True, False, False),
}


class _Workspace:
    workspace_tensor = "workspace pointers"
    metadata = "workspace metadata"


def _called_with(name: str, tokens: int) -> dict[str, object]:
    cls = load_backend(name)
    pattern = cls.patterns[0]
    ctx = BackendContext(
        rank=0, world_size=2, local_rank=0, device=torch.device("cpu"), dtype=torch.bfloat16,
        hidden=HIDDEN, max_tokens=64, pattern=pattern, allow_multicast=False, group=None,
    )  # fmt: skip
    backend = cls(ctx)
    seen: dict[str, object] = {}
    backend._workspace = _Workspace()
    backend._kernel = lambda **kwargs: seen.update(kwargs)
    backend._pattern = f"pattern of {pattern}"
    x = torch.zeros(tokens, HIDDEN, dtype=torch.bfloat16)
    fused = pattern == "allreduce_rmsnorm"
    buffers = TrialBuffers(
        x=x, out=torch.empty_like(x), residual=torch.zeros_like(x) if fused else None,
        weight=torch.ones(HIDDEN, dtype=torch.bfloat16) if fused else None,
        residual_out=torch.empty_like(x) if fused else None,
    )  # fmt: skip
    backend.prepare(tokens, buffers)()
    return seen


@pytest.mark.parametrize(("name", "tokens"), sorted(EXPECTED))
def test_each_variant_calls_the_kernel_with_its_launchers_settings(name: str, tokens: int) -> None:
    seen = _called_with(name, tokens)
    fp32_acc, pdl, trigger, oneshot = EXPECTED[(name, tokens)]
    assert (seen["fp32_acc"], seen["launch_with_pdl"], seen["trigger_completion_at_end"], seen["use_oneshot"]) == (
        fp32_acc, pdl, trigger, oneshot,
    )  # fmt: skip
    assert seen["token_num"] == tokens and seen["world_size"] == 2 and seen["hidden_dim"] == HIDDEN


def test_every_trtllm_backend_has_a_style_and_records_it() -> None:
    names = {name for name, _ in EXPECTED}
    assert names == set(STYLES)
    for name in names:
        record = call_settings(name)
        assert record is not None and record["fp32_acc"] is STYLES[name].fp32_acc
        assert record["launch_with_pdl"] is STYLES[name].pdl and record["source"]
    assert call_settings("trtllm_oneshot_sglang+rmsnorm") == call_settings("trtllm_oneshot_sglang")
    assert call_settings("nccl") is None and call_settings("custom_v2_sglang") is None


def test_the_evidence_run_records_each_backends_call_settings() -> None:
    plan = TrialPlan(
        tp=2, group=(0, 1), group_class="nvswitch", pattern="allreduce", dtype="bfloat16", hidden=HIDDEN,
        tokens=(1, 2), backends=("nccl", "trtllm_oneshot", "trtllm_oneshot_vllm"), graph_calls=4, rounds=15,
        warmup=1,
    )  # fmt: skip
    outcomes = {name: BackendOutcome("ok") for name in plan.backends}
    run = PlanResult(plan, outcomes, [], attempts=1).as_run()
    assert "call" not in run["backends"]["nccl"]
    assert run["backends"]["trtllm_oneshot"]["call"] == {
        "fp32_acc": False, "launch_with_pdl": False, "trigger_completion_at_end": "always",
        "use_oneshot": "as the strategy names it",
        "source": "TensorRT-LLM AllreduceOp::runFusionAllReduce; allReduceFusionKernels.cu use_fp32_acc",
    }  # fmt: skip
    assert run["backends"]["trtllm_oneshot_vllm"]["call"]["trigger_completion_at_end"] == "tokens > 16"
