"""TensorRT-LLM (PyTorch backend): which kernel serves each all-reduce, given ``allreduce_strategy`` and env.

**Pin.** ``git-f6a156b`` (commit ``f6a156b4391beb31347c0fa775f35764eb95cfc6``), the commit whose
``cpp/tensorrt_llm/common/customAllReduceUtils.h`` -- the ``AUTO`` lookup table and the routing limit --
the source tools hold and return in full; the manifest's table is extracted from it. The former pin
``0004396`` held only ``llm_args.py``: its all-reduce dispatch could not be read. The tools store each
file only at the commits that changed it, so no single commit returns every file cited here; the
other files are read at the stored commits named in ``CITES`` (each the version that goes with the
64 MiB / ``TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE`` header: same limit call, same fallbacks).

**Dispatch** (``AllreduceOp::selectImplementation``):

- ``NCCL``, ``UB``, ``NCCL_SYMMETRIC`` run as given.
- Every other strategy is first *admitted*: NCCL when the message is over the routing limit or the
  group lacks P2P or NVLink (``ifFallbackToNCCL``) -- so on PCIe it is NCCL at every size.
- Then ``TWOSHOT`` below TP tokens runs ``ONESHOT``; ``AUTO`` takes the lookup table's *preference*
  (``trtllm_table``); the fusion op at the norm site is ``RESIDUAL_RMS_NORM``.
- ``MNNVL`` is ``AUTO`` on one node: ``MNNVLAllReduce.is_mnnvl`` needs a multi-node group, and
  ``AllReduce.forward`` hands what it does not take to ``AUTO``.
- The one-/two-shot Lamport kernels dispatch only TP 2/4/8/16 (``DISPATCH_RANKS``): elsewhere a
  routed message fails, so such knobs are refused.

**AUTO is autotuned by default.** The PyTorch backend sends ``AUTO`` to ``tunable_allreduce`` unless
``TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1`` or ``TLLM_DISABLE_MPI=1`` (``AllReduce.forward``; without MPI
it runs ``allreduce_pg``, the same ``AllreduceOp`` over a ProcessGroup): TensorRT-LLM's AutoTuner
times NCCL_SYMMETRIC, NCCL, ONESHOT and TWOSHOT per token bucket at warm-up and runs its pick, which
no source can tell -- that route is ``trtllm_autotuned`` at every size. Only with the autotuner out
of the way does AUTO follow the table, resolving to the trial backends ``trtllm_[fused_]oneshot`` /
``_twoshot``. Deterministic all-reduce (``FORCE_ALL_REDUCE_DETERMINISTIC=1`` or
``FORCE_DETERMINISTIC=1``) moves the routing limit by a rule the model does not read: refused.
``TLLM_DISABLE_MPI``, ``FORCE_DETERMINISTIC`` and ``TLLM_TEST_MNNVL`` are not in the pinned manifest
(its extraction did not keep them, and its source excerpts cannot be re-read), so ``exec`` and the
plugins, which pass on the manifest's env names only, drop them until it is re-extracted.

**Releases.** No installed TensorRT-LLM equals this pin: ``f6a156b`` and the commits in ``CITES`` are
main-branch commits, and a release is cut from a ``release/*`` branch. The release users install
(1.2.1) could not be read to map it here: the package index serves ``tensorrt-llm`` only as a
placeholder that downloads the wheel from NVIDIA's own index (no wheel of any version is there),
the v1.2.1 tag's commit could not be found, and the source index holds none of the cited files at
the release-branch commits a downstream project pins (1.2.0rc6 ``9ba1426``, 1.2.0rc7 ``a65b0d4``).
The public record shows these spans moving around the 1.2 branch point (late 2025): the 64 MiB
limit and TWOSHOT's fall-back to ONESHOT (PR 9145, Nov 2025), NCCL_SYMMETRIC as the table's
out-of-range answer (PR 9314, Nov 2025; another stored version of the header, same tables, answers
NCCL), the autotuned AUTO (PR 8531, reviewed Dec 2025) and the workspace rule moved from
``plugin.py`` (which ``ops.py`` at ``0071496`` still imports) to ``allreduce_helper.py``. So no
release is mapped onto this pin (``releases.EQUIVALENT`` has no TensorRT-LLM entry) and a plan for
an installed TensorRT-LLM changes nothing until a release's own files are read.
"""

from __future__ import annotations

import re

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import trtllm_table
from topo_gate.launchers.routes.base import (
    Cite,
    Context,
    Knobs,
    Route,
    RouteError,
    clipped,
    normalised,
    split_at,
    up_to,
)
from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN

