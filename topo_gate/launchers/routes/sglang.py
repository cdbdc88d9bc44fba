"""SGLang 0.5.23: which kernel serves each all-reduce, given the flags and env a plan sets.

Plain all-reduce, ``GroupCoordinator.all_reduce`` (srt/distributed/parallel_state.py:673-790), tries
in this order: the FlashInfer fusion workspace (only when a fusion backend is set), custom
all-reduce (v2 on full-NVLink groups by default, else the legacy v1 kernel), PCIe IPC, torch
symm-mem, then NCCL. The fused pattern runs FlashInfer's fused kernel for batches of at most
``FUSE_ALLREDUCE_MAX_BATCH_SIZE`` tokens on SM 9.x / 10.x only; larger batches run the plain chain.
"""

from __future__ import annotations

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
    up_to,
)

LAUNCHER = "sglang"
RELEASE = "sglang 0.5.23"


def _cite(path: str, lines: str) -> Cite:
    return Cite(RELEASE, "sglang/" + path, lines)  # path inside the release wheel


CITES = {
    "order": _cite("srt/distributed/parallel_state.py", "749-790"),
    "outplace_order": _cite("srt/distributed/parallel_state.py", "947-993"),
    "workspace_tags": _cite("srt/distributed/bootstrap.py", "251-261"),
    "workspace_admission": _cite("srt/layers/flashinfer_comm_fusion.py", "926-1014"),
    "workspace_call": _cite("srt/layers/flashinfer_comm_fusion.py", "1017-1044"),
    "workspace_size": _cite("srt/model_executor/runner/base_runner.py", "329-333"),
    "fusion_applies": _cite("srt/layers/layer_boundary/residual/add_norm.py", "139-159"),
    "fusion_call": _cite("srt/layers/flashinfer_comm_fusion.py", "833-923"),
    "fusion_backend": _cite("srt/layers/flashinfer_comm_fusion.py", "46-84"),
    "fusion_auto_enable": _cite("srt/arg_groups/overrides.py", "986-1014"),
    "custom_dispatch": _cite("srt/distributed/device_communicators/custom_all_reduce.py", "373-398"),
    "custom_v1": _cite("srt/distributed/device_communicators/custom_all_reduce.py", "41-42,260-283"),
    "custom_v2_admission": _cite("srt/distributed/device_communicators/custom_all_reduce_v2.py", "582-597"),
    "custom_v2_size": _cite("srt/distributed/device_communicators/custom_all_reduce_v2.py", "73-75,146-182"),
    "pcie_ipc_group": _cite("srt/distributed/device_communicators/pcie_ipc_ar.py", "98-114,198-245"),
    "pcie_ipc_size": _cite("srt/distributed/device_communicators/pcie_ipc_ar.py", "247-305,387-404"),
    "symm_admission": _cite("srt/distributed/device_communicators/torch_symm_mem.py", "76-124"),
    "symm_size": _cite("srt/distributed/device_communicators/torch_symm_mem.py", "97-109,126-149"),
    "symm_kernel": _cite("srt/distributed/device_communicators/torch_symm_mem.py", "151-184"),
    "nccl_env": _cite("srt/entrypoints/engine.py", "1908-1915"),
}

