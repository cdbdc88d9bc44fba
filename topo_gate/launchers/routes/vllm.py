"""vLLM 0.33.0: which kernel serves each all-reduce, given the flags, env and compilation config.

Plain all-reduce, ``CudaCommunicator.all_reduce`` (cuda_communicator.py:362-440), tries FlashInfer
PCIe IPC, the standalone FlashInfer all-reduce, custom all-reduce, torch symm-mem, then NCCL. The
fused pattern is the compilation pass ``fuse_allreduce_rms`` up to its size limit (in tokens of the
served model), the plain chain above it -- and, for a few model implementations, direct calls to the
fused kernel that no knob reaches.
"""

from __future__ import annotations

import json
from typing import Any

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import flashinfer
from topo_gate.launchers.routes.base import (
    Cite,
    Context,
    Knobs,
    Route,
    RouteError,
    clipped,
    first_taker,
    split_at,
    up_to,
)

LAUNCHER = "vllm"
RELEASE = "vllm 0.33.0"


def _cite(path: str, lines: str) -> Cite:
    return Cite(RELEASE, "vllm/" + path, lines)


CITES = {
    "order": _cite("distributed/device_communicators/cuda_communicator.py", "362-440"),
    "enables": _cite("distributed/device_communicators/cuda_communicator.py", "56-166"),
    "fi_standalone": _cite("distributed/device_communicators/flashinfer_all_reduce.py", "393-520"),
    "fi_backend": _cite(
        "distributed/device_communicators/flashinfer_all_reduce.py", "_resolve_fi_ar_backend"
    ),
    "fusion_tables": _cite("compilation/passes/fusion/allreduce_rms_fusion.py", "104-180"),
    "fusion_call": _cite("compilation/passes/fusion/allreduce_rms_fusion.py", "188-296"),
    "fusion_range": _cite("config/vllm.py", "2669-2690"),
    "fusion_limit": _cite("config/compilation.py", "182-208"),
    "fusion_default": _cite("config/vllm.py", "179-203,302,323"),
    "custom": _cite("distributed/device_communicators/custom_all_reduce.py", "237-251,496-511"),
    "symm": _cite("distributed/device_communicators/symm_mem.py", "60-156"),
    "pcie_ipc": _cite("distributed/device_communicators/flashinfer_pcie_ipc_all_reduce.py", "158-175"),
    "model_direct": _cite("models/common/ops/fused_allreduce_rms_norm.py", "23-62"),
    "model_direct_gemma": _cite("model_executor/layers/fused_allreduce_gemma_rms_norm.py", "56-112"),
}

#: Knob -> what vLLM does with it -> where (docs/launchers.md is generated from these).
KNOB_DOCS = (
    (
        "`pass_config.fuse_allreduce_rms` (default: on at -O2, TP > 1, SM 9.0 / SM 10.x)",
        "fuses AR + residual + RMSNorm in the compiled graph for batches up to "
        "`fi_allreduce_fusion_max_size_mb` (default: the capability table) // (hidden x dtype) tokens of the "
        "served model; one-shot up to vLLM's per-capability one-shot table, two-shot above (no row: one-shot); "
        "larger batches run the plain chain",
        ("fusion_default", "fusion_limit", "fusion_range", "fusion_tables", "fusion_call"),
    ),
    (
        "`VLLM_ALLREDUCE_USE_FLASHINFER` (default 1)",
        "standalone FlashInfer all-reduce first in the chain, messages <= the capability's fusion-table size "
        "(no row, e.g. SM 12.0: off); one/two-shot by FlashInfer's heuristic",
        ("order", "fi_standalone"),
    ),
    (
        "`VLLM_FLASHINFER_ALLREDUCE_BACKEND` (default auto)",
        "auto: MNNVL on one node (multicast), TRT-LLM where multicast is missing; trtllm: TRT-LLM IPC kernels",
        ("fi_backend",),
    ),
    (
        "`--disable-custom-all-reduce`",
        "no custom all-reduce; otherwise it runs for TP 2 or fully connected groups, messages < 8 MiB, "
        "or < min(8 MiB, the capability table) when symm-mem is enabled",
        ("custom", "enables"),
    ),
    (
        "`VLLM_ALLREDUCE_USE_SYMM_MEM` (default 1)",
        "torch symmetric memory after custom all-reduce, only with NVLink multicast; messages <= the capability "
        "table; multimem at the table's TP sizes, else two-shot (copy in, in-place, copy out)",
        ("symm", "enables"),
    ),
    (
        "`VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC` (default 0)",
        "FlashInfer PCIe IPC first in the chain, up to a limit tuned at runtime",
        ("pcie_ipc",),
    ),
    (
        "(no knob) model implementations",
        "DeepSeek-V3.2 and Kimi-K3 (NVIDIA paths) and MiniMax-M3 call the fused kernel directly up to the "
        "capability's default fusion size, whatever `fuse_allreduce_rms` and its size say",
        ("model_direct", "model_direct_gemma"),
    ),
)

