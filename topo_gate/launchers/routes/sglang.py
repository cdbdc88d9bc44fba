"""SGLang 0.5.23: which kernel serves each all-reduce, given the flags, env and served architecture.

Plain all-reduce, ``GroupCoordinator.all_reduce`` (srt/distributed/parallel_state.py:673-780), tries
in this order: the FlashInfer fusion workspace (only when a fusion backend is set: by the user, or by
SGLang itself for the architectures it lists, ``sglang_fusion``), custom all-reduce (the JIT v2 on
full-NVLink groups by default, ``sglang_custom_v2``, else the legacy v1 kernel), PCIe IPC, torch
symm-mem, then NCCL. The fused pattern runs FlashInfer's fused kernel for batches of at most
``FUSE_ALLREDUCE_MAX_BATCH_SIZE`` tokens; larger batches, and every batch of a model without fusion,
run the plain chain, then SGLang's add + RMSNorm kernel (layernorm.py's fallback after the kernel
declines). A fused v2 + norm exists only in the push-plane fusion of a few architectures (MiniMax-M3;
Kimi-K3 and DeepSeek-V4 bring collectives of their own): these routes name those
``model_collectives_sglang`` rather than resolve them.
"""

from __future__ import annotations

from dataclasses import replace

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import flashinfer, sglang_custom_v2, sglang_fusion, torch_symm
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
    up_to,
)
from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN

LAUNCHER = "sglang"
RELEASE = "sglang 0.5.23"


def _cite(path: str, lines: str) -> Cite:
    return Cite(RELEASE, "sglang/" + path, lines)  # path inside the release wheel


_COMM = "srt/distributed/device_communicators/"
CITES = {
    "order": _cite("srt/distributed/parallel_state.py", "749-780"),
    "outplace_order": _cite("srt/distributed/parallel_state.py", "949-993"),
    "workspace_tags": _cite("srt/distributed/bootstrap.py", "251-261"),
    "workspace_admission": _cite("srt/layers/flashinfer_comm_fusion.py", "926-1014"),
    "workspace_call": _cite("srt/layers/flashinfer_comm_fusion.py", "1017-1044"),
    "workspace_size": _cite("srt/model_executor/runner/base_runner.py", "329-333"),
    "fusion_applies": _cite("srt/layers/layer_boundary/residual/add_norm.py", "139-158"),
    "fusion_call": _cite("srt/layers/flashinfer_comm_fusion.py", "833-923"),
    "custom_v1": _cite(_COMM + "custom_all_reduce.py", "40-42,260-283"),
    "pcie_ipc_group": _cite(_COMM + "pcie_ipc_ar.py", "98-114,198-245"),
    "pcie_ipc_size": _cite(_COMM + "pcie_ipc_ar.py", "247-305,387-404"),
    "symm_admission": _cite(_COMM + "torch_symm_mem.py", "76-124"),
    "symm_size": _cite(_COMM + "torch_symm_mem.py", "97-109,126-149"),
    "symm_kernel": _cite(_COMM + "torch_symm_mem.py", "151-184"),
    "env_parse": _cite("srt/environ.py", "67-87,143-158"),
    "nccl_env": _cite("srt/entrypoints/engine.py", "1908-1915"),
    "own_minimax_m3": _cite("srt/models/minimax_m3.py", "1672-1684,1760-1773"),
    "own_kimi_k3": _cite("srt/models/kimi_k3.py", "376-381"),
    "own_deepseek_v4": _cite("srt/models/deepseek_v4.py", "5095-5102"),
    **{f"v2_{key}": cite for key, cite in sglang_custom_v2.CITES.items()},
    **{f"fusion_{key}": cite for key, cite in sglang_fusion.CITES.items()},
    **{f"torch_{key}": cite for key, cite in torch_symm.CITES.items()},
}