LAUNCHER = "trtllm"
RELEASE = "TensorRT-LLM f6a156b"
_UTILS = "cpp/tensorrt_llm/common/customAllReduceUtils.h"
_OP = "cpp/tensorrt_llm/thop/allreduceOp.cpp"
_OP_AT = "TensorRT-LLM 01e2c36"
CITES = {
    "select": Cite(_OP_AT, _OP, "AllreduceOp::selectImplementation"),
    "fallback": Cite(_OP_AT, _OP, "AllreduceOp::ifFallbackToNCCL"),
    "limit": Cite(RELEASE, _UTILS, "37-49"),
    "table": Cite(RELEASE, _UTILS, "89-124"),
    "table_data": Cite(RELEASE, _UTILS, "126-259"),
    "autotune": Cite("TensorRT-LLM 0071496", "tensorrt_llm/_torch/distributed/ops.py", "AllReduce.forward"),
    "mnnvl": Cite(
        "TensorRT-LLM 0071496", "tensorrt_llm/_torch/distributed/ops.py", "MNNVLAllReduce.is_mnnvl"
    ),
    "workspace": Cite(
        "TensorRT-LLM 4fb601b",
        "tensorrt_llm/_torch/distributed/allreduce_helper.py",
        "CustomAllReduceHelper.max_workspace_size_auto",
    ),
    "ranks": Cite(
        "TensorRT-LLM b35ac1b",
        "cpp/tensorrt_llm/kernels/communicationKernels/allReduceFusionKernels.cu",
        "allreduce_fusion_op (DISPATCH_RANKS)",
    ),
}
WORKSPACE_ENV = "TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE"
AUTOTUNE_OFF_ENV = "TLLM_DISABLE_ALLREDUCE_AUTOTUNE"
#: ``mpi_disabled()`` (``TLLM_DISABLE_MPI == "1"``): ``AllReduce`` then runs ``allreduce_pg``, which
#: builds the same ``AllreduceOp`` over a torch ProcessGroup, and never the autotuner.
MPI_OFF_ENV = "TLLM_DISABLE_MPI"
#: ``getEnvForceDeterministicAllReduce``: either, set to exactly ``"1"`` (``getBoolEnv``), sends
#: ``getMaxRequiredWorkspaceSize`` down its first branch, a limit from ``FORCE_ALLREDUCE_KERNEL_WORKSPACE_SIZE``.
DETERMINISTIC_ENVS = ("FORCE_ALL_REDUCE_DETERMINISTIC", "FORCE_DETERMINISTIC")
#: ``MNNVLAllReduce.is_mnnvl``'s test bypass: set to ``"1"``, every group passes, one node too.
MNNVL_TEST_ENV = "TLLM_TEST_MNNVL"
#: The one value ``getBoolEnv`` and ``mpi_disabled`` read as on; anything else is off.
ENV_ON = "1"
#: ``getMaxRequiredWorkspaceSize``: a non-NCCL strategy takes messages of at most this many bytes (any
#: TP), unless ``WORKSPACE_ENV`` is set -- the same default and env the PyTorch backend sizes its workspace
#: with (``max_workspace_size_auto``); ``routing_limit`` refuses the values the two would read differently.
ROUTING_LIMIT_DEFAULT: int = knobs.table(LAUNCHER, "allreduce_routing_limit_default")
#: ``std::atoi`` returns an ``int``: a larger env value is undefined behaviour, refused here.
ATOI_MAX = 2**31 - 1
#: The values ``atoi`` and Python's ``int()`` read as the same number: C blanks around an optional
#: sign and ASCII digits (``int()`` also takes ``1_000`` and non-ASCII digits, which atoi stops at).
ATOI_AND_INT_AGREE = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+[ \t\n\v\f\r]*")
#: TP sizes the Lamport one-/two-shot kernels are compiled for (``DISPATCH_RANKS``).
FUSION_KERNEL_TPS = frozenset({2, 4, 8, 16})
#: The fusion op each pattern passes (AllReduceFusionOp): plain, and all-reduce + residual + RMSNorm.
FUSION_OPS = {PLAIN_PATTERN: "NONE", FUSED_PATTERN: "RESIDUAL_RMS_NORM"}
#: Knob -> what TensorRT-LLM does with it -> where (docs/launchers.md is generated from these).
KNOB_DOCS = (
    (
        "`allreduce_strategy` (default AUTO)",
        "NCCL / UB / NCCL_SYMMETRIC as given; any other strategy runs NCCL for messages over the routing limit "
        "and on groups without NVLink or P2P (so on PCIe ONESHOT and TWOSHOT are NCCL at every size); "
        "TWOSHOT below TP tokens runs ONESHOT; AUTO follows the lookup table by SM / TP / fusion op / "
        "log2 hidden / log2 tokens; MNNVL runs as AUTO on one node (refused with the test bypass "
        f"`{MNNVL_TEST_ENV}=1`)",
        ("select", "fallback", "table", "mnnvl"),
    ),
    (
        f"`{AUTOTUNE_OFF_ENV}`",
        "unset (default): AUTO goes to the runtime AutoTuner, whose per-size pick is unknown "
        "(`trtllm_autotuned`); `1`: AUTO follows the lookup table",
        ("autotune",),
    ),
    (
        f"`{WORKSPACE_ENV}`",
        "the routing limit (default 64 MiB at every TP) and the Lamport workspace the PyTorch backend "
        "allocates, both from this one value",
        ("limit", "workspace"),
    ),
    (
        f"`{MPI_OFF_ENV}`",
        "`1`: AUTO skips the autotuner (the ProcessGroup all-reduce, same dispatch) and follows the lookup table",
        ("autotune", "select"),
    ),
    (
        "`FORCE_ALL_REDUCE_DETERMINISTIC`, `FORCE_DETERMINISTIC`",
        "`1`: the routing limit comes from `FORCE_ALLREDUCE_KERNEL_WORKSPACE_SIZE` instead; not modelled, "
        "so the route model refuses strategies that consult the limit",
        ("limit",),
    ),
    (
        "`NCCL_NVLS_ENABLE`",
        "not set by TensorRT-LLM: NCCL's default may use NVLS at TP > 2 on NVSwitch, unlike the trial baseline",
        (),
    ),
)
#: Strategies (or AUTO's outcomes) whose kernels no trial times: routed to these names, which a profile
#: never lists. Any other strategy name the manifest accepts gets ``trtllm_<name>``.
UNMEASURED = {
    "AUTOTUNED": "trtllm_autotuned",
    "MINLATENCY": "trtllm_minlatency",
    "MIN_LATENCY": "trtllm_minlatency",
    "LOWPRECISION": "trtllm_lowprecision",
    "MNNVL": "mnnvl_trtllm",
    "UB": "trtllm_userbuffers",
    "NCCL_SYMMETRIC": "nccl_symmetric_trtllm",
}
#: Strategies the Lamport one-/two-shot kernels serve, by the trial name's stem.
LAMPORT = {"ONESHOT": "oneshot", "TWOSHOT": "twoshot"}


