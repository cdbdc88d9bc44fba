"""vLLM 0.33.0: which kernel serves each all-reduce, given the flags, env and compilation config.

Plain all-reduce, ``CudaCommunicator.all_reduce`` (cuda_communicator.py:362-446), tries: NCCL
symmetric memory (``VLLM_USE_NCCL_SYMM_MEM=1`` only, and not where FlashInfer takes the call),
FlashInfer PCIe IPC, the standalone FlashInfer all-reduce, custom all-reduce, torch symm-mem, then
NCCL. The standalone FlashInfer backend ``auto`` is MNNVL on every one-node group (its workspace
needs NVLink multicast; where it cannot be made, the TRT-LLM IPC kernels). The fused pattern is the
compilation pass ``fuse_allreduce_rms`` up to its size limit, the plain chain above it -- and, for a
few model implementations, direct calls to the fused kernel that no knob reaches (``vllm_fusion``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import flashinfer, torch_symm, vllm_fusion
from topo_gate.launchers.routes.base import (
    Cite,
    Context,
    Knobs,
    Route,
    RouteError,
    agreed,
    clipped,
    first_taker,
    marker,
    normalised,
    up_to,
)
from topo_gate.launchers.routes.vllm_fusion import capability_row

LAUNCHER = "vllm"
RELEASE = "vllm 0.33.0"


def _cite(path: str, lines: str) -> Cite:
    return Cite(RELEASE, "vllm/" + path, lines)


_COMM = "distributed/device_communicators/"
CITES = {
    "order": _cite(_COMM + "cuda_communicator.py", "362-446"),
    "enables": _cite(_COMM + "cuda_communicator.py", "56-166"),
    "fi_standalone": _cite(_COMM + "flashinfer_all_reduce.py", "393-519"),
    "fi_backend": _cite(_COMM + "flashinfer_all_reduce.py", "142-177"),
    "fi_workspace": _cite(_COMM + "flashinfer_all_reduce.py", "72-120,180-246"),
    "fi_tuned": _cite(_COMM + "flashinfer_all_reduce.py", "56-69"),
    "fi_tuned_table": _cite(_COMM + "all_reduce_utils.py", "85-94"),
    "custom": _cite(_COMM + "custom_all_reduce.py", "117-118,134-149,186-289,496-511"),
    "custom_sizes": _cite(_COMM + "all_reduce_utils.py", "29-56"),
    "symm": _cite(_COMM + "symm_mem.py", "25-156"),
    "symm_sizes": _cite(_COMM + "all_reduce_utils.py", "58-83"),
    "nccl_symm": _cite(_COMM + "all_reduce_utils.py", "111-156"),
    "pcie_ipc": _cite(_COMM + "flashinfer_pcie_ipc_all_reduce.py", "158-169"),
    "batch_invariant": _cite(_COMM + "cuda_communicator.py", "64-82"),
    "model_direct": vllm_fusion.CITES["direct"],  # the planner's notes cite it under this key
    **{f"fusion_{key}": cite for key, cite in vllm_fusion.CITES.items()},
    **{f"torch_{key}": cite for key, cite in torch_symm.CITES.items()},
}

#: Knob -> what vLLM does with it -> where (docs/launchers.md is generated from these).
KNOB_DOCS = (
    (
        "`pass_config.fuse_allreduce_rms` (default: on at -O2/-O3, TP > 1, SM 9.0 / SM 10.x)",
        "fuses AR + residual + RMSNorm in the compiled graph for batches up to "
        "`fi_allreduce_fusion_max_size_mb` (default: the capability table) // (hidden x dtype) tokens of the "
        "served model; one-shot up to vLLM's per-capability one-shot table, two-shot above (no row: one-shot; "
        "MNNVL: FlashInfer's own pick); larger batches run the plain chain. No pass without compilation "
        "(`--enforce-eager`, `-O0`, `TORCH_COMPILE_DISABLE=1`)",
        (
            "fusion_default",
            "fusion_compile_mode",
            "fusion_limit",
            "fusion_range",
            "fusion_tables",
            "fusion_call",
        ),
    ),
    (
        "`VLLM_ALLREDUCE_USE_FLASHINFER` (default 1)",
        "standalone FlashInfer all-reduce first in the chain, messages <= the capability's fusion-table size "
        "(MNNVL: the tuned table where it has a row, e.g. SM 10.0 TP 8: 128 MiB; no row, e.g. SM 12.0: off); "
        "one/two-shot by FlashInfer's heuristic",
        ("order", "fi_standalone", "fi_tuned", "fi_tuned_table"),
    ),
    (
        "`VLLM_FLASHINFER_ALLREDUCE_BACKEND` (default auto)",
        "auto: MNNVL on every one-node group, which creates NVLink multicast objects (`mnnvl_vllm`, not timed); "
        "where that workspace cannot be made (no NVSwitch), the TRT-LLM IPC kernels; trtllm: TRT-LLM IPC "
        "kernels; mnnvl: MNNVL or nothing",
        ("fi_backend", "fi_workspace"),
    ),
    (
        "`--disable-custom-all-reduce`",
        "no custom all-reduce; otherwise it runs for TP 2 or fully connected groups, messages < 8 MiB, "
        "or < min(8 MiB, the capability table) when the symm-mem communicator is enabled",
        ("custom", "custom_sizes", "enables"),
    ),
    (
        "`VLLM_ALLREDUCE_USE_SYMM_MEM` (default 1)",
        "torch symmetric memory after custom all-reduce, only where torch creates NVLink multicast (NVSwitch, "
        "not `TORCH_SYMM_MEM_DISABLE_MULTICAST=1`); messages <= the capability table; multimem at the table's "
        "TP sizes, else two-shot (`symm_mem_twoshot_multicast_vllm`, not timed)",
        ("symm", "symm_sizes", "enables", "torch_multicast_env"),
    ),
    (
        "`TORCH_SYMM_MEM_DISABLE_MULTICAST=1` (torch's, not vLLM's)",
        "symm-mem communicator off, so custom all-reduce keeps its 8 MiB limit; FlashInfer MNNVL allocates its "
        "multicast itself and is unaffected",
        ("symm", "custom", "torch_multicast_env", "torch_check_env"),
    ),
    (
        "`VLLM_USE_NCCL_SYMM_MEM` (default 0)",
        "1: NCCL symmetric-memory all-reduce (`nccl_symm_vllm`, not timed) at TP >= 4 outside custom "
        "all-reduce's preferred range, where FlashInfer does not take the call",
        ("nccl_symm", "order"),
    ),
    (
        "`VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC` (default 0)",
        "FlashInfer PCIe IPC ahead of the standalone FlashInfer all-reduce, up to a limit tuned at runtime",
        ("pcie_ipc",),
    ),
    (
        "(no knob) the served architecture",
        "DeepSeek-V3.2 / GLM-5.2 (DSA) and MiniMax-M3 (NVIDIA paths) call the fused kernel directly up to the "
        "capability's default fusion size, whatever the pass, its size and the compilation mode say; Kimi-K3 "
        "for its latent-MoE output only (`mixed_sites_vllm` where its sites differ). Unknown architecture: "
        "`model_dependent_vllm` where these differ",
        ("fusion_direct", "fusion_direct_gemma", "fusion_direct_callers", "fusion_registry"),
    ),
)

FI_BACKENDS = ("auto", "trtllm", "mnnvl")
#: Human names of the model implementations that call the fused kernel directly (plan notes).
MODEL_DIRECT_FUSED = ("DeepSeek-V3.2", "Kimi-K3", "MiniMax-M3")
MODEL_DIRECT_FUSED_ARCHITECTURES = vllm_fusion.DIRECT_ARCHITECTURES | vllm_fusion.MIXED_SITES_ARCHITECTURES
NCCL_SYMM = "nccl_symm_vllm"
MODEL_DEPENDENT = marker("model_dependent", LAUNCHER)
MIXED_SITES = marker("mixed_sites", LAUNCHER)
#: The compiled-pass model every other architecture is (the generic variant).
GENERIC_ARCHITECTURE = "LlamaForCausalLM"
#: Custom all-reduce declines world sizes above this (``should_custom_ar``), though it lists TP 16.
_CUSTOM_MAX_WORLD = 8
#: The only node count these routes model (``_node_count``).
_ONE_NODE = 1


def architecture_variants() -> tuple[str, ...]:
    """One architecture per class these routes tell apart: generic (the pass), direct, mixed sites."""
    return (
        GENERIC_ARCHITECTURE,
        sorted(vllm_fusion.DIRECT_ARCHITECTURES)[0],
        *sorted(vllm_fusion.MIXED_SITES_ARCHITECTURES),
    )


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


def check_names(knobset: Knobs) -> None:
    """Every flag and ``VLLM_*`` env var must exist in the pinned release (unknown names are rejected)."""
    flags = knobs.manifest(LAUNCHER)["flags"]
    for token in knobset.args:
        name = token.partition("=")[0]
        dotted = name.startswith(("--compilation-config.", "-cc."))
        known = name in flags or dotted or name == "--no-enforce-eager" or name.startswith("-O")
        if name.startswith("-") and not name.lstrip("-").isdigit() and not known:
            raise RouteError(f"{name} is not an all-reduce flag of {RELEASE}")
    for name in knobset.env:
        if name.startswith("VLLM_"):
            _env(knobset, name)


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


def requested_fi_backend(knobset: Knobs) -> str:
    """``_resolve_fi_ar_backend`` on one node: the env's backend, ``auto`` -> MNNVL (with fallback)."""
    backend = _env(knobset, "VLLM_FLASHINFER_ALLREDUCE_BACKEND") or "auto"
    if backend not in FI_BACKENDS:
        raise RouteError(f"unknown VLLM_FLASHINFER_ALLREDUCE_BACKEND {backend!r}")
    return "mnnvl" if backend == "auto" else backend


