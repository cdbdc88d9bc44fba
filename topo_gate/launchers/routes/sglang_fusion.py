"""SGLang 0.5.23's FlashInfer all-reduce fusion: which backend a server ends up with, per architecture.

Without ``--flashinfer-allreduce-fusion-backend``, SGLang switches fusion on by itself (``auto``)
for the architectures it lists, on SM 9.x / 10.x, TP > 1, one node (any node count on SM 10.x), no
attention DP and no MoE all-to-all backend; MiMo gets the CuTe DSL backend on SM 10.x instead (bf16,
its TP sizes), and DeepSeek-V4.1 at TP 4 on Blackwell keeps custom all-reduce.
``--enforce-disable-flashinfer-allreduce-fusion`` runs after and wins. The backend then resolves
(``auto``: MNNVL on SM 10.x, TRT-LLM on SM 9.x) and needs its workspace: peer access (TRT-LLM) or
NVLink multicast (MNNVL); without it SGLang marks FlashInfer unavailable and fuses nothing.
"""

from __future__ import annotations

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite, Context, Knobs, RouteError

RELEASE = "sglang 0.5.23"


def _cite(path: str, lines: str) -> Cite:
    return Cite(RELEASE, "sglang/" + path, lines)


CITES = {
    "auto_enable": _cite("srt/arg_groups/overrides.py", "927-1001"),
    "enforce_disable": _cite("srt/arg_groups/overrides.py", "1005-1014"),
    "backend": _cite("srt/layers/flashinfer_comm_fusion.py", "39-83"),
    "workspace_failure": _cite("srt/layers/flashinfer_comm_fusion.py", "435-600"),
    "platform": _cite("srt/utils/common.py", "274-336"),
    "v41": _cite("srt/configs/deepseek_v41.py", "23-40"),
    "attn_dp": _cite("srt/arg_groups/parallel_hook.py", "39-61"),
    "waterfill": _cite("srt/arg_groups/overrides.py", "1595-1606"),
    "cutedsl_workspace": _cite("srt/layers/flashinfer_mnnvl_cutedsl.py", "494-503"),
}

BACKENDS = ("auto", "trtllm", "mnnvl", "cutedsl")
#: ``is_sm90`` / ``is_sm100``: the capability majors fusion exists on (``_resolve_backend``).
HOPPER, BLACKWELL = 9, 10
FUSION_MAJORS = (HOPPER, BLACKWELL)
#: ``is_blackwell``: SM 10.x, 11.x and 12.x (the DeepSeek-V4.1 exception reads this one).
BLACKWELL_FAMILY = (10, 11, 12)
#: DeepSeek-V4.1 checkpoints name this architecture; SGLang's config loader renames it to
#: DeepseekV4ForCausalLM (a listed one) and marks the model type ``deepseek_v41``.
DEEPSEEK_V41 = "DeepseekV41ForCausalLM"
DEEPSEEK_V4 = "DeepseekV4ForCausalLM"
#: The V4.1 exception: its 5120-wide model at TP 4 on one Blackwell node uses the custom push plane.
_V41_HIDDEN, _V41_TP = 5120, 4
#: CuTe DSL owns the fused pattern with its own stage fusion and NVLS workspace, sized at runtime from
#: the server's request count (and needing multicast to come up at all), so a route names it at every
#: size: no trial times it, and a plan leaves it alone.
CUTEDSL_FUSED = "mnnvl_cutedsl_fused_sglang"


def listed_architectures() -> frozenset[str]:
    """``_FLASHINFER_ALLREDUCE_FUSION_ARCHS``: where SGLang switches fusion on by itself."""
    return frozenset(knobs.table("sglang", "flashinfer_allreduce_fusion_archs"))


def cutedsl_architectures() -> frozenset[str]:
    """The MiMo architectures that get the CuTe DSL backend instead of ``auto``."""
    return frozenset(knobs.table("sglang", "cutedsl_fusion_archs"))


def flag_value(args: tuple[str, ...], flag: str) -> str | None:
    """The last value given to ``flag`` (``--x v`` or ``--x=v``), None if absent."""
    found = None
    for index, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name == flag:
            found = value if eq else (args[index + 1] if index + 1 < len(args) else "")
    return found


