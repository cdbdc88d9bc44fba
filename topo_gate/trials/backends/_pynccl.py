"""A second NCCL communicator driven through ctypes, for an out-of-place all-reduce.

Why not ``torch.distributed.all_reduce``: it is in-place, so measuring it on an input that must stay
intact needs a copy kernel in front of every call, which adds ~1-2 us at decode sizes and would
flatter every other backend. vLLM and SGLang run NCCL in CUDA graphs through exactly this kind of
wrapper (``PyNcclCommunicator``: ``ncclAllReduce(send, recv, ...)`` on the current stream), so this is
also the NCCL path the launcher falls back to. The library is the one torch already loaded
(``dlopen`` of the soname returns the loaded copy), so versions cannot differ.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch
import torch.distributed as dist

_NCCL_SONAME = "libnccl.so.2"
_NCCL_SUM = 0
#: ncclDataType_t values from nccl.h (stable since NCCL 2.10).
_NCCL_DTYPES = {torch.float16: 6, torch.float32: 7, torch.bfloat16: 9}


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]  # NCCL_UNIQUE_ID_BYTES


class NcclLibraryError(RuntimeError):
    """libnccl could not be loaded or returned an error."""


def load_nccl() -> ctypes.CDLL:
    """The NCCL library torch uses; raises ``NcclLibraryError`` with the loader's message."""
    try:
        lib = ctypes.CDLL(_NCCL_SONAME)
    except OSError as exc:
        raise NcclLibraryError(f"cannot load {_NCCL_SONAME}: {exc}") from exc
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, _UniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
        ctypes.c_void_p, ctypes.c_void_p,
    ]  # fmt: skip
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    return lib


class NcclCommunicator:
    """One NCCL communicator over the ranks of ``group`` (collective to create and to destroy)."""

    def __init__(self, group: Any, device: torch.device) -> None:
        self._lib = load_nccl()
        self._device = device
        rank, world_size = dist.get_rank(group), dist.get_world_size(group)
        unique_id = _UniqueId()
        if rank == 0:
            self._check(self._lib.ncclGetUniqueId(ctypes.byref(unique_id)))
        shared = [bytes(unique_id.internal)]
        dist.broadcast_object_list(shared, src=dist.get_global_rank(group, 0), group=group)
        ctypes.memmove(unique_id.internal, shared[0], len(shared[0]))
        self._comm = ctypes.c_void_p()
        with torch.cuda.device(device):
            self._check(self._lib.ncclCommInitRank(ctypes.byref(self._comm), world_size, unique_id, rank))

    def _check(self, result: int) -> None:
        if result != 0:
            message = self._lib.ncclGetErrorString(result).decode(errors="replace")
            raise NcclLibraryError(f"NCCL error {result}: {message}")

    def all_reduce(self, send: torch.Tensor, recv: torch.Tensor) -> None:
        """Sum ``send`` over the ranks into ``recv`` on the current stream (graph-capturable)."""
        stream = torch.cuda.current_stream(self._device).cuda_stream
        self._check(
            self._lib.ncclAllReduce(
                send.data_ptr(), recv.data_ptr(), send.numel(), _NCCL_DTYPES[send.dtype], _NCCL_SUM,
                self._comm, stream,
            )
        )  # fmt: skip

    def destroy(self) -> None:
        if self._comm:
            self._check(self._lib.ncclCommDestroy(self._comm))
            self._comm = ctypes.c_void_p()


def nccl_dtype_supported(dtype: torch.dtype) -> bool:
    return dtype in _NCCL_DTYPES
