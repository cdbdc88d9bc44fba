"""vLLM 0.33.0's fused all-reduce + RMSNorm: the compilation pass, when it runs, and the models that
call the fused kernel themselves.

``fuse_allreduce_rms`` defaults on at ``-O2``/``-O3`` for TP > 1 on SM 9.0 and the SM 10.x family
(``enable_allreduce_rms_fusion``), off at ``-O0``/``-O1``; the pass runs only when vLLM compiles
(compilation mode VLLM_COMPILE: not with ``--enforce-eager``, ``-O0`` or ``TORCH_COMPILE_DISABLE=1``)
and fuses batches up to ``fi_allreduce_fusion_max_size_mb`` (default: the capability table) //
(hidden x dtype) tokens of the served model. Some model implementations call the fused kernel
directly up to the capability's *default* size, whatever the pass and its size say.
"""

from __future__ import annotations

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite, Context, Knobs, Route, RouteError, clipped, split_at, up_to

LAUNCHER = "vllm"
RELEASE = "vllm 0.33.0"


def _cite(path: str, lines: str) -> Cite:
    return Cite(RELEASE, "vllm/" + path, lines)


CITES = {
    "tables": _cite("compilation/passes/fusion/allreduce_rms_fusion.py", "102-153"),
    "oneshot_choice": _cite("compilation/passes/fusion/allreduce_rms_fusion.py", "158-176,243-248"),
    "call": _cite("compilation/passes/fusion/allreduce_rms_fusion.py", "188-294"),
    "pass": _cite("compilation/passes/fusion/allreduce_rms_fusion.py", "984-1066,1128-1132"),
    "range": _cite("config/vllm.py", "2658-2694"),
    "limit": _cite("config/compilation.py", "182-208"),
    "default": _cite("config/vllm.py", "179-203,256-323"),
    "compile_mode": _cite("config/vllm.py", "1766-1768,1786-1791,1827-1831"),
    "opt_flag": _cite("utils/argparse_utils.py", "395-406"),
    "direct": _cite("models/common/ops/fused_allreduce_rms_norm.py", "23-63"),
    "direct_gemma": _cite("model_executor/layers/fused_allreduce_gemma_rms_norm.py", "56-112,139-170"),
    "direct_callers": _cite("models/deepseek_v32/nvidia/model.py", "122-166,318-321"),
    "direct_kimi_k3": _cite("models/kimi_k3/nvidia/latent_moe_runner.py", "385-420"),
    "direct_minimax_m3": _cite("models/minimax_m3/nvidia/model.py", "764-790"),
    "registry": _cite("model_executor/models/registry.py", "95-98,126,169-172,488-491,523-526"),
}

#: World sizes the fusion pass supports (``FI_SUPPORTED_WORLD_SIZES``).
FI_WORLD_SIZES = (2, 4, 8, 16)
#: The optimization level vLLM runs at without ``-O`` (``VllmConfig.optimization_level``), and the
#: first level whose pass defaults switch ``fuse_allreduce_rms`` on (``OPTIMIZATION_LEVEL_02``).
DEFAULT_LEVEL, FUSION_LEVEL = 2, 2
#: ``enable_allreduce_rms_fusion``'s hardware: ``is_device_capability(90)`` or the SM 10.x family.
FUSION_CAPABILITY, FUSION_FAMILY_MAJOR = (9, 0), 10
_LEVELS = ("0", "1", "2", "3")
#: Model implementations that call FlashInfer's fused all-reduce + RMSNorm directly at their norm
#: sites (the NVIDIA paths), by registry architecture: DeepSeek-V3.2 (and GLM-5.2's DSA model, the
#: same module) and MiniMax-M3. Kimi-K3 does it only for its latent-MoE output; its other norm sites
#: go through the pass (``MIXED_SITES_ARCHITECTURES``).
DIRECT_ARCHITECTURES = frozenset(
    {
        "DeepseekV32ForCausalLM",
        "GlmMoeDsaForCausalLM",
        "MiniMaxM3SparseForCausalLM",
        "MiniMaxM3SparseForConditionalGeneration",
    }
)
MIXED_SITES_ARCHITECTURES = frozenset({"KimiK3ForConditionalGeneration"})