#: Knob -> what SGLang does with it -> where (docs/launchers.md is generated from these).
KNOB_DOCS = (
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
        "no fusion and no workspace; beats the per-model auto-enable (listed architectures, SM90/SM100)",
        ("fusion_auto_enable",),
    ),
    (
        "`--disable-custom-all-reduce`",
        "no custom all-reduce (neither v2 nor the legacy kernel)",
        ("custom_dispatch",),
    ),
    (
        "`SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2` (default 1)",
        "1: the JIT v2 kernel on full-NVLink groups (up to `SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB`, "
        "default {v2_kb} KiB); 0, or a group without full NVLink: the legacy kernel (`vllm_custom`), "
        "TP 2 or full NVLink only, messages <= {v1_max}",
        ("custom_dispatch", "custom_v2_admission", "custom_v2_size", "custom_v1"),
    ),
    (
        "`SGLANG_ENABLE_PCIE_IPC_ALLREDUCE`, `SGLANG_PCIE_IPC_MAX_NUMEL`",
        "FlashInfer PCIe IPC on the `tp` group (TP {pcie_tps}, bf16) for messages of at most MAX_NUMEL "
        "elements (0: the decode width x hidden, known only at runtime); after custom all-reduce",
        ("pcie_ipc_group", "pcie_ipc_size", "outplace_order"),
    ),
    (
        "`--enable-torch-symm-mem`",
        "torch symmetric memory, only where the node offers NVLink multicast: multimem at TP "
        "{multimem_tps} (SM 9/10), else two-shot (copy in, in-place `two_shot_all_reduce_`, copy out); "
        "messages < max(table, 256 MiB, 512 MiB) under the default `SGLANG_OPT_USE_INKLING_CUSTOM_AR=1` / "
        "`..._FUSED_AR_SCONV=1`, < the capability table (64-128 MiB) with `SGLANG_OPT_USE_INKLING_CUSTOM_AR=0`",
        ("symm_admission", "symm_size", "symm_kernel"),
    ),
    (
        "`NCCL_NVLS_ENABLE`",
        "SGLang sets it to 0 unless `--enable-nccl-nvls` / `--enable-symm-mem`: its NCCL matches the baseline",
        ("nccl_env",),
    ),
)

FUSION_BACKENDS = ("auto", "trtllm", "mnnvl", "cutedsl")
#: Capability majors SGLang fuses on (``_is_sm90_supported or _is_sm100_supported``, add_norm.py:53-54).
FUSION_MAJORS = (9, 10)
#: The default v2 custom all-reduce's memory cap (``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB``); its
#: tuned per-arch config may route less, never more.
_V2_MAX_KB_ENV = "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB"
#: torch symm-mem raises its limit to these under the default env (torch_symm_mem.py:95-108).
SYMM_INKLING_MAX = 256 * knobs.MiB
SYMM_SCONV_MAX = 512 * knobs.MiB


def env_flag(knobset: Knobs, name: str) -> bool:
    """An ``EnvBool`` as SGLang reads it, defaulting to the manifest's default."""
    default = knobs.manifest(LAUNCHER)["env"][name]["default"]
    value = knobset.env.get(name)
    if value is None:
        return bool(default)
    return value.strip().lower() in ("1", "true", "yes", "on")


def _flag_value(args: tuple[str, ...], flag: str) -> str | None:
    for index, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name == flag:
            return value if eq else (args[index + 1] if index + 1 < len(args) else "")
    return None


def check_names(knobset: Knobs) -> None:
    """Every flag and env var must exist in the pinned release (unknown names are rejected)."""
    manifest = knobs.manifest(LAUNCHER)
    for token in knobset.args:
        if token.startswith("--") and token.partition("=")[0] not in manifest["flags"]:
            raise RouteError(f"{token.partition('=')[0]} is not an all-reduce flag of SGLang {RELEASE}")
    for name in knobset.env:
        if name.startswith("SGLANG_") and name not in manifest["env"]:
            raise RouteError(f"{name} is not an all-reduce env var of {RELEASE}")


def fusion_backend(knobset: Knobs, ctx: Context) -> str | None:
    """The resolved FlashInfer fusion workspace backend, or None when fusion is off."""
    if "--enforce-disable-flashinfer-allreduce-fusion" in knobset.args:
        return None
    backend = _flag_value(knobset.args, "--flashinfer-allreduce-fusion-backend")
    if backend is None:
        # Without the flag SGLang auto-enables only for listed architectures (overrides.py:986-1001);
        # topo-gate's model presets do not carry the architecture, so the default is modelled as off.
        return None
    if backend not in FUSION_BACKENDS:
        raise RouteError(f"unknown fusion backend {backend!r} (SGLang takes {', '.join(FUSION_BACKENDS)})")
    if ctx.capability[0] not in FUSION_MAJORS:
        raise RouteError(
            f"SGLang refuses FlashInfer all-reduce fusion on SM {ctx.capability[0]}.x "
            f"({CITES['fusion_backend']}): the flag must not be emitted here"
        )
    if not ctx.p2p:
        return None  # the IPC workspace cannot be created; SGLang marks FlashInfer unavailable
    if backend == "auto":
        return "mnnvl" if ctx.capability[0] == 10 else "trtllm"
    return backend


