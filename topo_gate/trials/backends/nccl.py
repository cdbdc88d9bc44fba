"""``nccl``: the baseline every other backend must beat, for both patterns.

- ``allreduce``: out-of-place ``ncclAllReduce`` on the current stream, as vLLM/SGLang run it in CUDA
  graphs when no custom all-reduce is enabled (vLLM 0.33.0 ``distributed/device_communicators/
  pynccl.py:276-300``; see ``_pynccl`` for why not ``torch.distributed``).
- ``allreduce_rmsnorm``: that all-reduce, then one fused residual-add + RMSNorm kernel -- what the
  launcher runs when FlashInfer fusion is off (see ``_rmsnorm``).

Admission: a CUDA device, a loadable libnccl and a dtype NCCL reduces; the fused pattern also needs
Triton. NCCL is never refused a size: it is the fallback, so it must be measured everywhere.
NVLS (multicast) stays off through ``NCCL_NVLS_ENABLE=0``, which the runner sets for every worker.
One communicator serves both patterns' baselines in a worker session (created by the first, destroyed
by the last to close), as one serves a launcher's every NCCL call.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from topo_gate.profile.schema import FUSED_PATTERN, PLAIN_PATTERN

from ._admission import first_reason, needs_cuda
from ._pynccl import NcclCommunicator, NcclLibraryError, load_nccl, nccl_dtype_supported
from ._rmsnorm import FusedAddRmsNorm, triton_missing
from .base import RMSNORM_EPS, Backend, TrialBuffers

#: The worker's one communicator per device: [communicator, users].
_SHARED: dict[str, list] = {}


class NcclBackend(Backend):
    name = "nccl"
    patterns = (PLAIN_PATTERN, FUSED_PATTERN)

    def unavailable(self) -> str | None:
        fused = self.ctx.pattern == FUSED_PATTERN
        return first_reason(
            lambda: needs_cuda(self.ctx),
            lambda: None if nccl_dtype_supported(self.ctx.dtype) else f"no NCCL type for {self.ctx.dtype}",
            self._library_missing,
            lambda: triton_missing() if fused else None,
        )

    @staticmethod
    def _library_missing() -> str | None:
        try:
            load_nccl()
        except NcclLibraryError as exc:
            return str(exc)
        return None

    def setup(self) -> None:
        self._key = str(self.ctx.device)
        if self._key not in _SHARED:
            _SHARED[self._key] = [NcclCommunicator(self.ctx.group, self.ctx.device), 0]
        _SHARED[self._key][1] += 1
        self._comm = _SHARED[self._key][0]
        self._norm = (
            FusedAddRmsNorm(self.ctx.hidden, RMSNORM_EPS) if self.ctx.pattern == FUSED_PATTERN else None
        )

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        comm, x, out = self._comm, buffers.x, buffers.out
        if self._norm is None:
            return lambda: comm.all_reduce(x, out)
        norm = self._norm
        residual, weight, residual_out = buffers.residual, buffers.weight, buffers.residual_out
        assert residual is not None and weight is not None and residual_out is not None  # set when fused
        reduced = torch.empty_like(x)  # allocated here, never inside the captured call

        def allreduce_then_norm() -> None:
            comm.all_reduce(x, reduced)
            norm(reduced, residual, weight, out, residual_out)

        return allreduce_then_norm

    def close(self) -> None:
        # Collective like every close: every rank releases in the same order, so the last user on
        # every rank destroys the communicator together.
        _SHARED[self._key][1] -= 1
        if _SHARED[self._key][1] == 0:
            del _SHARED[self._key]
            self._comm.destroy()
