"""Admission of the GPU backends, answered without a GPU: the pure rules and the CPU-side refusals.

The rules are data (one row per case, with the reason expected); hypothesis checks the two-shot and
workspace rules over every size.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch  # noqa: TID251 -- the admission rules take torch dtypes and contexts
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.trials.backends import BACKENDS_BY_NAME, load_backend
from topo_gate.trials.backends._admission import multicast_unsafe
from topo_gate.trials.backends.base import BackendContext
from topo_gate.trials.backends.pcie_ipc import pcie_ipc_unavailable
from topo_gate.trials.backends.trtllm import trtllm_size_unavailable, trtllm_unavailable
from topo_gate.trials.backends.vllm_custom import vllm_custom_unavailable

GPU_BACKENDS = (
    "nccl", "trtllm_oneshot", "trtllm_twoshot", "trtllm_fused_oneshot", "trtllm_fused_twoshot",
    "symm_mem_oneshot", "symm_mem_twoshot", "vllm_custom", "pcie_ipc",
)  # fmt: skip
BF16 = torch.bfloat16

# (sm, world_size, hidden, fused) -> expected reason fragment, None = admitted
TRTLLM_CASES = [
    (90, 2, 7168, False, None),
    (90, 2, 7168, True, None),
    (100, 8, 4096, True, None),
    (120, 2, 7168, False, None),  # plain TRT-LLM all-reduce runs on SM120 (the SGLang TP2 change)
    (120, 2, 7168, True, "SM90/SM10x only, found SM120"),
    (80, 2, 7168, False, "need SM90 or newer, found SM80"),
    (90, 3, 7168, False, "TP 3 not supported"),
    (90, 2, 7164, False, "not a whole number of 16-byte vectors"),
]


@pytest.mark.parametrize(("sm", "world_size", "hidden", "fused", "expected"), TRTLLM_CASES)
def test_trtllm_whole_run_admission(
    sm: int, world_size: int, hidden: int, fused: bool, expected: str | None
) -> None:
    reason = trtllm_unavailable(sm=sm, world_size=world_size, hidden=hidden, dtype=BF16, fused=fused)
    assert reason == expected if expected is None else expected in reason


@given(
    tokens=st.integers(1, 8192), world_size=st.sampled_from([2, 4, 8, 16]), max_tokens=st.integers(1, 8192)
)
def test_trtllm_size_admission(tokens: int, world_size: int, max_tokens: int) -> None:
    def size_reason(oneshot: bool) -> str | None:
        return trtllm_size_unavailable(
            tokens=tokens,
            world_size=world_size,
            hidden=4096,
            dtype=BF16,
            max_tokens=max_tokens,
            oneshot=oneshot,
        )

    twoshot = size_reason(oneshot=False)
    if tokens <= world_size:
        assert twoshot == f"two-shot needs tokens > TP (tokens {tokens}, TP {world_size})"
    oneshot = size_reason(oneshot=True)
    fits = tokens <= max_tokens and tokens * 4096 * 2 * world_size <= 2**31 - 2**21
    assert (oneshot is None) == fits
    assert (twoshot is None) == (world_size < tokens <= max_tokens)  # no int32 limit: it moves 1/TP per rank


@pytest.mark.parametrize(
    ("world_size", "group_class", "expected"),
    [
        (2, None, None),  # TP2 runs the one-stage kernel whatever the fabric
        (2, "pcie-hostbridge", None),
        (4, "nvswitch", None),
        (8, "nvlink-mesh", None),
        (4, "pcie-switch", "needs every GPU pair on NVLink, group class is pcie-switch"),
        (4, None, "group class is unknown"),
        (3, "nvswitch", "TP 3 not supported"),
    ],
)
def test_vllm_custom_admission(world_size: int, group_class: str | None, expected: str | None) -> None:
    reason = vllm_custom_unavailable(world_size=world_size, group_class=group_class, dtype=BF16)
    assert reason == expected if expected is None else expected in reason


@pytest.mark.parametrize(
    ("world_size", "dtype", "expected"),
    [
        (2, BF16, None),
        (8, torch.float16, None),
        (6, BF16, "TP 6 not supported"),
        (2, torch.float32, "bf16 or fp16"),
    ],
)
def test_pcie_ipc_admission(world_size: int, dtype: torch.dtype, expected: str | None) -> None:
    reason = pcie_ipc_unavailable(world_size=world_size, dtype=dtype)
    assert reason == expected if expected is None else expected in reason


def cpu_context(pattern: str = "allreduce", allow_multicast: bool = False) -> BackendContext:
    return BackendContext(
        rank=0, world_size=2, local_rank=0, device=torch.device("cpu"), dtype=BF16, hidden=4096,
        max_tokens=64, pattern=pattern, allow_multicast=allow_multicast, group=None,
    )  # fmt: skip


def test_every_gpu_backend_is_registered_for_its_patterns() -> None:
    assert set(GPU_BACKENDS) <= set(BACKENDS_BY_NAME)
    assert load_backend("nccl").patterns == ("allreduce", "allreduce_rmsnorm")
    assert load_backend("trtllm_fused_oneshot").patterns == ("allreduce_rmsnorm",)


@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_gpu_backends_refuse_a_cpu_run_with_a_reason(name: str) -> None:
    backend = load_backend(name)(cpu_context(load_backend(name).patterns[0]))
    reason = backend.unavailable()
    flashinfer_backend = name not in ("nccl", "symm_mem_oneshot", "symm_mem_twoshot")
    if flashinfer_backend and importlib.util.find_spec("flashinfer") is None:
        assert reason == "flashinfer not installed"  # checked first: the most basic reason
    else:
        assert reason == "needs a CUDA device, the run is on cpu"


def test_shared_memory_setup_is_refused_without_the_safety_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("NVSHMEM_DISABLE_NVLS", "1")
    monkeypatch.delenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", raising=False)
    assert "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 is not set" in multicast_unsafe(cpu_context())
    assert multicast_unsafe(cpu_context(allow_multicast=True)) is None
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    assert multicast_unsafe(cpu_context()) is None