def strategy(knobset: Knobs) -> str:
    value = str(knobset.config.get("allreduce_strategy", "AUTO"))
    choices = knobs.manifest(LAUNCHER)["config_keys"]["allreduce_strategy"]["choices"]
    if value not in choices:
        raise RouteError(f"unknown allreduce_strategy {value!r} (TensorRT-LLM takes {', '.join(choices)})")
    return value


def routing_limit(tp: int, env: dict[str, str] | None = None) -> int:
    """The largest message (bytes) a non-NCCL strategy runs (``getMaxRequiredWorkspaceSize``)."""
    del tp  # the pinned limit is the same at every TP
    env = env or {}
    deterministic = [name for name in DETERMINISTIC_ENVS if env.get(name) == ENV_ON]
    if deterministic:
        # That branch reads its limit through envUtils' getUInt64Env, which the model does not cite.
        raise RouteError(
            f"{deterministic[0]}=1: deterministic all-reduce takes its routing limit from "
            f"FORCE_ALLREDUCE_KERNEL_WORKSPACE_SIZE ({CITES['limit']}), which is not modelled"
        )
    raw = env.get(WORKSPACE_ENV)
    if raw is None:
        return ROUTING_LIMIT_DEFAULT
    if raw == "":
        return 0  # atoi("") is 0, so nothing is routed (the Python workspace keeps its default)
    # C++ routes by atoi, Python sizes the workspace by int(): they agree only on plain decimals.
    if not ATOI_AND_INT_AGREE.fullmatch(raw):
        raise RouteError(
            f"{WORKSPACE_ENV}={raw!r}: TensorRT-LLM's int() ({CITES['workspace']}) rejects it or reads "
            f"another number than atoi ({CITES['limit']})"
        )
    value = int(raw)
    if value < 0:
        raise RouteError(
            f"{WORKSPACE_ENV}={raw}: a negative workspace; the routing limit casts it to a size_t near "
            f"2**64 ({CITES['limit']})"
        )
    if value > ATOI_MAX:
        raise RouteError(f"{WORKSPACE_ENV}={raw}: over atoi's int range, undefined in {CITES['limit']}")
    return value


