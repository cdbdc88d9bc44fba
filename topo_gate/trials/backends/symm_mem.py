"""torch symmetric-memory all-reduce without multicast.

``symm_mem_twoshot_vllm`` is the path behind vLLM's ``VLLM_ALLREDUCE_USE_SYMM_MEM`` and SGLang's
``--enable-torch-symm-mem`` where multimem (NVLink SHARP) is not used (TP2 on SM90), and its call
sequence is theirs, identical in both: copy the input into the symmetric buffer, the in-place
``two_shot_all_reduce_`` on it, copy the buffer out (vLLM 0.33.0
``distributed/device_communicators/symm_mem.py:134-155``; SGLang 0.5.23
``srt/distributed/device_communicators/torch_symm_mem.py:173-184``).

``symm_mem_oneshot`` (``one_shot_all_reduce_copy_out``) and ``symm_mem_twoshot`` (copy in, then
``two_shot_all_reduce_out``) are sequences no launcher runs; they stay loadable for older evidence
but are not in the default plan.

Multicast: these ops are peer-to-peer loads/stores, never ``multimem``; and the rendezvous would
still map a multicast object if the fabric offered one, so admission refuses to run unless
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` (and ``NCCL_NVLS_ENABLE=0``) are set -- the runner sets them --
or the user passed ``--allow-multicast``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch

from topo_gate.profile.schema import PLAIN_PATTERN

from ._admission import first_reason, multicast_unsafe, needs_cuda
from ._flashinfer import VECTOR_BYTES
from .base import Backend, TrialBuffers

_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_OPS = ("one_shot_all_reduce_copy_out", "two_shot_all_reduce_out", "two_shot_all_reduce_")


def symm_mem_ops_missing() -> str | None:
    """Whether this torch build has the peer-to-peer symmetric-memory all-reduce ops."""
    try:
        import torch.distributed._symmetric_memory  # noqa: F401 -- registers torch.ops.symm_mem
    except ImportError as exc:
        return f"torch has no symmetric memory: {exc}"
    missing = [op for op in _OPS if not hasattr(torch.ops.symm_mem, op)]
    return f"torch {torch.__version__} lacks symm_mem ops {', '.join(missing)}" if missing else None


class _SymmMem(Backend):
    patterns = (PLAIN_PATTERN,)
    oneshot: ClassVar[bool]
    in_place: ClassVar[bool] = False

    def unavailable(self) -> str | None:
        ctx = self.ctx
        return first_reason(
            lambda: needs_cuda(ctx),
            lambda: multicast_unsafe(ctx),
            lambda: None if ctx.dtype in _DTYPES else f"dtype {ctx.dtype} not supported",
            symm_mem_ops_missing,
        )

    def size_unavailable(self, tokens: int) -> str | None:
        if tokens * self.ctx.hidden * self.ctx.dtype.itemsize % VECTOR_BYTES:
            return f"message is not a whole number of {VECTOR_BYTES}-byte vectors"
        if tokens > self.ctx.max_tokens:
            return f"{tokens} tokens is over the symmetric buffer sized for {self.ctx.max_tokens}"
        return None

    def setup(self) -> None:
        import torch.distributed._symmetric_memory as symm_mem

        ctx = self.ctx
        self._group_name = ctx.group.group_name
        self._buffer = symm_mem.empty(ctx.max_tokens * ctx.hidden, dtype=ctx.dtype, device=ctx.device)
        self._rendezvous = symm_mem.rendezvous(self._buffer, group=self._group_name)

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        staged = self._buffer[: buffers.x.numel()]
        x, out, group_name = buffers.x.view(-1), buffers.out.view(-1), self._group_name
        if self.oneshot:
            one_shot = torch.ops.symm_mem.one_shot_all_reduce_copy_out
            return lambda: one_shot(staged, x, "sum", group_name, out)
        if self.in_place:
            in_place = torch.ops.symm_mem.two_shot_all_reduce_

            def copy_in_two_shot_copy_out() -> None:
                staged.copy_(x)
                in_place(staged, "sum", group_name)
                out.copy_(staged)

            return copy_in_two_shot_copy_out
        two_shot = torch.ops.symm_mem.two_shot_all_reduce_out

        def copy_then_two_shot() -> None:
            staged.copy_(x)
            two_shot(staged, "sum", group_name, out)

        return copy_then_two_shot

    def close(self) -> None:
        torch.cuda.synchronize(self.ctx.device)
        del self._rendezvous, self._buffer


class SymmMemOneshot(_SymmMem):
    name = "symm_mem_oneshot"
    oneshot = True


class SymmMemTwoshot(_SymmMem):
    name = "symm_mem_twoshot"
    oneshot = False


class SymmMemTwoshotVllm(_SymmMem):
    name = "symm_mem_twoshot_vllm"
    oneshot = False
    in_place = True