FI_BACKENDS = ("auto", "trtllm", "mnnvl")
#: World sizes the fusion pass supports (``FI_SUPPORTED_WORLD_SIZES``, config/compilation.py:188).
FI_WORLD_SIZES = (2, 4, 8, 16)
#: Model implementations that call FlashInfer's fused all-reduce + RMSNorm directly (model_direct):
#: DeepSeek-V3.2 and Kimi-K3 (NVIDIA paths), MiniMax-M3 (Gemma RMSNorm). None is a topo-gate preset
#: with a distinct name, so plans name them in notes instead of routing them per model.
MODEL_DIRECT_FUSED = ("DeepSeek-V3.2", "Kimi-K3", "MiniMax-M3")


def _env(knobset: Knobs, name: str) -> str | None:
    if name not in knobs.manifest(LAUNCHER)["env"]:
        raise RouteError(f"{name} is not an all-reduce env var of {RELEASE}")
    return knobset.env.get(name)


def env_bool(knobset: Knobs, name: str) -> bool:
    value = _env(knobset, name)
    if value is None:
        return bool(knobs.manifest(LAUNCHER)["env"][name]["default"])
    if not value.strip().lstrip("-").isdigit():
        raise RouteError(f"{name}={value!r}: vLLM reads it as bool(int(...)) and would fail to start")
    return bool(int(value))


def pass_config(knobset: Knobs) -> dict[str, Any]:
    """The ``pass_config`` keys the args set (``--compilation-config JSON``; later ones win)."""
    found: dict[str, Any] = {}  # JSON values as the launcher parses them
    args = knobset.args
    for index, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name in ("--compilation-config", "-cc"):
            text = value if eq else (args[index + 1] if index + 1 < len(args) else "{}")
            found.update(json.loads(text).get("pass_config", {}))
        elif name.startswith(("--compilation-config.pass_config.", "-cc.pass_config.")):
            key = name.rsplit(".", 1)[1]
            found[key] = json.loads((value if eq else args[index + 1]).lower())
    known = {k.rsplit(".", 1)[1] for k in knobs.manifest(LAUNCHER)["config_keys"]}
    unknown = sorted(set(found) - known)
    if unknown:
        raise RouteError(f"unknown pass_config key(s) {unknown} for {RELEASE}")
    return found


def _capability_row(ctx: Context, table: str, key: str) -> float | None:
    major, minor = ctx.capability
    spelled = {"int": f"{major}{minor}", "dotted": f"{major}.{minor}"}[key]
    row = knobs.table(LAUNCHER, table).get(spelled, {})
    value = row.get(str(ctx.tp))
    return None if value is None else float(value)


def _fi_backend(knobset: Knobs, ctx: Context) -> str | None:
    """The FlashInfer workspace backend; None when no workspace can be created."""
    backend = _env(knobset, "VLLM_FLASHINFER_ALLREDUCE_BACKEND") or "auto"
    if backend not in FI_BACKENDS:
        raise RouteError(f"unknown VLLM_FLASHINFER_ALLREDUCE_BACKEND {backend!r}")
    if backend == "auto":
        # One node: mnnvl, trtllm where the node has no multicast (flashinfer_all_reduce.py).
        return "mnnvl" if ctx.multicast else "trtllm"
    if (backend == "mnnvl" and not ctx.multicast) or not ctx.p2p:
        return None  # the workspace cannot be created: no multicast / no peer access
    return backend


def _standalone_route(knobset: Knobs, ctx: Context) -> Route:
    if not env_bool(knobset, "VLLM_ALLREDUCE_USE_FLASHINFER"):
        return up_to(None, None)
    max_mb = _capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    backend = _fi_backend(knobset, ctx)
    if not max_mb or backend is None:
        return up_to(None, None)
    limit = int(max_mb * knobs.MiB) + 1  # input_tensor.nbytes > max_workspace_size declines
    if backend == "mnnvl":
        return up_to(limit, "mnnvl_vllm")
    return clipped(flashinfer.heuristic_route(ctx.tp, ctx.itemsize, fused=False, launcher=LAUNCHER), limit)