#: Knob -> what SGLang does with it -> where (docs/launchers.md is generated from these).
KNOB_DOCS = (
    (
        "(no knob) the served architecture",
        "fusion is switched on (`auto`) for {fusion_arch_count} listed architectures (DeepseekV3ForCausalLM, "
        "Qwen3MoeForCausalLM, GptOssForCausalLM, ...) on SM 9.x/10.x, TP > 1, one node, no attention DP, no MoE "
        "all-to-all backend; MiMo gets `cutedsl` on SM 10.x; DeepSeek-V4.1 (hidden 5120) at TP 4 on Blackwell "
        "does not. Unknown architecture: the sizes where these differ are `model_dependent_sglang`",
        ("fusion_auto_enable", "fusion_v41", "fusion_platform", "fusion_cutedsl_workspace"),
    ),
    (
        "`--flashinfer-allreduce-fusion-backend trtllm`",
        "fuses AR + residual + RMSNorm for batches of 1-{fusion_tokens} tokens (one/two-shot: FlashInfer's "
        "heuristic) on SM 9.x/10.x only -- on SM 12.x SGLang raises when it pre-allocates the workspace; the "
        "same workspace then serves every plain TP all-reduce up to {fusion_tokens} tokens of the served "
        "model, ahead of custom all-reduce and PCIe IPC",
        (
            "fusion_applies",
            "fusion_backend",
            "workspace_tags",
            "workspace_size",
            "workspace_admission",
            "order",
        ),
    ),
    (
        "`--enforce-disable-flashinfer-allreduce-fusion`",
        "no fusion and no workspace; beats the per-architecture auto-enable",
        ("fusion_enforce_disable",),
    ),
    (
        "`--disable-custom-all-reduce`",
        "no custom all-reduce (neither v2 nor the legacy kernel)",
        ("v2_dispatch",),
    ),
    (
        "`SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2` (default 1)",
        "1: the JIT v2 kernel on full-NVLink groups of its table's world sizes (SM 9.x: {v2_sm90_tps}), "
        "messages up to the tuned table clipped to `SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB` (default "
        "{v2_kb} KiB); where multicast exists (NVSwitch, TP >= 4, no `TORCH_SYMM_MEM_DISABLE_MULTICAST=1`) its "
        "multicast two-shot pull (`custom_v2_multicast_sglang`, not timed) takes the table's multicast range. "
        "0, or a group without full NVLink: the legacy kernel (`vllm_custom`), TP {v1_tps}, TP 2 or full NVLink, "
        "messages <= {v1_max}",
        (
            "v2_dispatch",
            "v2_admission",
            "v2_world_sizes",
            "v2_sizing",
            "v2_pick",
            "v2_multicast",
            "custom_v1",
        ),
    ),
    (
        "`SGLANG_ENABLE_PCIE_IPC_ALLREDUCE`, `SGLANG_PCIE_IPC_MAX_NUMEL`",
        "FlashInfer PCIe IPC on the `tp` group (TP {pcie_tps}, bf16) for messages of at most MAX_NUMEL "
        "elements (0: the decode width x hidden, known only at runtime); after custom all-reduce",
        ("pcie_ipc_group", "pcie_ipc_size", "outplace_order"),
    ),
    (
        "`--enable-torch-symm-mem`",
        "torch symmetric memory, only where torch creates NVLink multicast (NVSwitch, and not "
        "`TORCH_SYMM_MEM_DISABLE_MULTICAST=1`): multimem at TP {multimem_tps} (SM 9/10), else two-shot "
        "(`symm_mem_twoshot_multicast_vllm`: copy in, in-place `two_shot_all_reduce_`, copy out, in a process "
        "with multicast objects, never timed); messages < max(table, 256 MiB, 512 MiB) under the default "
        "`SGLANG_OPT_USE_INKLING_CUSTOM_AR=1` / `..._FUSED_AR_SCONV=1`, < the capability table (64-128 MiB) "
        "with `SGLANG_OPT_USE_INKLING_CUSTOM_AR=0`",
        ("symm_admission", "symm_size", "symm_kernel", "torch_multicast_env", "torch_check_env"),
    ),
    (
        "`TORCH_SYMM_MEM_DISABLE_MULTICAST=1` (torch's, not SGLang's)",
        "torch symm-mem off (SGLang's communicator declines without a multicast address); custom all-reduce "
        "v2 without its multicast two-shot pull",
        ("symm_admission", "v2_multicast", "torch_multicast_env"),
    ),
    (
        "`NCCL_NVLS_ENABLE`",
        "SGLang sets it to 0 unless `--enable-nccl-nvls` / `--enable-symm-mem`: its NCCL matches the baseline",
        ("nccl_env",),
    ),
)

#: torch symm-mem raises its limit to these under the default env (torch_symm_mem.py:98-109).
SYMM_INKLING_MAX = 256 * knobs.MiB
SYMM_SCONV_MAX = 512 * knobs.MiB
#: EnvBool's spellings (environ.py:143-150); any other value is ignored and the default used.
_TRUE, _FALSE = ("true", "1", "yes", "y"), ("false", "0", "no", "n")

