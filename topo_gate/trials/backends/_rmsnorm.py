"""The unfused tail of the allreduce_rmsnorm pattern: ONE fused residual-add + RMSNorm kernel.

This is what a launcher runs after a plain all-reduce when fusion is off (vLLM's and SGLang's
``fused_add_rms_norm``), so it is the honest baseline for FlashInfer's fused kernel. Several eager
torch ops instead would add launches and memory passes the launcher never pays, flattering fusion.
Written in Triton because it needs no build step on the GPU machine (FlashInfer's own norm module
would be JIT-compiled there). Like vLLM's kernel, the sum is rounded to the activation dtype before
it is normalised, so ``out`` is RMSNorm of exactly the ``residual_out`` a launcher would keep.
"""

from __future__ import annotations

import importlib.util

import torch


def triton_missing() -> str | None:
    return None if importlib.util.find_spec("triton") is not None else "triton not installed"


def _kernel():
    # Imported on first use: Triton is only needed by this pattern, and only on a GPU.
    import triton
    import triton.language as tl

    @triton.jit
    def add_rmsnorm(reduced, residual, weight, out, residual_out, hidden, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < hidden
        offsets = row * hidden + cols
        total = tl.load(reduced + offsets, mask=mask, other=0.0).to(tl.float32)
        total += tl.load(residual + offsets, mask=mask, other=0.0).to(tl.float32)
        rounded = total.to(residual_out.dtype.element_ty)
        tl.store(residual_out + offsets, rounded, mask=mask)
        total = rounded.to(tl.float32)
        inv_rms = tl.rsqrt(tl.sum(total * total, axis=0) / hidden + eps)
        gamma = tl.load(weight + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out + offsets, (total * inv_rms * gamma).to(out.dtype.element_ty), mask=mask)

    return add_rmsnorm, triton.next_power_of_2


class FusedAddRmsNorm:
    """``residual_out = reduced + residual``; ``out = RMSNorm(residual_out) * weight``, one launch."""

    def __init__(self, hidden: int, eps: float) -> None:
        self._kernel, next_power_of_2 = _kernel()
        self._hidden = hidden
        self._eps = eps
        self._block = next_power_of_2(hidden)
        # One program per row; wide rows get more warps so each thread holds few elements.
        self._warps = 16 if self._block >= 8192 else 8 if self._block >= 2048 else 4

    def __call__(
        self, reduced: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
        out: torch.Tensor, residual_out: torch.Tensor,
    ) -> None:  # fmt: skip
        rows = reduced.numel() // self._hidden
        self._kernel[(rows,)](
            reduced, residual, weight, out, residual_out, self._hidden, self._eps,
            BLOCK=self._block, num_warps=self._warps,
        )  # fmt: skip
