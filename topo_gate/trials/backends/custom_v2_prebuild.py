"""Build SGLang's custom all-reduce v2 JIT modules ahead of a probe, and say what each build cost.

``custom_v2_sglang`` builds (or loads from ``SGLANG_JIT_CACHE_DIR``) three modules in its setup:
``communicator`` (the plane objects), ``cuda_ipc`` (the graph inputs' IPC exchange) and
``custom_all_reduce<dtype, TP>``. A cold build costs tens of seconds per worker start; this fills the
cache once on a GPU node (``scripts/sglang_v2_bundle.py prebuild``). SGLang's cache key covers the GPU
target, the ``nvcc`` and ``c++`` versions and the installed torch / tvm-ffi / flashinfer versions, so
a prebuilt cache is reused only by an identical environment; anything else rebuilds, correctly.

``with_flashinfer``: import ``flashinfer.comm`` and load its TRT-LLM module first, so the v2 modules
are built and loaded against whichever tvm-ffi FlashInfer brought (one process loads one tvm-ffi).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import custom_v2_bundle as bundle


def _timed(what: Callable[[], Any]) -> float:
    started = time.monotonic()
    what()
    return round(time.monotonic() - started, 3)


def cache_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def prebuild(
    *, world_sizes: Sequence[int] | None, dtypes: Sequence[str], with_flashinfer: bool
) -> dict[str, Any]:
    """Build every module; return seconds per step, the tvm-ffi in use and the cache's size."""
    reason = bundle.activate()
    if reason is not None:
        raise RuntimeError(reason)
    seconds: dict[str, float] = {}
    started = time.monotonic()
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: the JIT builds target the local GPU")
    seconds["import torch"] = round(time.monotonic() - started, 3)
    if with_flashinfer:

        def load_flashinfer() -> None:
            from flashinfer.comm.trtllm_ar import get_trtllm_comm_module

            get_trtllm_comm_module()

        seconds["flashinfer.comm + its trtllm module"] = _timed(load_flashinfer)
    ops: Any = None

    def import_kernels() -> None:
        nonlocal ops
        from sglang.kernels.ops.communication import all_reduce

        ops = all_reduce

    seconds["import sglang.kernels.ops.communication.all_reduce"] = _timed(import_kernels)
    from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as configs

    sizes = tuple(world_sizes or configs.get_supported_world_sizes())
    seconds["communicator"] = _timed(ops._init_communicator)
    seconds["cuda_ipc"] = _timed(ops._init_ipc_manager)
    for dtype in dtypes:
        for world_size in sizes:

            def build(dtype: str = dtype, world_size: int = world_size) -> None:
                ops.get_all_reduce_module(getattr(torch, dtype), world_size)

            seconds[f"custom_all_reduce<{dtype}, {world_size}>"] = _timed(build)
    cache = Path(os.path.expanduser(os.environ.get("SGLANG_JIT_CACHE_DIR") or "~/.cache/sglang/jit"))
    major, minor = torch.cuda.get_device_capability()
    return {
        "device": torch.cuda.get_device_name(),
        "capability": f"{major}.{minor}",
        "torch": torch.__version__,
        "tvm_ffi": bundle.tvm_ffi_in_use(),
        "flashinfer": getattr(sys.modules.get("flashinfer"), "__version__", None),
        "seconds": seconds,
        "cache": {"path": str(cache), "bytes": cache_bytes(cache) if cache.is_dir() else 0},
    }
