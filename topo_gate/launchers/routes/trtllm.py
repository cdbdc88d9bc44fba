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
#: The pinned commit (0004396) could not be read through the source tools; the dispatch was read at
#: the stored commits named in each citation (the functions cited exist in all of them).
RELEASE = "TensorRT-LLM 01e2c36"
CITES = {
    "select": Cite(RELEASE, "cpp/tensorrt_llm/thop/allreduceOp.cpp", "AllreduceOp::selectImplementation"),
    "fallback": Cite(RELEASE, "cpp/tensorrt_llm/thop/allreduceOp.cpp", "AllreduceOp::ifFallbackToNCCL"),
    "limit": Cite(
        "TensorRT-LLM 005b299",
        "cpp/tensorrt_llm/common/customAllReduceUtils.h",
        "getMaxRequiredWorkspaceSize",
    ),
    "workspace": Cite(
        "TensorRT-LLM 4fb601b",
        "tensorrt_llm/_torch/distributed/allreduce_helper.py",
        "CustomAllReduceHelper.max_workspace_size_auto",
    ),
}
#: The largest message a non-NCCL strategy takes (``getMaxRequiredWorkspaceSize``): decimal 16 MB at
#: TP <= 2, 8 MB above -- fixed, not the workspace env (FORCE_DETERMINISTIC changes it, and the kernel).
ROUTING_LIMIT_TP2 = 16_000_000
ROUTING_LIMIT_ABOVE_TP2 = 8_000_000
WORKSPACE_ENV = "TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE"
#: Knob -> what TensorRT-LLM does with it -> where (docs/launchers.md is generated from these).
KNOB_DOCS = (
    (
        "`allreduce_strategy` (default AUTO)",
        "NCCL / UB / NCCL_SYMMETRIC as given; any other strategy runs NCCL for messages over the workspace "
        "and on groups without NVLink or P2P (so on PCIe ONESHOT and TWOSHOT are NCCL at every size); "
        "TWOSHOT below TP tokens runs ONESHOT; AUTO follows a compiled-in lookup table",
        ("select", "fallback"),
    ),
    (
        "(fixed) routing limit",
        "a non-NCCL strategy takes messages of at most 16,000,000 B at TP <= 2 and 8,000,000 B above; larger "
        "ones run NCCL",
        ("limit", "select"),
    ),
    (
        f"`{WORKSPACE_ENV}`",
        "sizes the Lamport workspace the PyTorch backend allocates (default 64 MiB); it does not move the "
        "routing limit, and a value below it leaves routed messages without room -- never set by topo-gate",
        ("workspace",),
    ),
    (
        "`NCCL_NVLS_ENABLE`",
        "not set by TensorRT-LLM: NCCL's default may use NVLS at TP > 2 on NVSwitch, unlike the trial baseline",
        (),
    ),
)
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


def routing_limit(tp: int) -> int:
    """The largest message (bytes) a non-NCCL strategy runs at ``tp``."""
    return ROUTING_LIMIT_TP2 if tp <= 2 else ROUTING_LIMIT_ABOVE_TP2


def _route(knobset: Knobs, ctx: Context, *, fused: bool) -> Route:
    chosen = strategy(knobset)
    # An unmeasured strategy's kernel; in the fused pattern it fuses, so its name says so.
    unmeasured = _UNMEASURED.get(chosen, "") + ("_fused" if fused else "")
    if chosen == "NCCL":
        return up_to(None, None)
    if chosen in ("UB", "NCCL_SYMMETRIC"):
        return up_to(None, unmeasured)
    if not (ctx.full_nvlink and ctx.p2p):
        return up_to(None, None)  # ifFallbackToNCCL: no NVLink (or P2P) in the group
    if knobset.env.get(WORKSPACE_ENV) and int(knobset.env[WORKSPACE_ENV]) < routing_limit(ctx.tp):
        raise RouteError(
            f"{WORKSPACE_ENV} below the routing limit ({routing_limit(ctx.tp)} B) leaves routed messages "
            f"without workspace ({CITES['workspace']})"
        )
    limit = routing_limit(ctx.tp) + 1  # message_size_bytes > max_workspace_size -> NCCL
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
