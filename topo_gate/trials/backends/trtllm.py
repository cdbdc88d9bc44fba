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

Launch choices, as the launchers make them: ``fp32_acc=True``; no PDL (``launch_with_pdl=False``), so
consecutive calls in the graph never overlap -- conservative for the fused pattern, where a launcher
overlapping with the next layer's GEMM could gain a little more.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import ClassVar

import torch

from ._admission import first_reason, needs_cuda, sm_version
from ._flashinfer import TRTLLM_MAX_COMM_BYTES, TRTLLM_WORLD_SIZES, VECTOR_BYTES, flashinfer_missing
from .base import PATTERN_ALLREDUCE, PATTERN_ALLREDUCE_RMSNORM, RMSNORM_EPS, Backend, TrialBuffers

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


class _TrtllmBackend(Backend):
    oneshot: ClassVar[bool]

    @property
    def _fused(self) -> bool:
        return self.ctx.pattern == PATTERN_ALLREDUCE_RMSNORM

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
        self._workspace = create_allreduce_fusion_workspace(
            backend="trtllm",  # explicit: "auto" would choose multicast MNNVL where it can
            world_size=ctx.world_size,
            rank=ctx.rank,
            max_token_num=ctx.max_tokens,
            hidden_dim=ctx.hidden,
            dtype=ctx.dtype,
            group=ctx.group,
        )
        self._kernel = trtllm_allreduce_fusion
        self._pattern = (
            AllReduceFusionPattern.kARResidualRMSNorm if self._fused else AllReduceFusionPattern.kAllReduce
        )

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        # The per-kernel API, as vLLM calls it: unlike the unified ``allreduce_fusion`` it accepts
        # allreduce_out=None for the fused pattern, so the kernel does not write a tensor the
        # launcher never reads. It is marked deprecated in favour of the unified API.
        ctx, workspace = self.ctx, self._workspace
        arguments = dict(
            allreduce_in=buffers.x.view(-1), world_size=ctx.world_size, world_rank=ctx.rank,
            token_num=tokens, hidden_dim=ctx.hidden, workspace_ptrs=workspace.workspace_tensor,
            launch_with_pdl=False, trigger_completion_at_end=True, fp32_acc=True,
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
        self._workspace.destroy()


class TrtllmOneshot(_TrtllmBackend):
    """Every rank reads every peer's whole message and reduces it locally: one Lamport round."""

    name = "trtllm_oneshot"
    patterns = (PATTERN_ALLREDUCE,)
    oneshot = True


class TrtllmTwoshot(_TrtllmBackend):
    """Reduce-scatter then all-gather of row slices: two rounds, 1/TP of the traffic per rank."""

    name = "trtllm_twoshot"
    patterns = (PATTERN_ALLREDUCE,)
    oneshot = False


class TrtllmFusedOneshot(_TrtllmBackend):
    """One-shot all-reduce + residual add + RMSNorm in one kernel (``kARResidualRMSNorm``)."""

    name = "trtllm_fused_oneshot"
    patterns = (PATTERN_ALLREDUCE_RMSNORM,)
    oneshot = True


class TrtllmFusedTwoshot(_TrtllmBackend):
    """Two-shot all-reduce + residual add + RMSNorm in one kernel (``kARResidualRMSNorm``)."""

    name = "trtllm_fused_twoshot"
    patterns = (PATTERN_ALLREDUCE_RMSNORM,)
    oneshot = False
