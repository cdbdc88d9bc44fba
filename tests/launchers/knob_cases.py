"""Nodes whose price tables make a launcher's plan carry each kind of knob it can emit.

Each ``KnobCase`` is a profile built the way a probe builds one (``priced_profiles``: evidence in,
``decide`` out), the served model, the user's own flags and env, and the knobs the plan must then
carry. The latencies are the test's own, written as multiples of one NCCL curve (8 us at one token,
+0.01 us per token), so a case reads as "this path is half NCCL's time here, 1.5x there".

Knobs no case reaches, and why (the route models decide): torch symm-mem (SGLang
``--enable-torch-symm-mem``, vLLM ``VLLM_ALLREDUCE_USE_SYMM_MEM``) runs only with NVLink multicast,
which no trial times, so turning it on is never priced; vLLM's ``VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm``
changes nothing priceable (``auto`` already picks the TRT-LLM kernels where there is no multicast,
and MNNVL, where there is, was never timed). vLLM's ``VLLM_ALLREDUCE_USE_SYMM_MEM=0`` does appear, as
the knob that keeps symm-mem from taking over the sizes a plan moves off FlashInfer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from priced_profiles import FINGERPRINT, TOKENS, priced_profile, scaled, times, write_priced_profile

from topo_gate.launchers import PLANNERS, LaunchPlan, PlanRequest
from topo_gate.profile import Profile

#: The ladder up to 8192 tokens at hidden 7168 (117 MB): past every routing limit the cases cross.
LADDER = (*TOKENS, 8192)
NCCL = scaled(8.0, 0.01, LADDER)
PLAIN, FUSED = "allreduce", "allreduce_rmsnorm"


def nccl_times(factor: float) -> list[float | None]:
    """NCCL's curve times ``factor`` at every size."""
    return times(NCCL, factor)


def split(small: float, large: float, *, up_to_tokens: int) -> list[float]:
    """NCCL's curve times ``small`` up to ``up_to_tokens`` tokens of the ladder, ``large`` above."""
    return [round(v * (small if t <= up_to_tokens else large), 6) for v, t in zip(NCCL, LADDER, strict=True)]


def fused_of(plain: Sequence[float | None]) -> list[float | None]:
    """A plain kernel followed by the add + RMSNorm kernel: 1.6 us more at every size (the norm)."""
    return [None if v is None else round(v + 1.6, 6) for v in plain]


def nccl_tables(
    plain: Mapping[str, Sequence[float | None]], fused: Mapping[str, Sequence[float | None]]
) -> dict:
    """Both patterns, with NCCL (and NCCL + norm) as their baselines."""
    return {
        PLAIN: {"nccl": NCCL, **plain},
        FUSED: {"nccl": fused_of(NCCL), **fused},
    }


@dataclass(frozen=True)
class KnobCase:
    """A node, a served model and the user's own settings, and the knobs the plan must carry."""

    name: str
    launcher: str
    tables: Mapping[str, Mapping[str, Sequence[float | None]]]
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    model: str = "llama-3.1-70b"
    user_args: tuple[str, ...] = ()
    user_env: Mapping[str, str] = field(default_factory=dict)
    tp: int = 2
    sm: str = "9.0"
    group_class: str = "nvswitch"
    why: str = ""

    def profile(self) -> Profile:
        return priced_profile(self.tables, **self._options())

    def write(self, path: Path) -> Path:
        return write_priced_profile(path, self.tables, **self._options())

    def _options(self) -> dict[str, Any]:
        return {"tp": self.tp, "sm": self.sm, "group_class": self.group_class, "tokens": LADDER}

    def plan(self, profile: Any = None, **overrides: Any) -> LaunchPlan:
        """The plan for this case's node, model and user settings (``overrides`` replace any of them)."""
        request = PlanRequest(
            self.profile() if profile is None else profile,
            tp=self.tp,
            model=self.model,
            fingerprint=FINGERPRINT,
            user_args=self.user_args,
            user_env=dict(self.user_env),
        )
        return PLANNERS[self.launcher](replace(request, **overrides))


PCIE = {"sm": "12.0", "group_class": "pcie-switch"}

