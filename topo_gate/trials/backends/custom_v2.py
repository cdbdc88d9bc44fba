"""``custom_v2_sglang``: SGLang's default all-reduce on full-NVLink groups, its JIT "custom all-reduce
v2", run through SGLang's own kernel and bindings (``sglang.kernels.ops.communication.all_reduce``
of sglang 0.5.23; where they come from: ``custom_v2_bundle``).

SGLang takes this path unless told otherwise: ``dispatch_custom_allreduce`` returns
``CustomAllReduceV2`` on CUDA when ``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2`` (default 1) and
``can_use_custom_all_reduce_v2`` hold (``srt/distributed/device_communicators/custom_all_reduce.py:
373-398``), and ``GroupCoordinator.all_reduce`` sends every message ``should_custom_ar`` accepts to
its out-of-place ``custom_all_reduce`` (``srt/distributed/parallel_state.py:673-795, 949-1063``).
This module reproduces what ``CustomAllReduceV2`` (``.../custom_all_reduce_v2.py``; it cannot be
imported without the server) does around the kernel, step for step:

- setup = ``__init__`` (lines 138-224) and ``_init_workspace`` (265-349): workspaces sized from v2's
  tuning table for this GPU and world size (``custom_v2_dispatch.size_workspace``), one torch
  symmetric-memory allocation (``_allocate_symmetric_memory``, 85-100) sliced into the push slots,
  pull buffer and semaphores, the local slab zeroed, the ``PushPlane`` / ``PullPlane`` /
  ``Communicator`` objects, the device-side graph pointer table, the ``IPCManager``; the JIT modules
  (``communicator``, ``cuda_ipc``, ``custom_all_reduce<dtype, TP>``) are built or loaded here, so no
  build lands in a checked or timed step;
- a call = ``custom_all_reduce`` (456-484): inside a CUDA graph the graph heuristic (SGLang captures
  all its graphs inside ``capture()``, 496-510, so ``_can_use_graph`` is true exactly while the stream
  captures), a pointer-table row for the pull algorithms (``_allocate_graph_row``, 486-490), the
  ``custom_all_reduce`` binding; eager, the cached eager plan's ``module.all_reduce`` (417-433, 463-467);
- ``after_capture`` = what ``capture()`` does on exit: ``_register_graph_inputs_ipc`` (512-558), the
  captured inputs' cudaIpc handles exchanged and written into the pointer table (torch's expandable
  segments would take SGLang's VMM path instead, which is not reproduced: admission refuses them);
- ``close`` = ``close`` (564-570).

The algorithm per size is SGLang's (``custom_v2_dispatch.pick`` over the table): on an H200 (SM90)
``1shot_push`` up to ``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB`` (16 MiB) at TP2, and above the table's
``1shot_push`` threshold at TP4/TP8 ``2shot_pull``; larger messages go to NCCL (``size_unavailable``).
The environment variables SGLang reads for it (``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB``,
``SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_{PULL,PUSH}_SIZE_KB``) are read through SGLang's own registry.

Lamport-style: ``1shot_push`` and ``2shot_push`` (``sglang/kernels/jit/csrc/distributed/
custom_all_reduce.cuh:139-321``) store each 16-byte vector into the peers' push slots with any +0.0
pair rewritten to -0.0, the reader polls until no slot holds the all-zero "empty" marker, then writes
the marker back over exactly the vectors it read, in two alternating slot halves; so ``lamport`` is
true and the worker times the size transitions (unlike TRT-LLM's, this kernel leaves no larger
message's slots to clear on a later call, which the transitions measure). The pull algorithms use
per-block semaphores instead.

The norm site with fusion off (``custom_v2_sglang+rmsnorm``): where no fused kernel takes the
batch (``srt/layers/layer_boundary/prepare.py:361-411``; FlashInfer's only when fusion is enabled,
``layernorm.py:208-275``), the layer boundary completes the sum with ``group.all_reduce``
(``layer_boundary/output.py:90-96``, the path above) and hands the result to the norm step, whose
``RMSNorm.forward_cuda`` runs one ``fused_add_rmsnorm(x, residual, weight, eps)`` on it
(``layernorm.py:617-628``). The composite does the same with the trials' one add+RMSNorm kernel
(``_rmsnorm``, the ``nccl`` baseline's), on the kernel's own output (``prepare_result``).

What differs from SGLang, and why (the trial's buffers: ``base.TrialBuffers``):

- the kernel allocates its output (``ffi::empty_like``, from torch's allocator: inside a graph, the
  graph's pool), while a trial reads the result from ``buffers.out``: eager calls copy it there, and
  a captured graph copies it once, after its first call (K calls of one graph are idempotent), so a
  timed replay of K calls carries 1/K of one copy per call (K: that graph's calls). The ``+rmsnorm``
  composite reads the kernel's own output (``prepare_result``), as SGLang's norm does, with no copy;
- where the kernel reduces its input in place (``2shot_pull`` in a graph, TP4 and up), SGLang reduces
  the GEMM's output tensor; the trial's input must stay intact (the reference is computed from it,
  and K calls of a graph must see the same input), so each call first copies it into the registered
  buffer (``buffers.out``, or a private one for the composite): one copy per call SGLang does not make;
- the setup collectives run on the trial's process group, SGLang's on its CPU (gloo) group.

Admission: a CUDA device, sglang 0.5.23 importable, the multicast safety variables (the
symmetric-memory rendezvous maps a multicast object wherever the fabric offers one) unless
``--allow-multicast``, no expandable segments, a world size in v2's table for this GPU (SM90: 2-8;
SM100/SM107: 2-8 and 16; other GPUs get SGLang's default table, 2-16), every pair on NVLink, bf16 /
fp16 / fp32; per size, what ``should_custom_ar`` accepts (whole 16-byte vectors, within v2's limits),
and not a size SGLang sends over multicast unless multicast is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from topo_gate.profile.schema import PLAIN_PATTERN

from . import custom_v2_bundle as bundle
from . import custom_v2_dispatch as dispatch
from ._admission import first_reason, multicast_unsafe, needs_cuda
from .base import Backend, TrialBuffers


def expandable_segments(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether torch's caching allocator maps memory with expandable (VMM) segments."""
    config = environ.get("PYTORCH_CUDA_ALLOC_CONF") or environ.get("PYTORCH_ALLOC_CONF") or ""
    return any(
        part.strip().lower().replace(" ", "") == "expandable_segments:true" for part in config.split(",")
    )


