"""vLLM 0.33.0 and 0.34.0: which kernel serves each all-reduce, given the flags, env, compilation
config and served architecture (``ctx.release``; None: the newest).

Plain all-reduce, ``CudaCommunicator.all_reduce``, tries: NCCL symmetric memory
(``VLLM_USE_NCCL_SYMM_MEM=1`` only, and not where FlashInfer takes the call), FlashInfer PCIe IPC, the
standalone FlashInfer all-reduce, custom all-reduce, torch symm-mem, then NCCL. The standalone
FlashInfer backend ``auto`` is MNNVL on every one-node group (its workspace needs NVLink multicast;
where it cannot be made, the TRT-LLM IPC kernels); 0.34.0 sends a HiSparse config to TRT-LLM instead,
and declines rows that are not whole 16-byte vectors. The fused pattern is the compilation pass
``fuse_allreduce_rms`` up to its size limit where vLLM compiles the model (``vllm_compile``), the plain
chain elsewhere and above it -- and, for the model implementations ``vllm_models`` names, the fused
kernel they call themselves, or a kernel of their own.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, NamedTuple

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import flashinfer, torch_symm, vllm_compile, vllm_fusion, vllm_models
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
from topo_gate.launchers.routes.vllm_release import LAUNCHER, cites, release_name, release_of
from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN

_COMM = "distributed/device_communicators/"
_OWN_CITES = cites(
    {
        "order": (_COMM + "cuda_communicator.py", {"0.33.0": "362-446", "0.34.0": "389-473"}),
        "enables": (_COMM + "cuda_communicator.py", {"0.33.0": "56-166", "0.34.0": "56-167"}),
        "fi_standalone": (_COMM + "flashinfer_all_reduce.py", {"0.33.0": "393-519", "0.34.0": "415-549"}),
        "fi_backend": (_COMM + "flashinfer_all_reduce.py", {"0.33.0": "142-177", "0.34.0": "143-194"}),
        "fi_workspace": (
            _COMM + "flashinfer_all_reduce.py",
            {"0.33.0": "72-120,180-246", "0.34.0": "73-121,197-268"},
        ),
        "fi_tuned": (_COMM + "flashinfer_all_reduce.py", {"0.33.0": "56-69", "0.34.0": "57-70"}),
        "fi_tuned_table": (_COMM + "all_reduce_utils.py", {"0.33.0": "85-94", "0.34.0": "85-94"}),
        "custom": (
            _COMM + "custom_all_reduce.py",
            {"0.33.0": "117-118,134-149,186-289,496-511", "0.34.0": "117-118,134-149,187-290,500-515"},
        ),
        "custom_sizes": (_COMM + "all_reduce_utils.py", {"0.33.0": "29-56", "0.34.0": "29-56"}),
        "symm": (_COMM + "symm_mem.py", {"0.33.0": "25-156", "0.34.0": "25-156"}),
        "symm_sizes": (_COMM + "all_reduce_utils.py", {"0.33.0": "58-83", "0.34.0": "58-83"}),
        "nccl_symm": (_COMM + "all_reduce_utils.py", {"0.33.0": "111-156", "0.34.0": "111-156"}),
        "pcie_ipc": (_COMM + "flashinfer_pcie_ipc_all_reduce.py", {"0.33.0": "158-169", "0.34.0": "158-169"}),
        "batch_invariant": (_COMM + "cuda_communicator.py", {"0.33.0": "64-82", "0.34.0": "64-82"}),
        "fi_hisparse": (_COMM + "flashinfer_all_reduce.py", {"0.34.0": "158-172"}),
        "hisparse_config": ("config/vllm.py", {"0.34.0": "1805-1840"}),
        "fi_row_vectors": (_COMM + "flashinfer_all_reduce.py", {"0.34.0": "515-521"}),
    }
)
#: Per release, every citation of the vLLM route modules (``fusion_*``, ``compile_*``, ``models_*``
#: are the submodules'; ``torch_*`` torch's, the same for both).
CITES: dict[str, dict[str, Cite]] = {
    release: {
        **own,
        "model_direct": vllm_fusion.CITES[release]["direct"],
        **{f"fusion_{key}": cite for key, cite in vllm_fusion.CITES[release].items()},
        **{f"compile_{key}": cite for key, cite in vllm_compile.CITES[release].items()},
        **{f"models_{key}": cite for key, cite in vllm_models.CITES[release].items()},
        **{f"torch_{key}": cite for key, cite in torch_symm.CITES.items()},
    }
    for release, own in _OWN_CITES.items()
}

_KNOB_DOCS_SHARED = (
    (
        "`pass_config.fuse_allreduce_rms` (default: on at -O2/-O3, TP > 1, SM 9.0 / SM 10.x)",
        "fuses AR + residual + RMSNorm in the compiled graph for batches up to "
        "`fi_allreduce_fusion_max_size_mb` (default: the capability table) // (hidden x dtype) tokens of the "
        "served model; one-shot up to vLLM's per-capability one-shot table, two-shot above (no row: one-shot; "
        "MNNVL: FlashInfer's own pick); larger batches run the plain chain. No pass where vLLM does not compile "
        "the model (below)",
        ("fusion_default", "fusion_limit", "fusion_range", "fusion_tables", "fusion_call"),
    ),
    (
        "compilation mode: `-cc.mode` / `--compilation-config '{\"mode\": ...}'`, `--enforce-eager`, `-O0`, "
        "`TORCH_COMPILE_DISABLE=1`, `VLLM_USE_BREAKABLE_CUDAGRAPH`",
        "the pass runs in mode VLLM_COMPILE (3) only: not with a mode of 0-2 (or its name), `--enforce-eager`, "
        "`TORCH_COMPILE_DISABLE=1`, `-O0` without a mode, nor under breakable CUDA graphs, which are on for "
        "`VLLM_USE_BREAKABLE_CUDAGRAPH=1` and, unset, for the release's breakable architectures "
        "(`VLLM_USE_BREAKABLE_CUDAGRAPH=0` opts out)",
        (
            "compile_compile_mode",
            "compile_mode_values",
            "compile_dotted_args",
            "compile_breakable",
            "compile_breakable_env",
            "fusion_opt_flag",
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
)
_ARCHITECTURE_DOC_0_33 = (
    "(no knob) the served architecture",
    "DeepSeek-V3.2 / GLM-5.2 (DSA) and MiniMax-M3 (NVIDIA paths) call the fused kernel directly up to the "
    "capability's default fusion size, whatever the pass, its size and the compilation mode say; Kimi-K3 "
    "for its latent-MoE output only (`mixed_sites_vllm` where its sites differ). Breakable-CUDA-graph "
    "architectures (Kimi-K3, DeepSeek-V4/V4.1, GLM-5-Next, Step5, ...) run uncompiled: no pass fusion. "
    "Unknown architecture: `model_dependent_vllm` where the classes differ",
    (
        "fusion_direct",
        "fusion_direct_gemma",
        "models_direct_callers",
        "models_direct_kimi_k3",
        "models_direct_minimax_m3",
        "models_registry",
        "compile_breakable",
    ),
)
_ARCHITECTURE_DOC_0_34 = (
    "(no knob) the served architecture",
    "as 0.33.0, and: Qwen3.5 on CUDA runs uncompiled and fuses every norm site itself up to the capability's "
    "default size (`fuse_allreduce_rms`, its size, `--enforce-eager` and `-O0` change nothing there); "
    "Mistral Large 4 defers its all-reduces into the next RMSNorm through the same kernel where "
    "`fuse_allreduce_rms` resolves on, sized by the capability default, not the pass's size; MiniMax-M3 "
    "and MuseSpark run kernels of their own for small batches where NVLink multicast is "
    "(`model_private_vllm`, never replaced). The breakable set adds Mistral Large 4 and Kimi-K3.1",
    (
        "fusion_direct",
        "fusion_direct_gemma",
        "models_direct_callers",
        "models_direct_qwen3_5",
        "models_qwen3_5_platform",
        "models_deferring",
        "models_private_minimax_m3",
        "models_private_minimax_m3_gate",
        "models_private_muse_spark",
        "models_private_muse_spark_kernel",
        "models_registry",
        "compile_breakable",
    ),
)
_HISPARSE_DOC = (
    "`--attention-config` with a `hisparse_config`, or a `HiSparseConnector` `--kv-transfer-config`",
    "FlashInfer's backend `auto` resolves to TRT-LLM on one node instead of MNNVL (no fallback); an explicit "
    "`VLLM_FLASHINFER_ALLREDUCE_BACKEND` still wins",
    ("fi_hisparse", "hisparse_config"),
)
_ROW_VECTOR_DOC = (
    "(no knob) the served model's hidden size",
    "the standalone FlashInfer all-reduce declines rows that are not whole 16-byte vectors (bf16: hidden "
    "not a multiple of 8); the chain's next path takes them",
    ("fi_row_vectors",),
)
#: Knob -> what vLLM does with it -> where, per release (docs/launchers.md is generated from these).
KNOB_DOCS: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "0.33.0": (*_KNOB_DOCS_SHARED, _ARCHITECTURE_DOC_0_33),
    "0.34.0": (*_KNOB_DOCS_SHARED, _ARCHITECTURE_DOC_0_34, _HISPARSE_DOC, _ROW_VECTOR_DOC),
}


class ReleaseDocs(NamedTuple):
    """One release's route documentation, as ``plan.knob_docs`` renders a route module's."""

    RELEASE: str
    KNOB_DOCS: tuple[tuple[str, str, tuple[str, ...]], ...]
    CITES: dict[str, Cite]


def release_docs() -> tuple[ReleaseDocs, ...]:
    """The documentation of every modelled release, oldest first."""
    return tuple(
        ReleaseDocs(f"{LAUNCHER} {release}", KNOB_DOCS[release], CITES[release])
        for release in knobs.SUPPORTED[LAUNCHER]
    )


FI_BACKENDS = ("auto", "trtllm", "mnnvl")
NCCL_SYMM = "nccl_symm_vllm"
MODEL_DEPENDENT = marker("model_dependent", LAUNCHER)
MIXED_SITES = marker("mixed_sites", LAUNCHER)
#: Releases whose ``_resolve_fi_ar_backend`` sends ``auto`` to TRT-LLM under a HiSparse config.
HISPARSE_TRTLLM_RELEASES = frozenset({"0.34.0"})
#: Releases whose standalone FlashInfer all-reduce declines a row that is not whole 16-byte vectors
#: (the fusion kernels load rows as float4).
ROW_VECTOR_RELEASES, ROW_VECTOR_BYTES = frozenset({"0.34.0"}), 16
ATTENTION_FLAGS, KV_TRANSFER_FLAGS = ("--attention-config", "-ac"), ("--kv-transfer-config",)
HISPARSE_CONNECTOR = "HiSparseConnector"
#: Custom all-reduce declines world sizes above this (``should_custom_ar``), though it lists TP 16.
_CUSTOM_MAX_WORLD = 8
#: The only node count these routes model (``_node_count``).
_ONE_NODE = 1


def architecture_variants(release: str | None = None) -> tuple[str, ...]:
    """One architecture per routing class of ``release`` (None: the newest): generic compiled,
    uncompiled (breakable), direct, mixed sites, deferring, model-private (``vllm_models``)."""
    return vllm_models.variants(release)


def _env(knobset: Knobs, ctx: Context, name: str) -> str | None:
    if name not in knobs.manifest(LAUNCHER, ctx.release)["env"]:
        raise RouteError(f"{name} is not an all-reduce env var of {release_name(ctx)}")
    return knobset.env.get(name)


def env_bool(knobset: Knobs, ctx: Context, name: str) -> bool:
    value = _env(knobset, ctx, name)
    if value is None:
        return bool(knobs.manifest(LAUNCHER, ctx.release)["env"][name]["default"])
    if not value.strip().lstrip("-").isdigit():
        raise RouteError(
            f"{name}={value!r}: vLLM reads it as bool(int(...)) and would fail to start ({release_name(ctx)})"
        )
    return bool(int(value))


#: JSON config flags whose dotted keys (``-cc.mode=none``) the routes read.
_DOTTED = tuple(
    flag + "." for flag in (*vllm_compile.COMPILATION_FLAGS, *ATTENTION_FLAGS, *KV_TRANSFER_FLAGS)
)


def check_names(knobset: Knobs, ctx: Context) -> None:
    """Every flag and ``VLLM_*`` env var must exist in the routed release (unknown names are rejected)."""
    flags = knobs.manifest(LAUNCHER, ctx.release)["flags"]
    for token in knobset.args:
        name = token.partition("=")[0]
        dotted = name.startswith(_DOTTED)
        known = name in flags or dotted or name == "--no-enforce-eager" or name.startswith("-O")
        if name.startswith("-") and not name.lstrip("-").isdigit() and not known:
            raise RouteError(f"{name} is not an all-reduce flag of {release_name(ctx)}")
    for name in knobset.env:
        if name.startswith("VLLM_"):
            _env(knobset, ctx, name)


def pass_config(knobset: Knobs, release: str | None = None) -> dict[str, Any]:
    """The ``pass_config`` keys the args set (``--compilation-config JSON``; later ones win)."""
    found: dict[str, Any] = {}  # JSON values as the launcher parses them
    args = knobset.args
    for index, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name in vllm_compile.COMPILATION_FLAGS:
            text = value if eq else (args[index + 1] if index + 1 < len(args) else "{}")
            found.update(json.loads(text).get("pass_config", {}))
        elif name.startswith(("--compilation-config.pass_config.", "-cc.pass_config.")):
            key = name.rsplit(".", 1)[1]
            found[key] = json.loads((value if eq else args[index + 1]).lower())
    known = {k.rsplit(".", 1)[1] for k in knobs.manifest(LAUNCHER, release)["config_keys"]}
    unknown = sorted(set(found) - known)
    if unknown:
        raise RouteError(
            f"unknown pass_config key(s) {unknown} for {LAUNCHER} {release or knobs.PINNED[LAUNCHER]}"
        )
    return found


def hisparse(knobset: Knobs) -> bool:
    """Whether the config enables HiSparse: an attention config with a ``hisparse_config``, or a
    ``HiSparseConnector`` kv-transfer connector (directly or inside a ``MultiConnector``)."""
    if vllm_compile.config_arg(knobset, ATTENTION_FLAGS).get("hisparse_config") is not None:
        return True
    transfer = vllm_compile.config_arg(knobset, KV_TRANSFER_FLAGS)
    children = transfer.get("kv_connector_extra_config", {}).get("connectors", [])
    return transfer.get("kv_connector") == HISPARSE_CONNECTOR or (
        transfer.get("kv_connector") == "MultiConnector"
        and any(child.get("kv_connector") == HISPARSE_CONNECTOR for child in children)
    )


def _auto(knobset: Knobs, ctx: Context) -> bool:
    """Whether the backend is left to ``_resolve_fi_ar_backend``'s automatic choice (env unset or auto)."""
    return (_env(knobset, ctx, "VLLM_FLASHINFER_ALLREDUCE_BACKEND") or "auto") == "auto"