#: Capability majors of ``device_sm >= 90`` (MiniMax-M3's push-plane fusion gate).
SM90_AND_LATER = (9, 10, 11, 12)
#: Architectures that run collectives of their own, on these capability majors, which SGLang's
#: route model does not resolve: MiniMax-M3's push-plane all-reduce + norm, Kimi-K3's fused attention
#: all-reduce (it falls back to the plain path where it finds no multicast buffer, decided at
#: runtime), DeepSeek-V4's fused collectives on Blackwell. Both patterns are
#: ``model_collectives_sglang`` at every size there: a plan leaves them alone.
OWN_COLLECTIVES = {
    "MiniMaxM3SparseForCausalLM": SM90_AND_LATER,
    "KimiK3ForConditionalGeneration": SM90_AND_LATER,
    "KimiK3LinearForCausalLM": SM90_AND_LATER,
    sglang_fusion.DEEPSEEK_V4: sglang_fusion.BLACKWELL_FAMILY,
}
MODEL_COLLECTIVES = marker("model_collectives", LAUNCHER)
MODEL_DEPENDENT = marker("model_dependent", LAUNCHER)
#: An architecture SGLang neither lists for fusion nor treats specially (the generic variant).
GENERIC_ARCHITECTURE = "LlamaForCausalLM"


def architecture_variants() -> tuple[str, ...]:
    """One architecture per class these routes price apart: generic, fusion-listed, MiMo (CuTe DSL on
    SM 10.x). An unknown architecture is taken to be one of these: the architectures with collectives
    of their own (``OWN_COLLECTIVES``) route as ``model_collectives_sglang`` only when named.
    (DeepSeek-V4.1 routes as DeepSeek-V4: listed on Hopper, its own collectives on Blackwell.)"""
    listed = sorted(sglang_fusion.listed_architectures())
    return (
        GENERIC_ARCHITECTURE,
        "DeepseekV3ForCausalLM" if "DeepseekV3ForCausalLM" in listed else listed[0],
        sorted(sglang_fusion.cutedsl_architectures())[0],
    )


def env_flag(knobset: Knobs, name: str) -> bool:
    """An ``EnvBool`` as SGLang reads it, defaulting to the manifest's default."""
    value = knobset.env.get(name)
    if value is not None and value.lower() in _TRUE:
        return True
    if value is not None and value.lower() in _FALSE:
        return False
    return bool(knobs.manifest(LAUNCHER)["env"][name]["default"])


def check_names(knobset: Knobs) -> None:
    """Every flag and env var must exist in the pinned release (unknown names are rejected)."""
    manifest = knobs.manifest(LAUNCHER)
    for token in knobset.args:
        if token.startswith("--") and token.partition("=")[0] not in manifest["flags"]:
            raise RouteError(f"{token.partition('=')[0]} is not an all-reduce flag of SGLang {RELEASE}")
    for name in knobset.env:
        if name.startswith("SGLANG_") and name not in manifest["env"]:
            raise RouteError(f"{name} is not an all-reduce env var of {RELEASE}")


def _workspace_route(backend: str | None, ctx: Context, *, fused: bool) -> Route:
    """What the FlashInfer workspace runs: up to 2048 tokens of the served model's hidden size."""
    if backend is None:
        return up_to(None, None)
    tokens = knobs.table(LAUNCHER, "fuse_allreduce_max_batch_size")
    limit = tokens * ctx.row_bytes + 1  # batch_size <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
    if backend == "mnnvl":
        return up_to(limit, "mnnvl_fused_sglang" if fused else "mnnvl_sglang")
    return clipped(flashinfer.heuristic_route(ctx.tp, ctx.itemsize, fused=fused, launcher=LAUNCHER), limit)


def _custom_route(knobset: Knobs, ctx: Context) -> Route:
    if "--disable-custom-all-reduce" in knobset.args or not ctx.p2p:
        return up_to(None, None)  # without P2P, can_use_custom_all_reduce_with_nvlink declines
    v2_on = env_flag(knobset, "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2")
    if sglang_custom_v2.admitted(knobset, ctx, enabled=v2_on):
        return sglang_custom_v2.route(knobset, ctx, multicast=torch_symm.multicast(knobset.env, ctx))
    if ctx.tp not in knobs.table(LAUNCHER, "custom_ar_v1_world_sizes"):
        return up_to(None, None)
    if ctx.tp == 2 or ctx.full_nvlink:
        return up_to(knobs.table(LAUNCHER, "custom_ar_v1_max_size") + 1, "vllm_custom")
    return up_to(None, None)  # more than two PCIe GPUs: v1 disables itself