class _Sglang:
    """The SGLang modules the backend calls, imported once ``custom_v2_bundle.activate`` succeeded:
    the tuning table at admission (it decides the world sizes), the kernels' bindings at setup."""

    def __init__(self) -> None:
        from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as configs
        from sglang.srt.environ import envs

        self.configs = configs
        self.envs = envs

    def kernels(self) -> Any:
        from sglang.kernels import kernel_api_logging
        from sglang.kernels.ops.communication import all_reduce

        self.log_level = kernel_api_logging._KERNEL_API_LOG_LEVEL
        self.algos = {algo.algo_name: algo for algo in all_reduce.AllReduceAlgo}
        return all_reduce


def _allocate_symmetric_memory(nbytes: int, device: torch.device, group: Any) -> tuple[torch.Tensor, Any]:
    """``custom_all_reduce_v2.py:85-100``, unchanged."""
    from torch._C._distributed_c10d import _SymmetricMemory

    if torch.__version__ < "2.11.0":
        import torch.distributed._symmetric_memory as torch_symm_mem

        torch_symm_mem.enable_symm_mem_for_group(group.group_name)
    tensor = _SymmetricMemory.empty_strided_p2p((nbytes,), [1], torch.uint8, device, group.group_name)
    return tensor, _SymmetricMemory.rendezvous(tensor)