def requested_fi_backend(knobset: Knobs, ctx: Context) -> str:
    """``_resolve_fi_ar_backend`` on one node: the env's backend; ``auto`` -> MNNVL (with fallback),
    or, where the release says so, TRT-LLM under HiSparse (no fallback)."""
    backend = _env(knobset, ctx, "VLLM_FLASHINFER_ALLREDUCE_BACKEND") or "auto"
    if backend not in FI_BACKENDS:
        raise RouteError(f"unknown VLLM_FLASHINFER_ALLREDUCE_BACKEND {backend!r} for {release_name(ctx)}")
    if backend != "auto":
        return backend
    return "trtllm" if _hisparse_trtllm(knobset, ctx) else "mnnvl"


def _hisparse_trtllm(knobset: Knobs, ctx: Context) -> bool:
    return release_of(ctx) in HISPARSE_TRTLLM_RELEASES and hisparse(knobset)


def fi_workspace(knobset: Knobs, ctx: Context) -> str | None:
    """The backend of the FlashInfer workspace vLLM ends up with, None when none can be made: MNNVL
    needs NVLink multicast (FlashInfer's own, whatever torch's env says), TRT-LLM peer access; ``auto``
    resolved to MNNVL falls back to TRT-LLM on one node."""
    fallback = _auto(knobset, ctx) and not _hisparse_trtllm(knobset, ctx)
    backend = requested_fi_backend(knobset, ctx)
    if backend == "mnnvl" and not ctx.multicast:
        backend = "trtllm" if fallback else ""
    return backend if backend == "mnnvl" or (backend == "trtllm" and ctx.p2p) else None