def fi_workspace(knobset: Knobs, ctx: Context) -> str | None:
    """The backend of the FlashInfer workspace vLLM ends up with, None when none can be made: MNNVL
    needs NVLink multicast (FlashInfer's own, whatever torch's env says), TRT-LLM peer access; ``auto``
    falls back from MNNVL to TRT-LLM on one node."""
    auto = (_env(knobset, "VLLM_FLASHINFER_ALLREDUCE_BACKEND") or "auto") == "auto"
    backend = requested_fi_backend(knobset)
    if backend == "mnnvl" and not ctx.multicast:
        backend = "trtllm" if auto else ""
    return backend if backend == "mnnvl" or (backend == "trtllm" and ctx.p2p) else None


def _standalone_limit(knobset: Knobs, ctx: Context) -> int | None:
    """``max_workspace_size``: the tuned MNNVL size where the *requested* backend is MNNVL and the table
    has a row (it stays after a fallback to TRT-LLM), else the capability's fusion-table size."""
    default_mb = capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    if not default_mb:
        return None  # FlashInferAllReduce disables itself for this world size
    major, minor = ctx.capability
    tuned = knobs.table(LAUNCHER, "fi_mnnvl_allreduce_max_size_mb").get(
        f"{major}{minor},{ctx.tp},{_ONE_NODE}"
    )
    if requested_fi_backend(knobset) == "mnnvl" and tuned is not None:
        return int(tuned * knobs.MiB)
    return int(default_mb * knobs.MiB)


