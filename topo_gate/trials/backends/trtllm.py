"""FlashInfer's TensorRT-LLM Lamport all-reduce: one-shot, two-shot, and fused with residual+RMSNorm.

The path a launcher takes with ``--flashinfer-allreduce-fusion-backend trtllm`` (SGLang) or
``VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm`` + ``fuse_allreduce_rms`` (vLLM); TensorRT-LLM's
``ONESHOT`` / ``TWOSHOT`` strategies are the same kernels. The workspace is always created with the
explicit backend ``"trtllm"`` (IPC buffers, ``enable_multicast=False``): never ``"auto"``, which picks
multicast MNNVL wherever the fabric offers it (DESIGN.md principle 5).

Admission (can it run, and would a launcher run it) is separate from preference (is it faster),
which only measurements decide:

- needs SM90 or newer (the fusion kernels are compiled for ``__CUDA_ARCH__ >= 900``);
- the fused pattern additionally needs SM90 or SM10x: SGLang's ``_resolve_backend`` rejects SM120
  and vLLM has no SM120 fusion table, so a fused win measured there is a rule no launcher follows;
- TP in {2, 4, 8, 16} (the kernel's dispatch), rows of whole 16-byte vectors;
- two-shot needs tokens > TP (each rank reduces a slice of rows; FlashInfer asserts it);
- one-shot must fit the Lamport buffer's int32 limit; every size must fit the workspace.

Each backend is one launcher's call sequence (``launch_styles.LaunchStyle``: the one/two-shot rule,
PDL, fp32 accumulation and the PDL completion trigger, each the launcher's own, cited there and
recorded in the evidence per backend); outputs are always pre-allocated
tensors: where a launcher passes a fresh ``torch.empty_like`` (or ``output=None``, which FlashInfer
turns into one), that allocation comes from the CUDA graph's pool at capture and costs nothing per
replay, and the kernel reads and writes the same bytes. vLLM's fused pass writes the residual in
place (``residual_out=allreduce_in``); the kernel's reads and writes are the same bytes either way.

- ``trtllm_oneshot`` / ``trtllm_twoshot`` (and ``trtllm_fused_*``): TensorRT-LLM's forced ``ONESHOT`` /
  ``TWOSHOT`` strategies: one/two-shot as named, no PDL, bf16 accumulation, completion at the end.
- ``*_vllm``: vLLM 0.33.0 (plain: PDL, no fp32 accumulation; fused: PDL, fp32 accumulation, its
  one-shot table).
- ``*_sglang``: SGLang 0.5.23 (PDL, fp32 accumulation, early completion, FlashInfer's heuristic).

Where a launcher leaves one/two-shot to a rule (FlashInfer's ``_should_use_oneshot``,
``comm/trtllm_ar.py:711-725``, or vLLM's table), the ``_oneshot_`` backend is admitted only at the
sizes where that rule picks one-shot and the ``_twoshot_`` one only where it picks two-shot: each
name is what the launcher really runs at that size.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import ClassVar

import torch

from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN

from ._admission import first_reason, needs_cuda, sm_version
from ._flashinfer import TRTLLM_MAX_COMM_BYTES, TRTLLM_WORLD_SIZES, VECTOR_BYTES, flashinfer_missing
from .base import RMSNORM_EPS, Backend, TrialBuffers
from .launch_styles import STYLES, TRTLLM_STYLE, LaunchStyle

_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def trtllm_unavailable(
    *, sm: int, world_size: int, hidden: int, dtype: torch.dtype, fused: bool
) -> str | None:
    """Whole-run admission of the TRT-LLM kernels on a GPU of compute capability ``sm`` (e.g. 90)."""
    if sm < 90:
        return f"TRT-LLM all-reduce kernels need SM90 or newer, found SM{sm}"
    if fused and sm // 10 not in (9, 10):
        return f"fused all-reduce + RMSNorm is enabled by launchers on SM90/SM10x only, found SM{sm}"
    if world_size not in TRTLLM_WORLD_SIZES:
        return (
            f"TP {world_size} not supported (kernels exist for TP {', '.join(map(str, TRTLLM_WORLD_SIZES))})"
        )
    if dtype not in _DTYPES:
        return f"dtype {dtype} not supported"
    if hidden * dtype.itemsize % VECTOR_BYTES:
        return f"hidden {hidden} is not a whole number of {VECTOR_BYTES}-byte vectors"
    return None


def trtllm_size_unavailable(
    *, tokens: int, world_size: int, hidden: int, dtype: torch.dtype, max_tokens: int, oneshot: bool
) -> str | None:
    """Admission at one size: the kernels' own preconditions and the workspace's capacity."""
    if not oneshot and tokens <= world_size:
        return f"two-shot needs tokens > TP (tokens {tokens}, TP {world_size})"
    if tokens > max_tokens:
        return f"{tokens} tokens is over the workspace sized for {max_tokens}"
    if oneshot and tokens * hidden * dtype.itemsize * world_size > TRTLLM_MAX_COMM_BYTES:
        return "one-shot message over the Lamport buffer's int32 limit"
    return None


MIB = 1024 * 1024
#: FlashInfer 0.7.2.post1 ``comm/trtllm_ar.py:711-716``: one-shot iff
#: tokens * hidden * 2 * TP * itemsize / MiB <= this, per TP.
FLASHINFER_ONESHOT_MB = {2: 512, 4: 64, 8: 42}
#: vLLM 0.33.0 ``compilation/passes/fusion/allreduce_rms_fusion.py:132-153``: fused one-shot iff
#: the message is at most this many MiB, per (SM, TP); no entry -> always one-shot.
VLLM_FUSED_ONESHOT_MB: dict[int, dict[int, float]] = {
    90: {2: 32, 4: 2, 8: 0.5},
    100: {2: 32, 4: 4, 8: 1},
    103: {2: 32, 4: 4, 8: 2},
    107: {2: 32, 4: 4, 8: 2},
}
#: vLLM's ``PDL_ADVANCE_LAUNCH_TOKENS`` (``flashinfer_all_reduce.py:28``).
VLLM_PDL_ADVANCE_TOKENS = 16


def launcher_picks_oneshot(
    rule: str, *, tokens: int, hidden: int, itemsize: int, world_size: int, sm: int | None
) -> bool | None:
    """The launcher's one/two-shot choice at this size; ``None`` for ``forced`` (the backend's own)."""
    nbytes = tokens * hidden * itemsize
    if rule == "flashinfer":
        return nbytes * 2 * world_size / MIB <= FLASHINFER_ONESHOT_MB.get(world_size, 0)
    if rule == "vllm_fused":
        # sm is None only off CUDA, where these backends are unavailable before any size is asked.
        limit = None if sm is None else VLLM_FUSED_ONESHOT_MB.get(sm, {}).get(world_size)
        return limit is None or nbytes <= limit * MIB
    return None


def completion_at_end(style: LaunchStyle, *, oneshot: bool, tokens: int) -> bool:
    if style.trigger == "vllm":
        return oneshot or tokens > VLLM_PDL_ADVANCE_TOKENS
    if style.trigger == "vllm_plain":
        return tokens > VLLM_PDL_ADVANCE_TOKENS
    return style.trigger == "always"


#: One workspace per worker, shared by every TRT-LLM backend, as a launcher shares one between its
#: plain and fused calls (vLLM's ``get_fi_ar_workspace``, SGLang's workspace manager); it also saves a
#: Lamport buffer allocation and IPC exchange per backend. Key: the workspace's shape; value:
#: [workspace, users].
_SHARED: dict[tuple, list] = {}


class _TrtllmBackend(Backend):
    oneshot: ClassVar[bool]
    style: ClassVar[LaunchStyle] = TRTLLM_STYLE
    #: Lamport buffers: the first calls after a larger message clear that message's slots.
    lamport = True

    @property
    def _fused(self) -> bool:
        return self.ctx.pattern == FUSED_PATTERN

    def unavailable(self) -> str | None:
        ctx = self.ctx
        return first_reason(
            flashinfer_missing,
            lambda: needs_cuda(ctx),
            # needs_cuda() answers first off CUDA, so the SM version is known (not None) here.
            lambda: trtllm_unavailable(
                sm=sm_version(ctx), world_size=ctx.world_size, hidden=ctx.hidden, dtype=ctx.dtype,  # type: ignore[arg-type]
                fused=self._fused,
            ),
        )  # fmt: skip

    def size_unavailable(self, tokens: int) -> str | None:
        ctx = self.ctx
        picks = launcher_picks_oneshot(
            self.style.rule, tokens=tokens, hidden=ctx.hidden, itemsize=ctx.dtype.itemsize,
            world_size=ctx.world_size, sm=sm_version(ctx),
        )  # fmt: skip
        if picks is not None and picks != self.oneshot:
            chosen = "one-shot" if picks else "two-shot"
            return f"the launcher's {self.style.rule} rule runs {chosen} at this size"
        return trtllm_size_unavailable(
            tokens=tokens, world_size=ctx.world_size, hidden=ctx.hidden, dtype=ctx.dtype,
            max_tokens=ctx.max_tokens, oneshot=self.oneshot,
        )  # fmt: skip

    def setup(self) -> None:
        from flashinfer.comm import (
            AllReduceFusionPattern,
            create_allreduce_fusion_workspace,
            trtllm_allreduce_fusion,
        )

        ctx = self.ctx
        key = (ctx.world_size, ctx.rank, ctx.max_tokens, ctx.hidden, ctx.dtype)
        if key not in _SHARED:
            workspace = create_allreduce_fusion_workspace(
                backend="trtllm",  # explicit: "auto" would choose multicast MNNVL where it can
                world_size=ctx.world_size,
                rank=ctx.rank,
                max_token_num=ctx.max_tokens,
                hidden_dim=ctx.hidden,
                dtype=ctx.dtype,
                group=ctx.group,
            )
            _SHARED[key] = [workspace, 0]
        _SHARED[key][1] += 1
        self._key = key
        self._workspace = _SHARED[key][0]
        self._kernel = trtllm_allreduce_fusion
        self._pattern = (
            AllReduceFusionPattern.kARResidualRMSNorm if self._fused else AllReduceFusionPattern.kAllReduce
        )

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        # The per-kernel API, which the unified ``allreduce_fusion`` calls (comm/allreduce.py:1249):
        # unlike the unified one it accepts allreduce_out=None for the fused pattern, so the kernel
        # does not write a tensor the launcher never reads. It is marked deprecated.
        ctx, workspace, style = self.ctx, self._workspace, self.style
        arguments = dict(
            allreduce_in=buffers.x.view(-1), world_size=ctx.world_size, world_rank=ctx.rank,
            token_num=tokens, hidden_dim=ctx.hidden, workspace_ptrs=workspace.workspace_tensor,
            launch_with_pdl=style.pdl, fp32_acc=style.fp32_acc,
            trigger_completion_at_end=completion_at_end(style, oneshot=self.oneshot, tokens=tokens),
            pattern_code=self._pattern, use_oneshot=self.oneshot,
            allreduce_out=None if self._fused else buffers.out.view(-1),
            # The worker sets residual and residual_out for the fused pattern (TrialBuffers).
            residual_in=buffers.residual.view(-1) if self._fused else None,  # type: ignore[union-attr]
            residual_out=buffers.residual_out.view(-1) if self._fused else None,  # type: ignore[union-attr]
            norm_out=buffers.out.view(-1) if self._fused else None,
            quant_out=None, scale_out=None, rms_gamma=buffers.weight if self._fused else None,
            rms_eps=RMSNORM_EPS, scale_factor=None, layout_code=None, metadata=workspace.metadata,
        )  # fmt: skip
        kernel = self._kernel

        def call() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                kernel(**arguments)

        return call

    def close(self) -> None:
        # Collective like every close: all ranks release in the same order, so the last user on
        # every rank destroys the shared workspace together.
        _SHARED[self._key][1] -= 1
        if _SHARED[self._key][1] == 0:
            del _SHARED[self._key]
            self._workspace.destroy()


class TrtllmOneshot(_TrtllmBackend):
    """Every rank reads every peer's whole message and reduces it locally: one Lamport round."""

    name = "trtllm_oneshot"
    patterns = (PLAIN_PATTERN,)
    oneshot = True


