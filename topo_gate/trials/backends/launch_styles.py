"""How each launcher calls FlashInfer's TensorRT-LLM Lamport kernels: one/two-shot rule, PDL,
fp32 accumulation and when the kernel signals PDL completion -- each launcher's own, cited.

No torch here: ``trtllm.py`` passes these settings to the kernel, and the evidence records them per
backend (``call_settings``, evidence v1.3 ``runs[i].backends.<name>.call``), so a planner can check
that the trial it prices called the kernel as the launcher does. A trial that accumulated in fp32
where the launcher accumulates in bf16 would time (and check) another kernel instantiation.

- ``trtllm_*`` (TensorRT-LLM's ``ONESHOT`` / ``TWOSHOT``, and ``AUTO`` resolved by its table):
  ``AllreduceOp::runFusionAllReduce`` (``cpp/tensorrt_llm/thop/allreduceOp.cpp``, TensorRT-LLM
  01e2c36) sets ``use_oneshot`` from the strategy and ``trigger_completion_at_end`` from the Python
  ``AllReduceParams`` (default true; ``AllReduce.forward``, ``tensorrt_llm/_torch/distributed/ops.py``
  at 0071496); accumulation is the kernel's ``use_fp32_acc()``, bf16 unless
  ``ALL_REDUCE_FUSION_KERNEL_ACC_FP32`` is set ("we use fp16 acc type by default due to keep align
  with nccl", ``cpp/tensorrt_llm/kernels/communicationKernels/allReduceFusionKernels.cu`` at
  04c7465); PDL is ``getEnvEnablePDL()``, off unless ``TRTLLM_ENABLE_PDL=1``
  (``cpp/tensorrt_llm/common/envUtils.cpp`` at 73da0cd).
- ``*_vllm``, vLLM 0.33.0. Plain (``distributed/device_communicators/flashinfer_all_reduce.py:531-537``):
  ``allreduce_fusion(kAllReduce, launch_with_pdl=True, trigger_completion_at_end=tokens > 16)`` with
  ``fp32_acc`` left at FlashInfer's default, False (``flashinfer/comm/allreduce.py:788``), one/two-shot
  left to FlashInfer's heuristic. Fused (``compilation/passes/fusion/allreduce_rms_fusion.py:243-293,
  321-322``): one-shot iff within ``_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB``, PDL on, ``fp32_acc=True``,
  ``trigger_completion_at_end = one-shot or tokens > 16``.
- ``*_sglang``, SGLang 0.5.23. Plain ``flashinfer_allreduce`` (``srt/layers/flashinfer_comm_fusion.py:
  1017-1044``): PDL on, ``fp32_acc=True``, ``trigger_completion_at_end=False``; fused
  ``flashinfer_allreduce_residual_rmsnorm`` (``:833-923``, called from ``srt/layers/layernorm.py:
  248-255`` with its defaults ``fp32_acc=True``, ``trigger_completion_at_end=False``, ``use_oneshot``
  None): the same; one/two-shot left to FlashInfer's heuristic in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topo_gate.profile.schema import COMPOSITE_SUFFIX

#: ``LaunchStyle.trigger`` values, as the evidence spells them.
TRIGGERS = {
    "always": "always",
    "never": "never",
    "vllm_plain": "tokens > 16",
    "vllm": "one-shot or tokens > 16",
}
#: ``LaunchStyle.rule`` values: who picks one/two-shot, as the evidence spells them.
RULES = {
    "forced": "as the strategy names it",
    "flashinfer": "FlashInfer's heuristic",
    "vllm_fused": "vLLM's one-shot table",
}


@dataclass(frozen=True)
class LaunchStyle:
    """How one launcher calls the kernel; ``rule`` names who picks one/two-shot (``forced``,
    ``flashinfer`` = FlashInfer's heuristic, ``vllm_fused`` = vLLM's table); ``source``: where."""

    rule: str
    pdl: bool
    fp32_acc: bool
    trigger: str  # a key of TRIGGERS
    source: str

    def record(self) -> dict[str, Any]:
        """The evidence's ``call`` block of a backend called this way."""
        return {
            "fp32_acc": self.fp32_acc,
            "launch_with_pdl": self.pdl,
            "trigger_completion_at_end": TRIGGERS[self.trigger],
            "use_oneshot": RULES[self.rule],
            "source": self.source,
        }


TRTLLM_STYLE = LaunchStyle(
    "forced", pdl=False, fp32_acc=False, trigger="always",
    source="TensorRT-LLM AllreduceOp::runFusionAllReduce; allReduceFusionKernels.cu use_fp32_acc",
)  # fmt: skip
VLLM_PLAIN_STYLE = LaunchStyle(
    "flashinfer", pdl=True, fp32_acc=False, trigger="vllm_plain",
    source="vllm 0.33.0 distributed/device_communicators/flashinfer_all_reduce.py:531-537",
)  # fmt: skip
VLLM_FUSED_STYLE = LaunchStyle(
    "vllm_fused", pdl=True, fp32_acc=True, trigger="vllm",
    source="vllm 0.33.0 compilation/passes/fusion/allreduce_rms_fusion.py:243-293,321-322",
)  # fmt: skip
SGLANG_PLAIN_STYLE = LaunchStyle(
    "flashinfer", pdl=True, fp32_acc=True, trigger="never",
    source="sglang 0.5.23 srt/layers/flashinfer_comm_fusion.py:1017-1044",
)  # fmt: skip
SGLANG_FUSED_STYLE = LaunchStyle(
    "flashinfer", pdl=True, fp32_acc=True, trigger="never",
    source="sglang 0.5.23 srt/layers/flashinfer_comm_fusion.py:833-923, srt/layers/layernorm.py:248-255",
)  # fmt: skip

#: Every TRT-LLM trial backend's style, by name (``trtllm.py`` registers one class per entry).
STYLES: dict[str, LaunchStyle] = {
    **{f"trtllm_{kind}": TRTLLM_STYLE for kind in ("oneshot", "twoshot", "fused_oneshot", "fused_twoshot")},
    "trtllm_oneshot_vllm": VLLM_PLAIN_STYLE,
    "trtllm_twoshot_vllm": VLLM_PLAIN_STYLE,
    "trtllm_fused_oneshot_vllm": VLLM_FUSED_STYLE,
    "trtllm_fused_twoshot_vllm": VLLM_FUSED_STYLE,
    "trtllm_oneshot_sglang": SGLANG_PLAIN_STYLE,
    "trtllm_twoshot_sglang": SGLANG_PLAIN_STYLE,
    "trtllm_fused_oneshot_sglang": SGLANG_FUSED_STYLE,
    "trtllm_fused_twoshot_sglang": SGLANG_FUSED_STYLE,
}


def call_settings(name: str) -> dict[str, Any] | None:
    """The evidence ``call`` of trial backend ``name`` (a ``+rmsnorm`` composite: its plain
    backend's), None for a backend that calls no TRT-LLM Lamport kernel."""
    style = STYLES.get(name.removesuffix(COMPOSITE_SUFFIX))
    return None if style is None else style.record()