def _standalone_limit(knobset: Knobs, ctx: Context) -> int | None:
    """``max_workspace_size``: the tuned MNNVL size where the *requested* backend is MNNVL and the table
    has a row (it stays after a fallback to TRT-LLM), else the capability's fusion-table size."""
    default_mb = capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    if not default_mb:
        return None  # FlashInferAllReduce disables itself for this world size
    major, minor = ctx.capability
    tuned = knobs.table(LAUNCHER, "fi_mnnvl_allreduce_max_size_mb", ctx.release).get(
        f"{major}{minor},{ctx.tp},{_ONE_NODE}"
    )
    if requested_fi_backend(knobset, ctx) == "mnnvl" and tuned is not None:
        return int(tuned * knobs.MiB)
    return int(default_mb * knobs.MiB)


def _standalone_route(knobset: Knobs, ctx: Context) -> Route:
    if not env_bool(knobset, ctx, "VLLM_ALLREDUCE_USE_FLASHINFER"):
        return up_to(None, None)
    if release_of(ctx) in ROW_VECTOR_RELEASES and ctx.row_bytes % ROW_VECTOR_BYTES:
        return up_to(None, None)
    limit, backend = _standalone_limit(knobset, ctx), fi_workspace(knobset, ctx)
    if limit is None or backend is None:
        return up_to(None, None)
    if backend == "mnnvl":
        return up_to(limit + 1, "mnnvl_vllm")  # input_tensor.nbytes > max_workspace_size declines
    heuristic = flashinfer.heuristic_route(
        ctx.tp, ctx.itemsize, fused=False, launcher=LAUNCHER, release=ctx.flashinfer
    )
    return clipped(heuristic, limit + 1)


