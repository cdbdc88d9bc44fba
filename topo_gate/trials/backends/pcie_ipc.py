"""``pcie_ipc``: FlashInfer's PCIe IPC all-reduce (``PcieIpcAllReduceWorkspace``).

Built for PCIe-only nodes (SM12x workstation cards without NVLink); it stands for vLLM's
``VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1`` and SGLang's ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE``, both of
which call ``workspace.all_reduce`` out of place (vLLM 0.33.0
``distributed/device_communicators/flashinfer_pcie_ipc_all_reduce.py:158-175``; SGLang 0.5.23
``srt/distributed/device_communicators/pcie_ipc_ar.py:406-421``).
It only needs CUDA IPC between the GPUs, so it also runs (over NVLink) on NVLink nodes; whether a
launcher enables it there is the launcher's rule, and the profile only says what was measured.

Launch configuration: FlashInfer's *seed* (``pcie_ipc_policy``), or a configuration its own tuner
persisted earlier on this machine (``FLASHINFER_AUTOTUNE_DIR``) -- the workspace loads either at
construction. topo-gate does not run FlashInfer's tuner: it takes minutes, and the question here is
whether the backend as the launcher will run it beats NCCL.

Admission comes from FlashInfer's pure policy, so every rank reaches the same answer without
talking: TP in {2, 4, 8}, bf16/fp16, whole 16-byte packs, at least one pack per rank (smaller
payloads are "better served by another backend", its docstring says), within the workspace.
Configurations are resolved before capture (``workspace.prepare``: collective), because resolving
one inside a capture is impossible (the ranks agree on it through a collective read on the host).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from topo_gate.profile.schema import PLAIN_PATTERN

from ._admission import first_reason, needs_cuda
from ._flashinfer import flashinfer_missing
from .base import Backend, TrialBuffers

PCIE_IPC_WORLD_SIZES = (2, 4, 8)
_DTYPES = (torch.bfloat16, torch.float16)


def pcie_ipc_unavailable(*, world_size: int, dtype: torch.dtype) -> str | None:
    if world_size not in PCIE_IPC_WORLD_SIZES:
        return f"TP {world_size} not supported (kernels exist for TP 2, 4, 8)"
    if dtype not in _DTYPES:
        return f"dtype {dtype} not supported (bf16 or fp16 only)"
    return None


class PcieIpc(Backend):
    name = "pcie_ipc"
    patterns = (PLAIN_PATTERN,)

    def unavailable(self) -> str | None:
        ctx = self.ctx
        return first_reason(
            flashinfer_missing,
            lambda: needs_cuda(ctx),
            lambda: pcie_ipc_unavailable(world_size=ctx.world_size, dtype=ctx.dtype),
        )

    def size_unavailable(self, tokens: int) -> str | None:
        from flashinfer.comm.pcie_ipc_policy import get_pcie_ipc_launch_config

        if tokens > self.ctx.max_tokens:
            return f"{tokens} tokens is over the workspace sized for {self.ctx.max_tokens}"
        numel = tokens * self.ctx.hidden
        if get_pcie_ipc_launch_config(self.ctx.world_size, numel, self.ctx.dtype.itemsize) is None:
            return "shape not admitted by the PCIe IPC kernels (needs whole 16-byte packs, one per rank)"
        return None

    def setup(self) -> None:
        from flashinfer.comm import PcieIpcAllReduceWorkspace

        ctx = self.ctx
        self._workspace = PcieIpcAllReduceWorkspace(
            group=ctx.group, max_numel=ctx.max_tokens * ctx.hidden, dtype=ctx.dtype
        )

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        shape = (tokens, self.ctx.hidden)
        config = self._workspace.prepare([shape], dtype=self.ctx.dtype)[shape]
        workspace, x, out = self._workspace, buffers.x, buffers.out

        def call() -> None:
            # The workspace binds itself to the first stream that calls it; the timer warms up on a
            # side stream and replays on another, always ordered by stream waits or syncs, which is
            # the guarantee rebind_stream asks the caller to give.
            workspace.rebind_stream()
            workspace.all_reduce(x, out=out, config=config)

        return call

    def close(self) -> None:
        torch.cuda.synchronize(self.ctx.device)
        self._workspace.destroy()
