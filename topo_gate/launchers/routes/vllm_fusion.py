"""vLLM's fused all-reduce + RMSNorm through its compilation pass, and the fused kernel a model calls
itself (0.33.0 and 0.34.0 alike: the pass, its tables and the kernel wrappers did not change).

``fuse_allreduce_rms`` defaults on at ``-O2``/``-O3`` for TP > 1 on SM 9.0 and the SM 10.x family
(``enable_allreduce_rms_fusion``), off at ``-O0``/``-O1``; the pass runs only where vLLM compiles the
model (``vllm_compile``) and fuses batches up to ``fi_allreduce_fusion_max_size_mb`` (default: the
capability table) // (hidden x dtype) tokens of the served model. A model that calls the fused kernel
itself does so up to the capability's *default* size, whatever the pass and its size say.
"""

from __future__ import annotations

from functools import lru_cache

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Context, Knobs, Route, RouteError, clipped, split_at, up_to
from topo_gate.launchers.routes.vllm_release import LAUNCHER, cites

CITES = cites(
    {
        "tables": (
            "compilation/passes/fusion/allreduce_rms_fusion.py",
            {"0.33.0": "102-153", "0.34.0": "102-153"},
        ),
        "oneshot_choice": (
            "compilation/passes/fusion/allreduce_rms_fusion.py",
            {"0.33.0": "158-176,243-248", "0.34.0": "158-176,243-248"},
        ),
        "call": (
            "compilation/passes/fusion/allreduce_rms_fusion.py",
            {"0.33.0": "188-294", "0.34.0": "188-294"},
        ),
        "pass": (
            "compilation/passes/fusion/allreduce_rms_fusion.py",
            {"0.33.0": "984-1066,1128-1132", "0.34.0": "984-1066,1128-1132"},
        ),
        "range": ("config/vllm.py", {"0.33.0": "2658-2694", "0.34.0": "2739-2775"}),
        "limit": ("config/compilation.py", {"0.33.0": "182-208", "0.34.0": "258-284"}),
        "default": ("config/vllm.py", {"0.33.0": "179-203,256-323", "0.34.0": "208-231,284-351"}),
        "opt_flag": ("utils/argparse_utils.py", {"0.33.0": "395-406", "0.34.0": "395-406"}),
        "direct": ("models/common/ops/fused_allreduce_rms_norm.py", {"0.33.0": "23-63", "0.34.0": "24-76"}),
        "direct_gemma": (
            "model_executor/layers/fused_allreduce_gemma_rms_norm.py",
            {"0.33.0": "53-112,139-170", "0.34.0": "53-112,139-170"},
        ),
    }
)

#: Element sizes the models' own fused call takes (``_FI_SUPPORTED_DTYPES``: bf16 and fp16, checked by
#: ``_can_use_flashinfer``); an fp32 model falls back to the plain all-reduce and its norm.
DIRECT_ITEMSIZES = (2,)
#: World sizes the fusion pass supports (``FI_SUPPORTED_WORLD_SIZES``).
FI_WORLD_SIZES = (2, 4, 8, 16)
#: The optimization level vLLM runs at without ``-O`` (``VllmConfig.optimization_level``), and the
#: first level whose pass defaults switch ``fuse_allreduce_rms`` on (``OPTIMIZATION_LEVEL_02``).
DEFAULT_LEVEL, FUSION_LEVEL = 2, 2
#: ``enable_allreduce_rms_fusion``'s hardware: ``is_device_capability(90)`` or the SM 10.x family.
FUSION_CAPABILITY, FUSION_FAMILY_MAJOR = (9, 0), 10
_LEVELS = ("0", "1", "2", "3")


def capability_row(ctx: Context, table: str, key: str) -> float | None:
    """The TP entry of a capability-keyed table (``"int"``: 90, ``"dotted"``: "9.0") of the routed
    release, None if absent."""
    return _capability_row(ctx.capability, ctx.tp, ctx.release, table, key)


#: Table rows ``capability_row`` keeps: a few tables, capabilities and TP sizes per process.
KEPT_ROWS = 256


@lru_cache(maxsize=KEPT_ROWS)  # read by every candidate's route, of the same node and release
def _capability_row(
    capability: tuple[int, int], tp: int, release: str | None, table: str, key: str
) -> float | None:
    major, minor = capability
    spelled = {"int": f"{major}{minor}", "dotted": f"{major}.{minor}"}[key]
    value = knobs.table(LAUNCHER, table, release).get(spelled, {}).get(str(tp))
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


def pass_enabled(knobset: Knobs, ctx: Context, config: dict[str, object]) -> bool:
    """``fuse_allreduce_rms`` as vLLM resolves it: the user's value, else the level's default (TP > 1
    on SM 9.0 or the SM 10.x family, at ``-O2`` and above)."""
    if "fuse_allreduce_rms" in config:
        return bool(config["fuse_allreduce_rms"])
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


def pass_route(
    knobset: Knobs, ctx: Context, config: dict[str, object], backend: str | None, *, compiled: bool
) -> Route:
    """What the compilation pass fuses where the model is ``compiled`` (NCCL where it does not: the
    plain chain then runs + norm)."""
    enabled = pass_enabled(knobset, ctx, config)
    if not enabled or not compiled or ctx.tp not in FI_WORLD_SIZES or backend is None:
        return up_to(None, None)
    max_mb = config.get("fi_allreduce_fusion_max_size_mb")
    if max_mb is None:
        max_mb = capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    if not max_mb:
        return up_to(None, None)
    assert isinstance(max_mb, (int, float))
    return fused_kernel_route(ctx, backend, _token_limit(ctx, max_mb))


def direct_route(ctx: Context, backend: str | None) -> Route:
    """What a model that calls the fused kernel itself runs: up to the capability's *default* fusion
    size, whatever ``fuse_allreduce_rms``'s size and the compilation mode say."""
    max_mb = capability_row(ctx, "fi_allreduce_fusion_max_size_mb", "int")
    if not max_mb or backend is None or ctx.tp == 1 or ctx.itemsize not in DIRECT_ITEMSIZES:
        return up_to(None, None)
    return fused_kernel_route(ctx, backend, _token_limit(ctx, max_mb))