def symm_enabled(knobset: Knobs, ctx: Context) -> bool:
    """Whether ``SymmMemCommunicator`` comes up: the env, a table row, and a multicast address."""
    if not env_bool(knobset, ctx, "VLLM_ALLREDUCE_USE_SYMM_MEM") or not torch_symm.multicast(
        knobset.env, ctx
    ):
        return False
    return capability_row(ctx, "symm_mem_all_reduce_max_sizes", "dotted") is not None


def _custom_route(knobset: Knobs, ctx: Context) -> Route:
    if "--disable-custom-all-reduce" in knobset.args or not ctx.p2p:
        return up_to(None, None)  # without P2P, CustomAllreduce disables itself
    world_sizes = knobs.table(LAUNCHER, "custom_all_reduce_world_sizes", ctx.release)
    if ctx.tp not in world_sizes or ctx.tp > _CUSTOM_MAX_WORLD:
        return up_to(None, None)
    if not (ctx.tp == 2 or ctx.full_nvlink):
        return up_to(None, None)
    limit = knobs.table(LAUNCHER, "custom_all_reduce_default_max_size", ctx.release)
    if symm_enabled(knobset, ctx):
        table = capability_row(ctx, "custom_all_reduce_max_sizes", "dotted")
        limit = min(limit, int(table)) if table is not None else limit
    return up_to(limit, "vllm_custom")  # inp_size < max_size


