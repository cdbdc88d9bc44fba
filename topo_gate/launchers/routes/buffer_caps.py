"""The largest message each launcher sends through each of its Lamport buffers, in tokens of the
served model: where a probe must time size transitions from (a prior at the cap prices a route
that fills that buffer as the buffer really holds it).

A Lamport kernel's first calls after a larger message pay for clearing that message's slots, and
the cost is not linear in the prior size (docs/trials.md "Size transitions"): a planner needs the
transition measured after each buffer's own cap, not after the ladder's largest size. Every cap
is read from the pinned release's own table or default (``knobs`` manifests), cited per entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import sglang_custom_v2, trtllm
from topo_gate.launchers.routes.base import Cite

_SGLANG, _VLLM = "sglang 0.5.23", "vllm 0.33.0"
CITES = {
    # FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048, the fused site's batch limit (:157), and the workspace
    # SGLang pre-allocates for it, which plain all-reduces share.
    "sglang_workspace": Cite(_SGLANG, "sglang/srt/layers/layer_boundary/residual/add_norm.py", "141,157"),
    "sglang_workspace_alloc": Cite(_SGLANG, "sglang/srt/model_executor/runner/base_runner.py", "329-333"),
    # SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB = EnvInt(16 * 1024), read as the v2 workspace size.
    "sglang_v2": Cite(_SGLANG, "sglang/srt/environ.py", "1535"),
    "sglang_v2_size": Cite(
        _SGLANG, "sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py", "74"
    ),
    "vllm_fused": Cite(_VLLM, "vllm/compilation/passes/fusion/allreduce_rms_fusion.py", "102-127"),
    "vllm_oneshot": Cite(_VLLM, "vllm/compilation/passes/fusion/allreduce_rms_fusion.py", "129-153"),
    "trtllm_limit": trtllm.CITES["limit"],
}


@dataclass(frozen=True)
class BufferCap:
    """``tokens``: the largest whole-token message of the served model the launcher sends through
    ``buffer``; ``source``: where the limit is defined."""

    buffer: str
    tokens: int
    source: str


def buffer_caps(*, tp: int, capability: tuple[int, int], hidden: int, itemsize: int) -> tuple[BufferCap, ...]:
    """Every Lamport buffer cap of the pinned launchers on a TP group of this capability, ascending
    by tokens; buffers the launchers never build here (no table row, a world size their kernels do
    not take) are left out."""
    row = hidden * itemsize
    caps = []
    if capability[0] in (9, 10):  # SGLang's fusion (and its workspace) exists on SM 9.x / 10.x only
        tokens = int(knobs.table("sglang", "fuse_allreduce_max_batch_size"))
        caps.append(BufferCap("SGLang FlashInfer workspace", tokens, str(CITES["sglang_workspace"])))
    if tp in sglang_custom_v2.world_sizes(capability):
        kib = int(knobs.manifest("sglang")["env"][sglang_custom_v2.MAX_SIZE_ENV]["default"])
        caps.append(
            BufferCap(
                "SGLang custom all-reduce v2", kib * sglang_custom_v2.KIB // row, str(CITES["sglang_v2"])
            )
        )
    for name, table, cite in (
        ("vLLM fused all-reduce + RMSNorm", "fi_allreduce_fusion_max_size_mb", CITES["vllm_fused"]),
        ("vLLM fused one-shot", "fi_allreduce_one_shot_max_size_mb", CITES["vllm_oneshot"]),
    ):
        for limit in knobs.per_capability("vllm", table, tp, capability, "int", knobs.MiB):
            if limit is not None:
                caps.append(BufferCap(name, limit // row, str(cite)))
    if tp in trtllm.FUSION_KERNEL_TPS:
        caps.append(
            BufferCap(
                "TensorRT-LLM routing limit", trtllm.routing_limit(tp) // row, str(CITES["trtllm_limit"])
            )
        )
    return tuple(sorted((cap for cap in caps if cap.tokens >= 1), key=lambda cap: (cap.tokens, cap.buffer)))