def _int_flag(args: tuple[str, ...], *flags: str, default: int) -> int:
    for flag in flags:
        value = flag_value(args, flag)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise RouteError(f"{flag} {value!r}: SGLang takes an integer") from None
    return default


def check_topology_flags(knobset: Knobs) -> None:
    """Refuse the layouts these routes do not model: several nodes, attention data parallelism (its
    all-reduces run over other groups, and SGLang neither fuses nor auto-enables under it)."""
    args = knobset.args
    if _int_flag(args, "--nnodes", default=1) > 1:
        raise RouteError("multi-node tensor parallelism is not modelled (one node's group only)")
    attn_dp = _int_flag(args, "--attn-dp-size", "--attention-data-parallel-size", default=1)
    if attn_dp == 1 and "--enable-dp-attention" in args:  # the deprecated spelling: --dp-size N
        attn_dp = _int_flag(args, "--dp-size", "--data-parallel-size", default=1)
    if attn_dp > 1:
        raise RouteError(
            f"attention data parallelism (size {attn_dp}) changes the groups SGLang all-reduces over "
            f"({CITES['attn_dp']}): not modelled"
        )


def _moe_a2a(args: tuple[str, ...]) -> str:
    if "--enable-waterfill" in args:
        return "deepep"  # Waterfill forces an A2A backend (_a2a_backend_overrides)
    return flag_value(args, "--moe-a2a-backend") or "none"


def configured(knobset: Knobs, ctx: Context) -> str | None:
    """The fusion backend after SGLang's post-processing of the args (before resolving ``auto``)."""
    args = knobset.args
    explicit = flag_value(args, "--flashinfer-allreduce-fusion-backend")
    if explicit is not None and explicit not in BACKENDS:
        raise RouteError(f"unknown fusion backend {explicit!r} (SGLang takes {', '.join(BACKENDS)})")
    backend = explicit if explicit is not None else _auto_enabled(knobset, ctx)
    if "--enforce-disable-flashinfer-allreduce-fusion" in args:
        return None
    return backend


def _auto_enabled(knobset: Knobs, ctx: Context) -> str | None:
    arch = ctx.served_architecture
    if arch is None:
        raise ValueError("the caller resolves an unknown architecture through its variants")
    major = ctx.capability[0]
    is_mimo = arch in cutedsl_architectures()
    if is_mimo and not (major == BLACKWELL and ctx.itemsize == 2 and ctx.tp in _cutedsl_world_sizes()):
        return None
    v41 = arch == DEEPSEEK_V41
    listed = DEEPSEEK_V4 if v41 else arch
    keeps_custom = (
        v41
        and ctx.hidden == _V41_HIDDEN
        and major in BLACKWELL_FAMILY
        and ctx.tp == _V41_TP
        and "--disable-custom-all-reduce" not in knobset.args
    )
    if (
        (is_mimo or listed in listed_architectures())
        and not keeps_custom
        and major in FUSION_MAJORS
        and ctx.tp > 1
        and _moe_a2a(knobset.args) == "none"
    ):
        return "cutedsl" if is_mimo else "auto"
    return None


def _cutedsl_world_sizes() -> tuple[int, ...]:
    return tuple(knobs.table("sglang", "cutedsl_fusion_world_sizes"))


def resolved(knobset: Knobs, ctx: Context) -> str | None:
    """The backend whose workspace serves fusion (and plain all-reduces up to its size), or None."""
    backend = configured(knobset, ctx)
    if backend is None:
        return None
    major = ctx.capability[0]
    if major not in FUSION_MAJORS:
        raise RouteError(
            f"SGLang refuses FlashInfer all-reduce fusion on SM {major}.x ({CITES['backend']}): "
            "the flag must not be emitted here"
        )
    if backend == "cutedsl" and major != BLACKWELL:
        raise RouteError(f"SGLang's cutedsl fusion backend needs SM 10.x ({CITES['backend']})")
    if backend == "auto":
        backend = "mnnvl" if major == BLACKWELL else "trtllm"
    if backend == "mnnvl" and not ctx.multicast:
        return None  # the MNNVL workspace needs NVLink multicast; SGLang marks FlashInfer unavailable
    if backend == "trtllm" and not ctx.p2p:
        return None  # the IPC workspace needs peer access
    return backend