def _symm_route(knobset: Knobs, ctx: Context) -> Route:
    if not symm_enabled(knobset, ctx) or ctx.itemsize != 2:
        return up_to(None, None)  # the communicator reduces bf16 only
    limit = int(capability_row(ctx, "symm_mem_all_reduce_max_sizes", "dotted") or 0)
    major, minor = ctx.capability
    multimem_sizes = knobs.table(LAUNCHER, "symm_mem_multimem_world_sizes", ctx.release)
    multimem = ctx.tp in multimem_sizes.get(f"{major}.{minor}", [])
    return up_to(limit + 1, torch_symm.MULTIMEM if multimem else torch_symm.TWOSHOT_MULTICAST)


def _nccl_symm_route(knobset: Knobs, ctx: Context) -> Route:
    """``should_nccl_symm_mem_allreduce``: TP >= 4, sizes <= low or >= high of custom AR's range."""
    config = knobs.table(LAUNCHER, "nccl_symm_mem_all_reduce_config", ctx.release)
    if not env_bool(knobset, ctx, "VLLM_USE_NCCL_SYMM_MEM") or ctx.tp < config["min_world_size"]:
        return up_to(None, None)
    preferred = config["custom_ar_preferred_ranges"].get(str(ctx.tp))
    if preferred is not None:
        low, high = preferred
        return normalised(((low + 1, NCCL_SYMM), (high, None), (None, NCCL_SYMM)))
    return up_to(None, NCCL_SYMM if ctx.tp > config["always_use_above_world_size"] else None)