def capability_row(ctx: Context, table: str, key: str) -> float | None:
    """The TP entry of a capability-keyed table (``"int"``: 90, ``"dotted"``: "9.0"), None if absent."""
    major, minor = ctx.capability
    spelled = {"int": f"{major}{minor}", "dotted": f"{major}.{minor}"}[key]
    value = knobs.table(LAUNCHER, table).get(spelled, {}).get(str(ctx.tp))
    return None if value is None else float(value)


def optimization_level(args: tuple[str, ...]) -> int:
    """``--optimization-level N`` / ``-O N`` / ``-ON`` / ``-O=N`` as vLLM's parser reads them (last wins)."""
    level = str(DEFAULT_LEVEL)
    for index, token in enumerate(args):
        following = args[index + 1] if index + 1 < len(args) else ""
        name, eq, value = token.partition("=")
        if name == "--optimization-level":
            level = value if eq else following
        elif token == "-O" and following in _LEVELS:
            level = following
        elif token.startswith("-O") and token != "-O":
            level = token[3:] if token[2] == "=" else token[2:]
    if level not in _LEVELS:
        raise RouteError(f"optimization level {level!r}: vLLM takes 0-3")
    return int(level)


def compiles(knobset: Knobs) -> bool:
    """Whether vLLM compiles the model (mode VLLM_COMPILE): where the fusion pass runs."""
    eager = "--enforce-eager" in knobset.args and "--no-enforce-eager" not in knobset.args
    disabled = knobset.env.get("TORCH_COMPILE_DISABLE") == "1"
    return optimization_level(knobset.args) > 0 and not eager and not disabled


def default_on(knobset: Knobs, ctx: Context) -> bool:
    """``fuse_allreduce_rms``'s default: TP > 1 on SM 9.0 or the SM 10.x family, at ``-O2`` and above."""
    hardware = ctx.tp > 1 and (
        ctx.capability == FUSION_CAPABILITY or ctx.capability[0] == FUSION_FAMILY_MAJOR
    )
    return hardware and optimization_level(knobset.args) >= FUSION_LEVEL


def fused_kernel_route(ctx: Context, backend: str, limit_bytes: int) -> Route:
    """The fused kernel vLLM runs below ``limit_bytes`` (TRT-LLM: one-shot by its capability table;
    MNNVL: FlashInfer's own strategy)."""
    if backend == "mnnvl":
        return up_to(limit_bytes, "mnnvl_fused_vllm")
    oneshot_mb = capability_row(ctx, "fi_allreduce_one_shot_max_size_mb", "int")
    if oneshot_mb is None:  # no entry: _select_flashinfer_allreduce_use_oneshot forces one-shot
        return up_to(limit_bytes, "trtllm_fused_oneshot_vllm")
    split = split_at(
        int(oneshot_mb * knobs.MiB) + 1, "trtllm_fused_oneshot_vllm", "trtllm_fused_twoshot_vllm"
    )
    return clipped(split, limit_bytes)


def _token_limit(ctx: Context, max_mb: float) -> int:
    """One past the largest whole-token message of at most ``max_mb`` MiB (the compile range's end)."""
    return int(max_mb * knobs.MiB) // ctx.row_bytes * ctx.row_bytes + 1


def pass_route(knobset: Knobs, ctx: Context, config: dict[str, object], backend: str | None) -> Route:
    """What the compilation pass fuses (NCCL where it does not: the plain chain then runs + norm)."""
    enabled = config.get("fuse_allreduce_rms", default_on(knobset, ctx))
    if not enabled or not compiles(knobset) or ctx.tp not in FI_WORLD_SIZES or backend is None:
        return up_to(None, None)
    max_mb = config.get("fi_allreduce_fusion_max_size_mb")
    if max_mb is None:
        max_mb = capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    if not max_mb:
        return up_to(None, None)
    assert isinstance(max_mb, (int, float))
    return fused_kernel_route(ctx, backend, _token_limit(ctx, max_mb))


def direct_route(ctx: Context, backend: str | None) -> Route:
    """What a model that calls the fused kernel directly runs: up to the capability's *default* fusion
    size, whatever ``fuse_allreduce_rms``, its size and the compilation mode say."""
    max_mb = capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    if not max_mb or backend is None or ctx.tp == 1:
        return up_to(None, None)
    return fused_kernel_route(ctx, backend, _token_limit(ctx, max_mb))