def _standalone_route(knobset: Knobs, ctx: Context) -> Route:
    if not env_bool(knobset, "VLLM_ALLREDUCE_USE_FLASHINFER"):
        return up_to(None, None)
    limit, backend = _standalone_limit(knobset, ctx), fi_workspace(knobset, ctx)
    if limit is None or backend is None:
        return up_to(None, None)
    if backend == "mnnvl":
        return up_to(limit + 1, "mnnvl_vllm")  # input_tensor.nbytes > max_workspace_size declines
    return clipped(
        flashinfer.heuristic_route(ctx.tp, ctx.itemsize, fused=False, launcher=LAUNCHER), limit + 1
    )


def symm_enabled(knobset: Knobs, ctx: Context) -> bool:
    """Whether ``SymmMemCommunicator`` comes up: the env, a table row, and a multicast address."""
    if not env_bool(knobset, "VLLM_ALLREDUCE_USE_SYMM_MEM") or not torch_symm.multicast(knobset.env, ctx):
        return False
    return capability_row(ctx, "symm_mem_all_reduce_max_sizes", "dotted") is not None


def _custom_route(knobset: Knobs, ctx: Context) -> Route:
    if "--disable-custom-all-reduce" in knobset.args or not ctx.p2p:
        return up_to(None, None)  # without P2P, CustomAllreduce disables itself
    if ctx.tp not in knobs.table(LAUNCHER, "custom_all_reduce_world_sizes") or ctx.tp > _CUSTOM_MAX_WORLD:
        return up_to(None, None)
    if not (ctx.tp == 2 or ctx.full_nvlink):
        return up_to(None, None)
    limit = knobs.table(LAUNCHER, "custom_all_reduce_default_max_size")
    if symm_enabled(knobset, ctx):
        table = capability_row(ctx, "custom_all_reduce_max_sizes", "dotted")
        limit = min(limit, int(table)) if table is not None else limit
    return up_to(limit, "vllm_custom")  # inp_size < max_size