def _pcie_ipc_route(knobset: Knobs, ctx: Context) -> Route:
    if not env_flag(knobset, "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"):
        return up_to(None, None)
    if ctx.tp not in knobs.table(LAUNCHER, "pcie_ipc_world_sizes") or ctx.itemsize != 2 or not ctx.p2p:
        return up_to(None, None)
    try:
        numel = int(knobset.env.get("SGLANG_PCIE_IPC_MAX_NUMEL") or 0)
    except ValueError:
        numel = 0  # EnvInt: an invalid value reads as the default, 0
    if numel <= 0:
        raise RouteError(
            "PCIe IPC without SGLANG_PCIE_IPC_MAX_NUMEL is sized from the server's decode width at "
            f"runtime ({CITES['pcie_ipc_size']}): its range cannot be checked"
        )
    return up_to(numel * ctx.itemsize + 1, "pcie_ipc")


def symm_mem_limit(knobset: Knobs, ctx: Context) -> int | None:
    """torch symm-mem's byte limit (``inp_size < max_size``), None when the communicator is disabled."""
    rows = knobs.table(LAUNCHER, "torch_symm_mem_max_sizes").get(str(ctx.capability[0]))
    if not torch_symm.multicast(knobset.env, ctx) or rows is None or str(ctx.tp) not in rows:
        return None  # no table row, or no multicast address: the communicator stays disabled
    limit = int(rows[str(ctx.tp)])
    if env_flag(knobset, "SGLANG_OPT_USE_INKLING_CUSTOM_AR"):
        limit = max(limit, SYMM_INKLING_MAX)
        if env_flag(knobset, "SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV"):
            limit = max(limit, SYMM_SCONV_MAX)
    return limit


def _symm_route(knobset: Knobs, ctx: Context) -> Route:
    if "--enable-torch-symm-mem" not in knobset.args or ctx.itemsize != 2:
        return up_to(None, None)  # the communicator reduces bf16 only
    limit = symm_mem_limit(knobset, ctx)
    if limit is None:
        return up_to(None, None)
    multimem = ctx.tp in knobs.table(LAUNCHER, "torch_symm_mem_multimem_world_sizes").get(
        str(ctx.capability[0]), []
    )
    return up_to(limit, torch_symm.MULTIMEM if multimem else torch_symm.TWOSHOT_MULTICAST)


def _own_collectives(ctx: Context, architecture: str) -> bool:
    loaded = sglang_fusion.DEEPSEEK_V4 if architecture == sglang_fusion.DEEPSEEK_V41 else architecture
    return ctx.tp > 1 and ctx.capability[0] in OWN_COLLECTIVES.get(loaded, ())


def _routes_for(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    architecture = ctx.served_architecture
    assert architecture is not None
    if _own_collectives(ctx, architecture):
        return {
            PLAIN_PATTERN: up_to(None, MODEL_COLLECTIVES),
            FUSED_PATTERN: up_to(None, MODEL_COLLECTIVES),
        }
    backend = sglang_fusion.resolved(knobset, ctx)
    workspace = None if backend == "cutedsl" else backend  # CuTe DSL has no workspace for plain calls
    plain = first_taker(
        (
            _workspace_route(workspace, ctx, fused=False),
            _custom_route(knobset, ctx),
            _pcie_ipc_route(knobset, ctx),
            _symm_route(knobset, ctx),
        )
    )
    if backend == "cutedsl":
        return {PLAIN_PATTERN: plain, FUSED_PATTERN: up_to(None, sglang_fusion.CUTEDSL_FUSED)}
    fused = first_taker((_workspace_route(workspace, ctx, fused=True), plain))
    return {PLAIN_PATTERN: plain, FUSED_PATTERN: fused}


def routes(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, the kernel SGLang runs at each message size with ``knobset`` on ``ctx``; with the
    architecture unknown, ``model_dependent_sglang`` where the architecture variants disagree."""
    check_names(knobset)
    if "--enable-symm-mem" in knobset.args:
        raise RouteError("--enable-symm-mem (NCCL symmetric memory) is not modelled or measured")
    sglang_fusion.check_topology_flags(knobset)
    if ctx.served_architecture is not None:
        return _routes_for(knobset, ctx)
    variants = [_routes_for(knobset, replace(ctx, architecture=a)) for a in architecture_variants()]
    return agreed(variants, MODEL_DEPENDENT)
