"""TensorRT-LLM: which kernel serves each all-reduce, given ``allreduce_strategy`` and env.

``AllreduceOp::selectImplementation`` (cpp/tensorrt_llm/thop/allreduceOp.cpp) takes NCCL / UB /
NCCL_SYMMETRIC as given; every other strategy falls back to NCCL when the message is larger than
the all-reduce workspace or the group lacks P2P or NVLink (``ifFallbackToNCCL``) -- so on a PCIe
group ONESHOT and TWOSHOT run NCCL at every size. TWOSHOT below TP tokens runs ONESHOT; AUTO
consults a compiled-in lookup table. One strategy serves plain and fused all-reduces alike.
"""

from __future__ import annotations

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite, Context, Knobs, Route, RouteError, clipped, split_at, up_to

LAUNCHER = "trtllm"
#: The manifest's pinned commit; allreduceOp.cpp was read at the stored 01e2c36 (same functions).
RELEASE = "TensorRT-LLM 01e2c36"
CITES = {
    "select": Cite(RELEASE, "cpp/tensorrt_llm/thop/allreduceOp.cpp", "AllreduceOp::selectImplementation"),
    "fallback": Cite(RELEASE, "cpp/tensorrt_llm/thop/allreduceOp.cpp", "AllreduceOp::ifFallbackToNCCL"),
    "workspace": Cite(
        "TensorRT-LLM git-0004396", "tensorrt_llm/_torch/distributed (excerpt)", "max_workspace_size_auto"
    ),
}
WORKSPACE_ENV = "TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE"
#: Strategies whose kernels no trial times: routed to these names, which a profile never lists.
_UNMEASURED = {
    "AUTO": "trtllm_auto_table",
    "MINLATENCY": "trtllm_minlatency",
    "LOWPRECISION": "trtllm_lowprecision",
    "MNNVL": "mnnvl_trtllm",
    "UB": "trtllm_userbuffers",
    "NCCL_SYMMETRIC": "nccl_symmetric_trtllm",
}


def strategy(knobset: Knobs) -> str:
    value = str(knobset.config.get("allreduce_strategy", "AUTO"))
    choices = knobs.manifest(LAUNCHER)["config_keys"]["allreduce_strategy"]["choices"]
    if value not in choices:
        raise RouteError(f"unknown allreduce_strategy {value!r} (TensorRT-LLM takes {', '.join(choices)})")
    return value


def workspace_bytes(knobset: Knobs) -> int:
    value = knobset.env.get(WORKSPACE_ENV)
    return int(value) if value else int(knobs.table(LAUNCHER, "allreduce_workspace_default_size"))


def _route(knobset: Knobs, ctx: Context, *, fused: bool) -> Route:
    chosen = strategy(knobset)
    # An unmeasured strategy's kernel; in the fused pattern it fuses, so its name says so.
    unmeasured = _UNMEASURED.get(chosen, "") + ("_fused" if fused else "")
    if chosen == "NCCL":
        return up_to(None, None)
    if chosen in ("UB", "NCCL_SYMMETRIC"):
        return up_to(None, unmeasured)
    if not ctx.full_nvlink:
        return up_to(None, None)  # ifFallbackToNCCL: no NVLink (or P2P) in the group
    limit = workspace_bytes(knobset) + 1  # message_size_bytes > max_workspace_size -> NCCL
    prefix = "trtllm_fused_" if fused else "trtllm_"
    if chosen == "ONESHOT":
        return up_to(limit, prefix + "oneshot")
    if chosen == "TWOSHOT":
        below_tp_tokens = (ctx.tp - 1) * ctx.row_bytes + 1  # seq_len < tp_size -> ONESHOT
        return clipped(split_at(below_tp_tokens, prefix + "oneshot", prefix + "twoshot"), limit)
    return up_to(limit, unmeasured)


def routes(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, the kernel TensorRT-LLM runs at each message size with ``knobset`` on ``ctx``."""
    return {
        "allreduce": _route(knobset, ctx, fused=False),
        "allreduce_rmsnorm": _route(knobset, ctx, fused=True),
    }