def _symm_route(knobset: Knobs, ctx: Context) -> Route:
    if not symm_enabled(knobset, ctx) or ctx.itemsize != 2:
        return up_to(None, None)  # the communicator reduces bf16 only
    limit = int(capability_row(ctx, "symm_mem_all_reduce_max_sizes", "dotted") or 0)
    major, minor = ctx.capability
    multimem = ctx.tp in knobs.table(LAUNCHER, "symm_mem_multimem_world_sizes").get(f"{major}.{minor}", [])
    return up_to(limit + 1, torch_symm.MULTIMEM if multimem else torch_symm.TWOSHOT_MULTICAST)


def _nccl_symm_route(knobset: Knobs, ctx: Context) -> Route:
    """``should_nccl_symm_mem_allreduce``: TP >= 4, sizes <= low or >= high of custom AR's range."""
    config = knobs.table(LAUNCHER, "nccl_symm_mem_all_reduce_config")
    if not env_bool(knobset, "VLLM_USE_NCCL_SYMM_MEM") or ctx.tp < config["min_world_size"]:
        return up_to(None, None)
    preferred = config["custom_ar_preferred_ranges"].get(str(ctx.tp))
    if preferred is not None:
        low, high = preferred
        return normalised(((low + 1, NCCL_SYMM), (high, None), (None, NCCL_SYMM)))
    return up_to(None, NCCL_SYMM if ctx.tp > config["always_use_above_world_size"] else None)


def _routes_for(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    backend = fi_workspace(knobset, ctx)
    plain = first_taker(
        (
            _standalone_route(knobset, ctx),
            _nccl_symm_route(knobset, ctx),
            _custom_route(knobset, ctx),
            _symm_route(knobset, ctx),
        )
    )
    compiled = first_taker((vllm_fusion.pass_route(knobset, ctx, pass_config(knobset), backend), plain))
    direct = first_taker((vllm_fusion.direct_route(ctx, backend), plain))
    architecture = ctx.served_architecture
    if architecture in vllm_fusion.DIRECT_ARCHITECTURES:
        fused = direct
    elif architecture in vllm_fusion.MIXED_SITES_ARCHITECTURES:
        fused = agreed([{"p": compiled}, {"p": direct}], MIXED_SITES)["p"]
    else:
        fused = compiled
    return {"allreduce": plain, "allreduce_rmsnorm": fused}


def routes(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, the kernel vLLM runs at each message size with ``knobset`` on ``ctx``; with the
    architecture unknown, ``model_dependent_vllm`` where the architecture variants disagree."""
    check_names(knobset)
    if env_bool(knobset, "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC"):
        raise RouteError(f"FlashInfer PCIe IPC's size limit is tuned at runtime ({CITES['pcie_ipc']})")
    if env_bool(knobset, "VLLM_BATCH_INVARIANT"):
        raise RouteError(
            f"VLLM_BATCH_INVARIANT=1 reroutes every all-reduce ({CITES['batch_invariant']}): not modelled"
        )
    if ctx.served_architecture is not None:
        return _routes_for(knobset, ctx)
    variants = [_routes_for(knobset, replace(ctx, architecture=a)) for a in architecture_variants()]
    return agreed(variants, MODEL_DEPENDENT)


def model_direct_route(knobset: Knobs, ctx: Context) -> Route:
    """What a model that calls the fused kernel directly runs at its norm sites."""
    return vllm_fusion.direct_route(ctx, fi_workspace(knobset, ctx))