def _workspace_route(backend: str | None, ctx: Context, *, fused: bool) -> Route:
    """What the FlashInfer workspace runs: up to 2048 tokens of the served model's hidden size."""
    if backend is None or backend == "cutedsl":
        return up_to(None, None)
    tokens = knobs.table(LAUNCHER, "fuse_allreduce_max_batch_size")
    limit = tokens * ctx.row_bytes + 1  # batch_size <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
    if backend == "mnnvl":
        return up_to(limit, "mnnvl_fused_sglang" if fused else "mnnvl_sglang")
    return clipped(flashinfer.heuristic_route(ctx.tp, ctx.itemsize, fused=fused, launcher=LAUNCHER), limit)


def _custom_route(knobset: Knobs, ctx: Context) -> Route:
    if "--disable-custom-all-reduce" in knobset.args or not ctx.p2p:
        return up_to(None, None)  # without P2P, can_use_custom_all_reduce_with_nvlink declines
    if ctx.tp not in knobs.table(LAUNCHER, "custom_ar_v1_world_sizes"):
        return up_to(None, None)
    if env_flag(knobset, "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2") and ctx.full_nvlink:
        kb = int(
            knobset.env.get(_V2_MAX_KB_ENV) or knobs.manifest(LAUNCHER)["env"][_V2_MAX_KB_ENV]["default"]
        )
        return up_to(kb * 1024 + 1, "custom_v2_sglang")
    if ctx.tp == 2 or ctx.full_nvlink:
        return up_to(knobs.table(LAUNCHER, "custom_ar_v1_max_size") + 1, "vllm_custom")
    return up_to(None, None)  # more than two PCIe GPUs: v1 disables itself


def _pcie_ipc_route(knobset: Knobs, ctx: Context) -> Route:
    if not env_flag(knobset, "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"):
        return up_to(None, None)
    if ctx.tp not in knobs.table(LAUNCHER, "pcie_ipc_world_sizes") or ctx.itemsize != 2 or not ctx.p2p:
        return up_to(None, None)
    numel = int(knobset.env.get("SGLANG_PCIE_IPC_MAX_NUMEL") or 0)
    if numel <= 0:
        raise RouteError(
            "PCIe IPC without SGLANG_PCIE_IPC_MAX_NUMEL is sized from the server's decode width at "
            f"runtime ({CITES['pcie_ipc_size']}): its range cannot be checked"
        )
    return up_to(numel * ctx.itemsize + 1, "pcie_ipc")


def symm_mem_limit(knobset: Knobs, ctx: Context) -> int | None:
    """torch symm-mem's effective byte limit (``inp_size < max_size``), None when it is disabled."""
    rows = knobs.table(LAUNCHER, "torch_symm_mem_max_sizes").get(str(ctx.capability[0]))
    if not ctx.multicast or rows is None or str(ctx.tp) not in rows or ctx.itemsize != 2:
        return None
    limit = int(rows[str(ctx.tp)])
    if env_flag(knobset, "SGLANG_OPT_USE_INKLING_CUSTOM_AR"):
        limit = max(limit, SYMM_INKLING_MAX)
        if env_flag(knobset, "SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV"):
            limit = max(limit, SYMM_SCONV_MAX)
    return limit


def _symm_route(knobset: Knobs, ctx: Context) -> Route:
    if "--enable-torch-symm-mem" not in knobset.args:
        return up_to(None, None)
    limit = symm_mem_limit(knobset, ctx)
    if limit is None:
        return up_to(None, None)
    multimem = ctx.tp in knobs.table(LAUNCHER, "torch_symm_mem_multimem_world_sizes").get(
        str(ctx.capability[0]), []
    )
    return up_to(limit, "symm_mem_multimem" if multimem else "symm_mem_twoshot_vllm")


def routes(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, the kernel SGLang runs at each message size with ``knobset`` on ``ctx``."""
    check_names(knobset)
    if "--enable-symm-mem" in knobset.args:
        raise RouteError("--enable-symm-mem (NCCL symmetric memory) is not modelled or measured")
    backend = fusion_backend(knobset, ctx)
    plain = first_taker(
        (
            _workspace_route(backend, ctx, fused=False),
            _custom_route(knobset, ctx),
            _pcie_ipc_route(knobset, ctx),
            _symm_route(knobset, ctx),
        )
    )
    fused = first_taker((_workspace_route(backend, ctx, fused=True), plain))
    return {"allreduce": plain, "allreduce_rmsnorm": fused}