class TrtllmTwoshot(_TrtllmBackend):
    """Reduce-scatter then all-gather of row slices: two rounds, 1/TP of the traffic per rank."""

    name = "trtllm_twoshot"
    patterns = (PLAIN_PATTERN,)
    oneshot = False


class TrtllmFusedOneshot(_TrtllmBackend):
    """One-shot all-reduce + residual add + RMSNorm in one kernel (``kARResidualRMSNorm``)."""

    name = "trtllm_fused_oneshot"
    patterns = (FUSED_PATTERN,)
    oneshot = True


class TrtllmFusedTwoshot(_TrtllmBackend):
    """Two-shot all-reduce + residual add + RMSNorm in one kernel (``kARResidualRMSNorm``)."""

    name = "trtllm_fused_twoshot"
    patterns = (FUSED_PATTERN,)
    oneshot = False


def _variant(base: type[_TrtllmBackend], name: str, doc: str) -> type[_TrtllmBackend]:
    return type(base.__name__ + name.rsplit("_", 1)[1].capitalize(), (base,), {
        "name": name, "style": STYLES[name], "__doc__": doc, "__module__": __name__,
    })  # fmt: skip


_VLLM_PLAIN = "vLLM's FlashInfer all-reduce (flashinfer_all_reduce.py:525-537)"
_SGLANG_PLAIN = "SGLang's flashinfer_allreduce (flashinfer_comm_fusion.py:1017-1044)"
_VLLM_FUSED = "vLLM's fuse_allreduce_rms pass (allreduce_rms_fusion.py:243-292)"
_SGLANG_FUSED = "SGLang's flashinfer_allreduce_residual_rmsnorm (flashinfer_comm_fusion.py:897-921)"
TrtllmOneshotVllm = _variant(TrtllmOneshot, "trtllm_oneshot_vllm", _VLLM_PLAIN)
TrtllmTwoshotVllm = _variant(TrtllmTwoshot, "trtllm_twoshot_vllm", _VLLM_PLAIN)
TrtllmOneshotSglang = _variant(TrtllmOneshot, "trtllm_oneshot_sglang", _SGLANG_PLAIN)
TrtllmTwoshotSglang = _variant(TrtllmTwoshot, "trtllm_twoshot_sglang", _SGLANG_PLAIN)
TrtllmFusedOneshotVllm = _variant(TrtllmFusedOneshot, "trtllm_fused_oneshot_vllm", _VLLM_FUSED)
TrtllmFusedTwoshotVllm = _variant(TrtllmFusedTwoshot, "trtllm_fused_twoshot_vllm", _VLLM_FUSED)
TrtllmFusedOneshotSglang = _variant(TrtllmFusedOneshot, "trtllm_fused_oneshot_sglang", _SGLANG_FUSED)
TrtllmFusedTwoshotSglang = _variant(TrtllmFusedTwoshot, "trtllm_fused_twoshot_sglang", _SGLANG_FUSED)