def _norm_sites(knobset: Knobs, ctx: Context, plain: Route, backend: str | None) -> Route:
    """What the served architecture runs where an all-reduce precedes an RMSNorm (``vllm_models``)."""
    config = pass_config(knobset, ctx.release)
    compiled = vllm_compile.compiles(knobset, ctx)
    through_pass = first_taker(
        (vllm_fusion.pass_route(knobset, ctx, config, backend, compiled=compiled), plain)
    )
    direct = first_taker((vllm_fusion.direct_route(ctx, backend), plain))
    kind = vllm_models.fusing_class(ctx.served_architecture, ctx.release)
    if kind == vllm_models.DIRECT:
        fused = direct
    elif kind == vllm_models.MIXED:
        fused = agreed([{"p": through_pass}, {"p": direct}], MIXED_SITES)["p"]
    elif kind == vllm_models.DEFERRING:
        defers = vllm_fusion.pass_enabled(knobset, ctx, config) and ctx.itemsize == 2  # bf16 only
        fused = direct if defers else plain
    else:
        fused = through_pass
    tokens = vllm_models.private_tokens(ctx)
    if tokens is None:
        return fused
    return first_taker((up_to(tokens * ctx.row_bytes + 1, vllm_models.MODEL_PRIVATE), fused))


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
    return {PLAIN_PATTERN: plain, FUSED_PATTERN: _norm_sites(knobset, ctx, plain, backend)}


def routes(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, the kernel vLLM ``ctx.release`` runs at each message size with ``knobset`` on
    ``ctx``; with the architecture unknown, ``model_dependent_vllm`` where the release's architecture
    variants disagree."""
    release_of(ctx)  # refuses a release with no route model
    check_names(knobset, ctx)
    if env_bool(knobset, ctx, "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC"):
        raise RouteError(
            f"FlashInfer PCIe IPC's size limit is tuned at runtime ({CITES[release_of(ctx)]['pcie_ipc']})"
        )
    if env_bool(knobset, ctx, "VLLM_BATCH_INVARIANT"):
        raise RouteError(
            f"VLLM_BATCH_INVARIANT=1 reroutes every all-reduce ({CITES[release_of(ctx)]['batch_invariant']}): "
            "not modelled"
        )
    if ctx.served_architecture is not None:
        return _routes_for(knobset, ctx)
    variants = [
        _routes_for(knobset, replace(ctx, architecture=a)) for a in architecture_variants(ctx.release)
    ]
    return agreed(variants, MODEL_DEPENDENT)


def model_direct_route(knobset: Knobs, ctx: Context) -> Route:
    """What a model that calls the fused kernel directly runs at its norm sites."""
    return vllm_fusion.direct_route(ctx, fi_workspace(knobset, ctx))
