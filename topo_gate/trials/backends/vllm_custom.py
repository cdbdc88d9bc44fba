"""``vllm_custom``: vLLM's custom all-reduce (the one-stage/two-stage IPC kernels), via FlashInfer's
copy in ``flashinfer.comm.vllm_ar``.

It stands for the launcher path vLLM takes unless ``--disable-custom-all-reduce`` is given (SGLang's
custom all-reduce v1 is the same kernel family and sequence). It is driven the way vLLM 0.33.0 drives
it (``distributed/device_communicators/custom_all_reduce.py:513-562``: ``custom_all_reduce`` under
capture calls ``all_reduce(input, registered=True)``, an out-of-place kernel reading the captured input
in place; ``registered=False`` only with ``use_cumem_cudagraph_pool``, ``cuda_communicator.py:123-125``,
a variant not measured here):

- shared IPC buffers: a signal block (``meta_size()``) followed by scratch for the two-stage
  kernel, and a staging buffer for eager calls, both sized for the run's largest message;
- eager calls copy the input into the staging buffer first (vLLM's unregistered path);
- inside a CUDA graph the kernel reads the input tensor in place; the peers' addresses of every
  captured input are exchanged once the capture is over (``after_capture``), as vLLM does when
  its ``capture()`` context exits. Without that exchange the graph would read garbage pointers.

Admission: TP in {2, 4, 6, 8} (the kernel's dispatch; odd TP is rejected by ``init_custom_ar``);
above TP2 every pair must be NVLink-connected, because the kernel launches nothing for TP>2 without
``full_nvlink`` (vLLM disables it there too); messages of whole 16-byte vectors. Uses no multicast.
"""

from __future__ import annotations

from collections.abc import Callable
from ctypes import c_void_p

import torch
import torch.distributed as dist

from topo_gate.profile.schema import PLAIN_PATTERN

from ._admission import first_reason, needs_cuda
from ._flashinfer import VECTOR_BYTES, flashinfer_missing
from .base import Backend, TrialBuffers

VLLM_WORLD_SIZES = (2, 4, 6, 8)
#: Thread blocks per call: vLLM's default and the kernel's maximum (``kMaxBlocks``).
MAX_CTAS = 36
#: Device-side table of peer pointers, one 64-byte entry per registered or captured buffer;
#: vLLM's size, enough for ~130k captured calls.
RANK_DATA_BYTES = 8 * 1024 * 1024
_FULL_NVLINK_CLASSES = ("nvswitch", "nvlink-mesh")
_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def vllm_custom_unavailable(*, world_size: int, group_class: str | None, dtype: torch.dtype) -> str | None:
    if world_size not in VLLM_WORLD_SIZES:
        return f"TP {world_size} not supported (kernels exist for TP 2, 4, 6, 8)"
    if world_size > 2 and group_class not in _FULL_NVLINK_CLASSES:
        return f"TP {world_size} needs every GPU pair on NVLink, group class is {group_class or 'unknown'}"
    if dtype not in _DTYPES:
        return f"dtype {dtype} not supported"
    return None


class VllmCustom(Backend):
    name = "vllm_custom"
    patterns = (PLAIN_PATTERN,)

    def unavailable(self) -> str | None:
        ctx = self.ctx
        return first_reason(
            flashinfer_missing,
            lambda: needs_cuda(ctx),
            lambda: vllm_custom_unavailable(
                world_size=ctx.world_size, group_class=ctx.group_class, dtype=ctx.dtype
            ),
        )

    def size_unavailable(self, tokens: int) -> str | None:
        if tokens * self.ctx.hidden * self.ctx.dtype.itemsize % VECTOR_BYTES:
            return f"message is not a whole number of {VECTOR_BYTES}-byte vectors"
        if tokens > self.ctx.max_tokens:
            return f"{tokens} tokens is over the buffers sized for {self.ctx.max_tokens}"
        return None

    def setup(self) -> None:
        from flashinfer.comm import CudaRTLibrary, create_shared_buffer, vllm_ar

        ctx = self.ctx
        self._ops = vllm_ar
        self._max_bytes = ctx.max_tokens * ctx.hidden * ctx.dtype.itemsize
        signal_bytes = vllm_ar.meta_size() + self._max_bytes
        self._signal_ptrs = create_shared_buffer(signal_bytes, group=ctx.group)
        # The kernels' barrier flags must start at zero on every rank before any peer writes them.
        CudaRTLibrary().cudaMemset(c_void_p(self._signal_ptrs[ctx.rank]), 0, signal_bytes)
        torch.cuda.synchronize(ctx.device)
        dist.barrier(group=ctx.group)
        self._staging_ptrs = create_shared_buffer(self._max_bytes, group=ctx.group)
        self._rank_data = torch.empty(RANK_DATA_BYTES, dtype=torch.uint8, device=ctx.device)
        self._handle = vllm_ar.init_custom_ar(
            self._signal_ptrs, self._rank_data, ctx.rank, self._full_nvlink()
        )
        vllm_ar.register_buffer(self._handle, self._staging_ptrs)

    def _full_nvlink(self) -> bool:
        # At TP2 the kernel choice ignores it; above TP2 admission already required NVLink.
        return self.ctx.world_size == 2 or self.ctx.group_class in _FULL_NVLINK_CLASSES

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        ops, handle, x, out = self._ops, self._handle, buffers.x, buffers.out
        staging, staging_bytes = self._staging_ptrs[self.ctx.rank], self._max_bytes

        def call() -> None:
            if torch.cuda.is_current_stream_capturing():
                ops.all_reduce(handle, x, out, 0, 0, MAX_CTAS)  # registered after the capture
            else:
                ops.all_reduce(handle, x, out, staging, staging_bytes, MAX_CTAS)

        return call

    def after_capture(self) -> None:
        handles, offsets = self._ops.get_graph_buffer_ipc_meta(self._handle)
        gathered: list = [None] * self.ctx.world_size
        dist.all_gather_object(gathered, (handles, offsets), group=self.ctx.group)
        self._ops.register_graph_buffers(
            self._handle, [entry[0] for entry in gathered], [entry[1] for entry in gathered]
        )

    def close(self) -> None:
        from flashinfer.comm import free_shared_buffer

        torch.cuda.synchronize(self.ctx.device)
        self._ops.dispose(self._handle)
        free_shared_buffer(self._staging_ptrs, group=self.ctx.group)
        free_shared_buffer(self._signal_ptrs, group=self.ctx.group)