class CustomV2Sglang(Backend):
    name = "custom_v2_sglang"
    patterns = (PLAIN_PATTERN,)
    lamport = True

    def unavailable(self) -> str | None:
        ctx = self.ctx
        return first_reason(
            lambda: needs_cuda(ctx),
            bundle.activate,
            lambda: multicast_unsafe(ctx),
            lambda: (
                "PyTorch's expandable segments are on: SGLang registers graph inputs through its VMM "
                "path then, which this backend does not reproduce"
                if expandable_segments()
                else None
            ),
            lambda: dispatch.v2_unavailable(
                world_size=ctx.world_size,
                supported_world_sizes=tuple(self._sglang().configs.get_supported_world_sizes()),
                group_class=ctx.group_class,
                dtype=str(ctx.dtype).removeprefix("torch."),
            ),
        )

    def _sglang(self) -> _Sglang:
        if not hasattr(self, "_modules"):
            self._modules = _Sglang()
        return self._modules

    def setup(self) -> None:
        sglang, ctx = self._sglang(), self.ctx
        envs = sglang.envs
        world_size, rank = ctx.world_size, ctx.rank
        self._workspace = dispatch.size_workspace(
            sglang.configs.get_all_reduce_config(world_size),
            world_size,
            max_size=envs.SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB.get() * dispatch.KIB,
            force_pull_kb=envs.SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PULL_SIZE_KB.get(),
            force_push_kb=envs.SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PUSH_SIZE_KB.get(),
        )
        workspace = self._workspace
        config = workspace.config
        # Device-side pointer table: one row of world_size pointers per captured pull-algorithm input.
        self._graph_params = torch.zeros(
            (dispatch.MAX_GRAPH_INPUTS, world_size), dtype=torch.uint64, device=ctx.device
        )
        # _init_workspace (265-349): one symmetric allocation, [2 * TP push slots | pull | semaphores].
        push_bytes = 2 * world_size * workspace.max_push_size
        total = workspace.symmetric_bytes(world_size)
        self._symm_tensor, symm_mem = _allocate_symmetric_memory(total, ctx.device, ctx.group)
        slabs = [symm_mem.get_buffer(i, [total], torch.uint8) for i in range(world_size)]
        # The push slots' "empty" markers and the semaphores must start zeroed on every rank.
        slabs[rank].zero_()
        torch.cuda.synchronize()
        dist.barrier(group=ctx.group)

        def slice_all(shape: list[int], offset: int) -> list[torch.Tensor]:
            nbytes = 1
            for dim in shape:
                nbytes *= dim
            return [slab[offset : offset + nbytes].view(shape) for slab in slabs]

        multicast_ptr = int(symm_mem.multicast_ptr)
        self._has_multicast = multicast_ptr != 0

        def mc_at(offset: int) -> int | None:
            return multicast_ptr + offset if self._has_multicast else None

        ops = sglang.kernels()
        self._push_counter = torch.zeros((config.num_push_blocks,), dtype=torch.uint32, device=ctx.device)
        push = ops.PushPlane(
            rank,
            world_size,
            workspaces=slice_all([2 * world_size, workspace.max_push_size], 0),
            counter=self._push_counter.view(-1, 1).view(torch.uint8),
            mc_workspace=mc_at(0),
        )
        pull = None
        if workspace.pull_enabled:
            pull_offset, sem_offset = push_bytes, push_bytes + workspace.max_pull_size
            pull = ops.PullPlane(
                rank,
                world_size,
                workspaces=slice_all([workspace.max_pull_size], pull_offset),
                semaphores=slice_all([config.num_pull_blocks, dispatch.SEMAPHORE_BYTES], sem_offset),
                mc_workspace=mc_at(pull_offset),
                mc_semaphore=mc_at(sem_offset),
            )
        self._config = config
        if not self._has_multicast or not workspace.pull_enabled:
            self._config = dispatch.without_multicast(config)
        self._obj = ops.Communicator(push=push, pull=pull)
        if self._config.num_mc_blocks is not None:
            self._obj.set_pull_multicast_blocks(self._config.num_mc_blocks)
        dist.barrier(group=ctx.group)
        self._ipc = ops.IPCManager()
        self._ops = ops
        self._module = ops.get_all_reduce_module(ctx.dtype, world_size)
        self._graph_inputs: list[tuple[int, int]] = []  # (data_ptr, nbytes) awaiting registration
        self._graph_counter = 0
        self._copied_in_capture = False

    def size_unavailable(self, tokens: int) -> str | None:
        return dispatch.v2_size_unavailable(
            nbytes=tokens * self.ctx.hidden * self.ctx.dtype.itemsize,
            tuned=self._workspace.config,
            runtime=self._config,
            allow_multicast=self.ctx.allow_multicast,
        )

    def _sequence(self, x: torch.Tensor, stage: torch.Tensor) -> Callable[[], torch.Tensor]:
        """SGLang's ``custom_all_reduce(x)``, returning its output; ``stage`` is the registered buffer
        an in-place graph algorithm reduces (x copied in first: the module docstring says why)."""
        nbytes = x.numel() * x.element_size()
        graph = dispatch.pick(self._config, nbytes, graph=True)
        eager = dispatch.pick(self._config, nbytes, graph=False)
        assert graph is not None and eager is not None, "size_unavailable admits only sizes v2 takes"
        sglang, obj, module = self._sglang(), self._obj, self._module
        graph_algo = sglang.algos[graph.algo]
        custom_all_reduce = self._ops.custom_all_reduce
        log_level = sglang.log_level

        def call() -> torch.Tensor:
            if torch.cuda.is_current_stream_capturing():
                source = x
                if dispatch.in_place(graph):
                    stage.copy_(x)
                    source = stage
                row = self._allocate_graph_row(source, nbytes) if graph.use_graph else None
                return custom_all_reduce(
                    obj, source, algo=graph_algo, graph_params=row, use_multicast=graph.use_multicast
                )
            if log_level:  # SGLang skips its eager plan cache while kernel API logging is on
                return custom_all_reduce(
                    obj, x, algo=sglang.algos[eager.algo], use_multicast=eager.use_multicast
                )
            out = module.all_reduce(obj, x, eager.algo, None, eager.use_multicast)
            return out if isinstance(out, torch.Tensor) else torch.from_dlpack(out)

        return call

    def _allocate_graph_row(self, source: torch.Tensor, nbytes: int) -> torch.Tensor:
        index = self._graph_counter + len(self._graph_inputs)
        assert index < dispatch.MAX_GRAPH_INPUTS, "Graph input table overflow"
        self._graph_inputs.append((source.data_ptr(), nbytes))
        return self._graph_params[index]

    def prepare_result(self, tokens: int, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return self._sequence(x, torch.empty_like(x))

    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        out = buffers.out
        reduce = self._sequence(buffers.x, out)

        def call() -> None:
            result = reduce()
            if result.data_ptr() == out.data_ptr():
                return  # reduced in place in ``out``
            if not torch.cuda.is_current_stream_capturing():
                out.copy_(result)
            elif not self._copied_in_capture:
                out.copy_(result)  # once per graph: its K calls are idempotent
                self._copied_in_capture = True

        return call

    def after_capture(self) -> None:
        """``capture()``'s exit: the captured inputs' peer addresses into the pointer table."""
        self._copied_in_capture = False
        if not self._graph_inputs:  # every rank captured the same algorithms, so all return here alike
            return
        ptrs = [ptr for ptr, _ in self._graph_inputs]
        handles = self._ipc.batch_get_handles(ptrs)
        local = [(list(handle), int(offset)) for handle, offset in handles]
        gathered: list[Any] = [None] * self.ctx.world_size
        dist.all_gather_object(gathered, local, group=self.ctx.group)
        per_rank = [
            ptrs if rank == self.ctx.rank else list(self._ipc.batch_open_handles(remote))
            for rank, remote in enumerate(gathered)
        ]
        rows = torch.tensor(
            [[per_rank[rank][i] for rank in range(self.ctx.world_size)] for i in range(len(ptrs))],
            dtype=torch.uint64,
            device=self.ctx.device,
        )
        self._graph_params[self._graph_counter : self._graph_counter + len(ptrs)].copy_(rows)
        torch.cuda.synchronize()  # the rows must be visible before any (PDL-chained) replay
        self._graph_counter += len(ptrs)
        self._graph_inputs.clear()

    def close(self) -> None:
        torch.cuda.synchronize(self.ctx.device)
        self._ipc.destroy()
        dist.barrier(group=self.ctx.group)
        del self._obj  # the pointer holder goes before the workspace tensors (SGLang's order)
        del self._symm_tensor
