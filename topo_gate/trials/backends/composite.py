"""``<plain>+rmsnorm``: a plain all-reduce backend followed by the residual-add + RMSNorm a launcher
runs when fusion is off, measured in the ``allreduce_rmsnorm`` run as the fused kernels' real
alternative.

A launcher that does not fuse runs its plain fast path (e.g. TRT-LLM one-shot, vLLM's custom
all-reduce) and then its norm kernel, not NCCL + norm. So a fused rule is only worth emitting where
the fused kernel beats NCCL + norm *and* every such composite that beat NCCL there (``decide``).
The norm is the same one-launch kernel the ``nccl`` baseline uses on this device (``_rmsnorm`` on a
GPU; ``cpu.add_rmsnorm`` on the gloo harness), so the comparison isolates the all-reduce.

Composites are comparators only: no profile rule ever names one. A composite is built around an
instance of its plain backend, the one the worker's ``allreduce`` pattern measures
(``worker/pool.py``): that instance's owner sets it up and closes it, once for both patterns.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from topo_gate.profile.schema import FUSED_PATTERN

from .base import RMSNORM_EPS, Backend, BackendContext, TrialBuffers
from .names import composite_name

#: The norm after the plain all-reduce: (reduced, residual, weight, out, residual_out) -> None.
AddRmsNorm = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], None]


def with_rmsnorm(plain: type[Backend]) -> type[Backend]:
    """The composite backend class of ``plain`` (which must implement the ``allreduce`` pattern); its
    instances take an instance of ``plain`` built for the ``allreduce`` pattern."""

    class Composite(_Composite):
        name = composite_name(plain.name)
        lamport = plain.lamport

    Composite.__name__ = Composite.__qualname__ = f"{plain.__name__}WithRmsNorm"
    return Composite


class _Composite(Backend):
    patterns = (FUSED_PATTERN,)

    def __init__(self, ctx: BackendContext, plain: Backend) -> None:
        super().__init__(ctx)
        self.plain = plain

    def unavailable(self) -> str | None:
        return self.plain.unavailable()

    def size_unavailable(self, tokens: int) -> str | None:
        return self.plain.size_unavailable(tokens)

    def setup(self) -> None:
        """The norm only: the plain all-reduce is set up, and closed, by its owner."""
        self._norm: AddRmsNorm
        if self.ctx.device.type == "cuda":
            from ._rmsnorm import FusedAddRmsNorm

            self._norm = FusedAddRmsNorm(self.ctx.hidden, RMSNORM_EPS)
        else:
            from .cpu import add_rmsnorm

            self._norm = lambda reduced, residual, weight, out, residual_out: add_rmsnorm(
                reduced, TrialBuffers(reduced, out, residual, weight, residual_out)
            )

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        norm, residual, weight = self._norm, buffers.residual, buffers.weight
        out, residual_out = buffers.out, buffers.residual_out
        assert residual is not None and weight is not None and residual_out is not None, (
            "the allreduce_rmsnorm pattern's buffers carry residual, weight and residual_out"
        )
        returning = self.plain.prepare_result(tokens, buffers.x)
        if returning is not None:
            # The kernel's own output goes to the norm, as in the launcher (Backend.prepare_result).
            def norm_of_result() -> None:
                norm(returning(), residual, weight, out, residual_out)

            return norm_of_result
        reduced = torch.empty_like(buffers.x)  # allocated here, never inside the captured call
        all_reduce = self.plain.prepare(tokens, TrialBuffers(x=buffers.x, out=reduced))

        def all_reduce_then_norm() -> None:
            all_reduce()
            norm(reduced, residual, weight, out, residual_out)

        return all_reduce_then_norm

    def after_capture(self) -> None:
        self.plain.after_capture()