CASES = (
    KnobCase(
        "sglang-custom-off",
        "sglang",
        nccl_tables({"vllm_custom": nccl_times(1.5)}, {"vllm_custom+rmsnorm": fused_of(nccl_times(1.5))}),
        args=("--disable-custom-all-reduce",),
        why="SGLang's default on a PCIe TP2 node, the legacy custom all-reduce, is slower than NCCL",
        **PCIE,
    ),
    KnobCase(
        "sglang-pcie-ipc",
        "sglang",
        nccl_tables(
            {"vllm_custom": nccl_times(1.5), "pcie_ipc": split(0.5, 2.0, up_to_tokens=32)},
            {
                "vllm_custom+rmsnorm": fused_of(nccl_times(1.5)),
                "pcie_ipc+rmsnorm": fused_of(split(0.5, 2.0, up_to_tokens=32)),
            },
        ),
        args=("--disable-custom-all-reduce",),
        # 32 tokens of the served model (hidden 8192, bf16) = 262144 elements: the last measured
        # size that is no larger is 32 tokens of the profile's hidden 7168 (229376 elements).
        env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "SGLANG_PCIE_IPC_MAX_NUMEL": "229376"},
        why="PCIe IPC is twice NCCL's speed up to 32 tokens and the custom all-reduce slower than NCCL",
        **PCIE,
    ),
    KnobCase(
        "sglang-v2-legacy",
        "sglang",
        nccl_tables(
            {"custom_v2_sglang": split(0.8, 1.0, up_to_tokens=256), "vllm_custom": nccl_times(0.5)},
            {
                "custom_v2_sglang+rmsnorm": fused_of(split(0.8, 1.0, up_to_tokens=256)),
                "vllm_custom+rmsnorm": fused_of(nccl_times(0.5)),
            },
        ),
        env={"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"},
        why="the legacy custom all-reduce is faster than v2, SGLang's default on full NVLink",
    ),
    KnobCase(
        "sglang-v2-cap",
        "sglang",
        nccl_tables(
            {"custom_v2_sglang": split(0.5, 1.5, up_to_tokens=64)},
            {"custom_v2_sglang+rmsnorm": fused_of(split(0.5, 1.5, up_to_tokens=64))},
        ),
        env={"SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB": "1792"},
        why="custom all-reduce v2 is faster than NCCL up to 128 tokens, slower above",
    ),
    KnobCase(
        "sglang-fusion-on",
        "sglang",
        nccl_tables(
            {
                "custom_v2_sglang": split(0.8, 1.0, up_to_tokens=1024),
                "trtllm_oneshot_sglang": nccl_times(0.4),
                "trtllm_twoshot_sglang": nccl_times(0.6),
            },
            {
                "custom_v2_sglang+rmsnorm": fused_of(split(0.8, 1.0, up_to_tokens=1024)),
                "trtllm_fused_oneshot_sglang": nccl_times(0.5),
                "trtllm_fused_twoshot_sglang": nccl_times(0.7),
            },
        ),
        args=("--flashinfer-allreduce-fusion-backend", "trtllm"),
        why="FlashInfer's fused kernel beats v2 + norm, and its workspace v2 on plain all-reduces",
    ),
    KnobCase(
        "sglang-fusion-off",
        "sglang",
        nccl_tables(
            {
                "custom_v2_sglang": split(0.6, 1.0, up_to_tokens=1024),
                "trtllm_oneshot_sglang": nccl_times(1.0),
            },
            {
                "custom_v2_sglang+rmsnorm": fused_of(split(0.6, 1.0, up_to_tokens=1024)),
                "trtllm_fused_oneshot_sglang": nccl_times(1.1),
            },
        ),
        args=("--enforce-disable-flashinfer-allreduce-fusion",),
        model="deepseek-v3",
        why="SGLang switches fusion on for DeepSeek-V3, and the fused kernel is slower than v2 + norm",
    ),
    KnobCase(
        "vllm-custom-off",
        "vllm",
        nccl_tables({"vllm_custom": nccl_times(1.5)}, {"vllm_custom+rmsnorm": fused_of(nccl_times(1.5))}),
        args=("--disable-custom-all-reduce",),
        why="vLLM's default on a PCIe TP2 node, its custom all-reduce, is slower than NCCL",
        **PCIE,
    ),
    KnobCase(
        "vllm-fusion-size",
        "vllm",
        nccl_tables(
            {"vllm_custom": nccl_times(0.9)},
            {
                "vllm_custom+rmsnorm": fused_of(nccl_times(0.9)),
                "trtllm_fused_oneshot_vllm": split(0.4, 2.0, up_to_tokens=16),
            },
        ),
        args=(
            "--compilation-config",
            '{"pass_config":{"fuse_allreduce_rms":true,"fi_allreduce_fusion_max_size_mb":0.21875}}',
        ),
        why="the fused kernel (off by default on SM 12.0) wins up to 16 tokens (224 KiB) and loses above",
        **PCIE,
    ),
    KnobCase(
        "vllm-fusion-off",
        "vllm",
        nccl_tables(
            {"trtllm_oneshot_vllm": nccl_times(0.5)},
            {
                "trtllm_fused_oneshot_vllm": nccl_times(1.5),
                "trtllm_fused_twoshot_vllm": nccl_times(1.5),
                "trtllm_oneshot_vllm+rmsnorm": fused_of(nccl_times(0.5)),
            },
        ),
        args=("--compilation-config", '{"pass_config":{"fuse_allreduce_rms":false}}'),
        user_env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
        why="with your FlashInfer backend trtllm the fusion pass runs a fused kernel slower than the "
        "plain one + norm",
    ),
    KnobCase(
        "vllm-flashinfer-off",
        "vllm",
        nccl_tables(
            {"trtllm_oneshot_vllm": nccl_times(1.5), "vllm_custom": nccl_times(0.7)},
            {
                "trtllm_oneshot_vllm+rmsnorm": fused_of(nccl_times(1.5)),
                "vllm_custom+rmsnorm": fused_of(nccl_times(0.7)),
            },
        ),
        env={"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"},
        user_args=("--enforce-eager",),
        user_env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
        why="your FlashInfer backend trtllm routes every all-reduce to a kernel slower than NCCL; off, "
        "custom all-reduce takes them (symm-mem off, or it would take the sizes above 8 MiB with "
        "multicast, which was never timed)",
    ),
    KnobCase(
        "trtllm-nccl",
        "trtllm",
        nccl_tables(
            {"trtllm_oneshot": nccl_times(1.5), "trtllm_twoshot": nccl_times(1.5)},
            {"trtllm_fused_oneshot": nccl_times(1.5), "trtllm_fused_twoshot": nccl_times(1.5)},
        ),
        config={"allreduce_strategy": "NCCL"},
        user_env={"TLLM_DISABLE_ALLREDUCE_AUTOTUNE": "1"},
        why="with the autotuner off, AUTO's table picks one-shot kernels slower than NCCL",
    ),
    KnobCase(
        "trtllm-twoshot",
        "trtllm",
        nccl_tables(
            {"trtllm_oneshot": nccl_times(0.8), "trtllm_twoshot": nccl_times(0.5)},
            {"trtllm_fused_oneshot": nccl_times(0.9), "trtllm_fused_twoshot": nccl_times(0.6)},
        ),
        config={"allreduce_strategy": "TWOSHOT"},
        user_env={"TLLM_DISABLE_ALLREDUCE_AUTOTUNE": "1"},
        why="AUTO's table picks one-shot; the two-shot kernels are faster",
    ),
    KnobCase(
        "trtllm-oneshot",
        "trtllm",
        nccl_tables(
            {"trtllm_oneshot": nccl_times(0.5), "trtllm_twoshot": nccl_times(0.8)},
            {"trtllm_fused_oneshot": nccl_times(0.6), "trtllm_fused_twoshot": nccl_times(0.9)},
        ),
        config={"allreduce_strategy": "ONESHOT"},
        user_env={"TLLM_DISABLE_ALLREDUCE_AUTOTUNE": "1"},
        tp=4,
        group_class="nvlink-mesh",
        why="at TP4 AUTO's table sends 256+ tokens to two-shot or NCCL; one-shot is faster everywhere",
    ),
)
BY_NAME = {case.name: case for case in CASES}