def _symm_limit(knobset: Knobs, ctx: Context) -> int | None:
    if not env_bool(knobset, "VLLM_ALLREDUCE_USE_SYMM_MEM") or not ctx.multicast or ctx.itemsize != 2:
        return None
    value = _capability_row(ctx, "symm_mem_all_reduce_max_sizes", "dotted")
    return None if value is None else int(value)


def _custom_route(knobset: Knobs, ctx: Context) -> Route:
    if "--disable-custom-all-reduce" in knobset.args or not ctx.p2p:
        return up_to(None, None)  # without P2P, CustomAllreduce disables itself
    if ctx.tp not in knobs.table(LAUNCHER, "custom_all_reduce_world_sizes") or ctx.tp > 8:
        return up_to(None, None)
    if not (ctx.tp == 2 or ctx.full_nvlink):
        return up_to(None, None)
    limit = knobs.table(LAUNCHER, "custom_all_reduce_default_max_size")
    if _symm_limit(knobset, ctx) is not None:
        table = _capability_row(ctx, "custom_all_reduce_max_sizes", "dotted")
        limit = min(limit, int(table)) if table is not None else limit
    return up_to(limit, "vllm_custom")  # inp_size < max_size


def _symm_route(knobset: Knobs, ctx: Context) -> Route:
    limit = _symm_limit(knobset, ctx)
    if limit is None:
        return up_to(None, None)
    major, minor = ctx.capability
    multimem = ctx.tp in knobs.table(LAUNCHER, "symm_mem_multimem_world_sizes").get(f"{major}.{minor}", [])
    return up_to(limit + 1, "symm_mem_multimem" if multimem else "symm_mem_twoshot_vllm")


def fusion_default_on(ctx: Context) -> bool:
    """``enable_allreduce_rms_fusion`` at the default -O2: TP > 1 on SM 9.0 or the SM 10.x family."""
    return ctx.tp > 1 and (ctx.capability == (9, 0) or ctx.capability[0] == 10)


def fused_kernel_route(ctx: Context, backend: str, limit_bytes: int) -> Route:
    """The fused kernel vLLM runs below ``limit_bytes`` (one-shot by its capability table)."""
    if backend == "mnnvl":
        return up_to(limit_bytes, "mnnvl_fused_vllm")
    oneshot_mb = _capability_row(ctx, "fi_allreduce_one_shot_max_size_mb", "int")
    if oneshot_mb is None:  # no entry: _select_flashinfer_allreduce_use_oneshot forces one-shot
        return up_to(limit_bytes, "trtllm_fused_oneshot_vllm")
    split = split_at(
        int(oneshot_mb * knobs.MiB) + 1, "trtllm_fused_oneshot_vllm", "trtllm_fused_twoshot_vllm"
    )
    return clipped(split, limit_bytes)


def _fusion_route(knobset: Knobs, ctx: Context) -> Route:
    config = pass_config(knobset)
    enabled = config.get("fuse_allreduce_rms", fusion_default_on(ctx))
    backend = _fi_backend(knobset, ctx)
    if not enabled or ctx.tp not in FI_WORLD_SIZES or backend is None:
        return up_to(None, None)
    max_mb = config.get("fi_allreduce_fusion_max_size_mb")
    if max_mb is None:
        max_mb = _capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    if not max_mb:
        return up_to(None, None)
    tokens = int(max_mb * knobs.MiB) // ctx.row_bytes  # compile range split at this token count
    return fused_kernel_route(ctx, backend, tokens * ctx.row_bytes + 1)


def routes(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, the kernel vLLM runs at each message size with ``knobset`` on ``ctx``."""
    if env_bool(knobset, "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC"):
        raise RouteError(f"FlashInfer PCIe IPC's size limit is tuned at runtime ({CITES['pcie_ipc']})")
    plain = first_taker(
        (_standalone_route(knobset, ctx), _custom_route(knobset, ctx), _symm_route(knobset, ctx))
    )
    fused = first_taker((_fusion_route(knobset, ctx), plain))
    return {"allreduce": plain, "allreduce_rmsnorm": fused}


def model_direct_route(knobset: Knobs, ctx: Context) -> Route:
    """What a model that calls the fused kernel directly runs: up to the capability's *default* fusion
    size, whatever ``fuse_allreduce_rms`` and ``fi_allreduce_fusion_max_size_mb`` say."""
    max_mb = _capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    backend = _fi_backend(knobset, ctx)
    if not max_mb or backend is None:
        return up_to(None, None)
    tokens = int(max_mb * knobs.MiB) // ctx.row_bytes
    return fused_kernel_route(ctx, backend, tokens * ctx.row_bytes + 1)