def name(outcome: str, *, fused: bool) -> str | None:
    """The trial (or declared unmeasured) backend name of a dispatch outcome; None is NCCL."""
    if outcome == "NCCL":
        return None
    if outcome in LAMPORT:
        return ("trtllm_fused_" if fused else "trtllm_") + LAMPORT[outcome]
    base = UNMEASURED.get(outcome, f"trtllm_{outcome.lower()}")
    return base + ("_fused" if fused else "")


def admitted_tokens(ctx: Context, env: dict[str, str]) -> int:
    """Admission of every non-NCCL-as-given strategy: the largest token count that may leave NCCL
    (0: none) -- within the routing limit, on a group with P2P and NVLink (``ifFallbackToNCCL``)."""
    if not (ctx.p2p and ctx.full_nvlink):
        return 0
    return routing_limit(ctx.tp, env) // ctx.row_bytes


def _needs_fusion_kernel(ctx: Context, what: str) -> None:
    if ctx.tp not in FUSION_KERNEL_TPS:
        raise RouteError(
            f"{what} at TP {ctx.tp}: the one-/two-shot kernels dispatch TP 2/4/8/16 ({CITES['ranks']})"
        )


def table_route(ctx: Context, *, fused: bool, max_tokens: int) -> Route:
    """AUTO with the autotuner off: the lookup table's pick per token bucket, NCCL past admission."""
    spans: list[tuple[int | None, str | None]] = []
    for first, last in trtllm_table.token_buckets(max_tokens):
        outcome = trtllm_table.strategy(
            capability=ctx.capability,
            tp=ctx.tp,
            fusion_op=FUSION_OPS[FUSED_PATTERN if fused else PLAIN_PATTERN],
            hidden=ctx.hidden,
            tokens=first,
        )
        if outcome in LAMPORT:
            _needs_fusion_kernel(ctx, f"AUTO's table picks {outcome}")
        spans.append((last * ctx.row_bytes + 1, name(outcome, fused=fused)))
    return normalised((*spans, (None, None)))


def _route(knobset: Knobs, ctx: Context, *, fused: bool) -> Route:
    chosen = strategy(knobset)
    env = dict(knobset.env)
    if chosen in ("NCCL", "UB", "NCCL_SYMMETRIC"):
        return up_to(None, name(chosen, fused=fused))  # as given, no fallback
    if chosen in ("AUTO", "MNNVL"):
        if env.get(MNNVL_TEST_ENV) == ENV_ON:
            # Then MNNVLAllReduce runs first wherever the layer built its AllReduce with a dtype.
            raise RouteError(
                f"{MNNVL_TEST_ENV}=1 sends AUTO and MNNVL to MNNVLAllReduce on one node, for the layers "
                f"that pass a dtype, which the model cannot tell ({CITES['mnnvl']})"
            )
        # is_mnnvl needs a multi-node group, so on one node forward runs MNNVL as AUTO.
        chosen = "AUTO"
    if chosen == "AUTO" and ENV_ON not in (env.get(AUTOTUNE_OFF_ENV), env.get(MPI_OFF_ENV)):
        return up_to(None, name("AUTOTUNED", fused=fused))  # the AutoTuner's pick: unknown at every size
    max_tokens = admitted_tokens(ctx, env)
    if max_tokens == 0:
        return up_to(None, None)
    limit = max_tokens * ctx.row_bytes + 1  # message_size_bytes > max_workspace_size -> NCCL
    if chosen == "AUTO":
        return table_route(ctx, fused=fused, max_tokens=max_tokens)
    if chosen in LAMPORT:
        _needs_fusion_kernel(ctx, chosen)
    if chosen == "TWOSHOT":
        below_tp_tokens = (ctx.tp - 1) * ctx.row_bytes + 1  # seq_len < tp_size -> ONESHOT
        return clipped(
            split_at(below_tp_tokens, name("ONESHOT", fused=fused), name("TWOSHOT", fused=fused)), limit
        )
    return up_to(limit, name(chosen, fused=fused))


def routes(knobset: Knobs, ctx: Context) -> dict[str, Route]:
    """Per pattern, the kernel TensorRT-LLM runs at each message size with ``knobset`` on ``ctx``."""
    return {pattern: _route(knobset, ctx, fused=pattern == FUSED_PATTERN) for pattern in FUSION_OPS}
