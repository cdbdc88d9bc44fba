"""CPU backends over gloo, so the whole harness runs for real on a machine without a GPU.

- ``gloo``: ``torch.distributed.all_reduce`` on the gloo process group (the CPU baseline).
- ``gloo_ring``: a ring all-reduce written here with point-to-point send/recv (reduce-scatter, then
  all-gather, 2 (n-1) steps), a genuinely different algorithm, so CPU evidence has two competitors.

Both also run the ``allreduce_rmsnorm`` pattern the unfused way a launcher would: all-reduce, then
residual add rounded to the activation dtype, then RMSNorm computed in float32.

Admission: the run must be on the CPU with a gloo process group; the ring also needs at least one
element per rank so that every ring step moves data.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable

import torch
import torch.distributed as dist

from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN

from .base import RMSNORM_EPS, Backend, TrialBuffers


def add_rmsnorm(reduced: torch.Tensor, buffers: TrialBuffers) -> None:
    """``residual_out = reduced + residual`` (in the activation dtype, as the launcher keeps it);
    ``out = RMSNorm(residual_out) * weight`` with the statistics in float32."""
    assert buffers.residual is not None and buffers.weight is not None and buffers.residual_out is not None
    torch.add(reduced, buffers.residual, out=buffers.residual_out)
    total = buffers.residual_out.float()
    inv_rms = torch.rsqrt(total.pow(2).mean(dim=-1, keepdim=True) + RMSNORM_EPS)
    buffers.out.copy_(total * inv_rms * buffers.weight.float())


class _CpuBackend(Backend):
    patterns = (PLAIN_PATTERN, FUSED_PATTERN)

    def unavailable(self) -> str | None:
        if self.ctx.device.type != "cpu":
            return f"CPU-only backend, the run is on {self.ctx.device.type}"
        if dist.get_backend(self.ctx.group) != "gloo":
            return f"needs a gloo process group, found {dist.get_backend(self.ctx.group)}"
        return None

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        if self.ctx.pattern == PLAIN_PATTERN:
            return lambda: self.all_reduce(buffers.x, buffers.out)
        reduced = torch.empty_like(buffers.x)

        def allreduce_then_norm() -> None:
            self.all_reduce(buffers.x, reduced)
            add_rmsnorm(reduced, buffers)

        return allreduce_then_norm

    @abstractmethod
    def all_reduce(self, x: torch.Tensor, out: torch.Tensor) -> None:
        """Write the sum of every rank's ``x`` to ``out``."""


class GlooAllReduce(_CpuBackend):
    name = "gloo"

    def all_reduce(self, x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(x)
        dist.all_reduce(out, group=self.ctx.group)


class GlooRingAllReduce(_CpuBackend):
    """Ring all-reduce: reduce-scatter then all-gather over ``n`` chunks, each step a send to the
    next rank and a receive from the previous one (posted together, so no rank blocks the ring)."""

    name = "gloo_ring"

    def size_unavailable(self, tokens: int) -> str | None:
        if tokens * self.ctx.hidden < self.ctx.world_size:
            return f"ring needs at least one element per rank ({self.ctx.world_size})"
        return None

    def all_reduce(self, x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(x)
        n, rank = self.ctx.world_size, self.ctx.rank
        chunks = torch.tensor_split(out.view(-1), n)
        incoming = torch.empty_like(chunks[0])  # chunk 0 is the largest of tensor_split's chunks
        after = dist.get_global_rank(self.ctx.group, (rank + 1) % n)
        before = dist.get_global_rank(self.ctx.group, (rank - 1) % n)
        # Reduce-scatter: after step s, chunk (rank - s - 1) holds the sum of s + 2 ranks' inputs;
        # after n - 1 steps rank r holds the full sum of chunk (r + 1) % n.
        for step in range(n - 1):
            send_chunk, recv_chunk = chunks[(rank - step) % n], chunks[(rank - step - 1) % n]
            received = incoming[: recv_chunk.numel()]
            self._exchange(send_chunk, after, received, before)
            recv_chunk.add_(received)
        # All-gather: pass the fully reduced chunks around the ring.
        for step in range(n - 1):
            send_chunk, recv_chunk = chunks[(rank - step + 1) % n], chunks[(rank - step) % n]
            self._exchange(send_chunk, after, recv_chunk, before)

    def _exchange(self, send: torch.Tensor, dst: int, recv: torch.Tensor, src: int) -> None:
        requests = [dist.isend(send, dst, group=self.ctx.group), dist.irecv(recv, src, group=self.ctx.group)]
        for request in requests:
            assert request is not None  # None only on a rank outside the group, and this rank is in it
            request.wait()