#: A node where two fusion limits are admissible and the larger is cheaper by less than the tie
#: margin: the fused kernel is 0.4x NCCL up to 16 tokens and 0.95x at 32 tokens (still below the
#: default's custom all-reduce + norm there, by about a tenth), 2x above. The smaller limit is tried
#: first and both are one knob, so only a tie rule that spares equal knob counts from the margin
#: picks the larger (DeepSeek-V3: 360.6 against 346.0 us per step saved, a default of 1777 us).
FUSION_LIMIT_TIE = KnobCase(
    "vllm-fusion-size-tie",
    "vllm",
    nccl_tables(
        {"vllm_custom": nccl_times(0.9)},
        {
            "vllm_custom+rmsnorm": fused_of(nccl_times(0.9)),
            "trtllm_fused_oneshot_vllm": [
                round(v * (0.4 if t <= 16 else 0.95 if t == 32 else 2.0), 6)
                for v, t in zip(NCCL, LADDER, strict=True)
            ],
        },
    ),
    args=(
        "--compilation-config",
        '{"pass_config":{"fuse_allreduce_rms":true,"fi_allreduce_fusion_max_size_mb":0.4375}}',
    ),
    model="deepseek-v3",
    why="the fused kernel wins up to 32 tokens (448 KiB), by much less at 32 than at 16 tokens",
    sm=PCIE["sm"],
    group_class=PCIE["group_class"],
)
