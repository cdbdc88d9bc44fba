"""The raw answers NVML gave, one field per query: a value, or ``Unknown`` saying why there is none.

These dataclasses are what a capture stores and what the model reads. They hold NVML's own numbers
(enums, bytes, raw version integers) so a capture replays exactly; interpreting them is the model's
job. Pure data: no pynvml, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar, Union

T = TypeVar("T")


class UnknownReason(str, Enum):
    """Why NVML gave no value. Each maps to one family of NVML errors (see ``nvml.py``)."""

    NOT_SUPPORTED = "not_supported"  # the GPU/driver does not support the query
    NO_PERMISSION = "no_permission"  # the query needs privileges this process lacks
    FUNCTION_NOT_FOUND = "function_not_found"  # the driver (or binding) predates the function
    GPU_LOST = "gpu_lost"  # the GPU fell off the bus mid-collection
    LIBRARY_NOT_FOUND = "library_not_found"  # no libnvidia-ml / driver not loaded
    ARGUMENT_ERROR = "argument_error"  # NVML or ctypes rejected the arguments (e.g. link index too high)
    OTHER = "other"  # any other NVML error; the detail names it
    NOT_RECORDED = "not_recorded"  # the capture predates the question (an older topo-gate recorded it)


@dataclass(frozen=True)
class Unknown(Generic[T]):
    """No value, and why. ``detail`` is the query and NVML's own message, for humans."""

    reason: UnknownReason
    detail: str

    def __str__(self) -> str:
        return f"unknown ({self.reason.value}: {self.detail})"


Answer = Union[T, Unknown]  # noqa: UP007 -- a generic alias; `T | Unknown` is not subscriptable on 3.10


def known(answer: object) -> bool:
    """True when NVML answered with a value."""
    return not isinstance(answer, Unknown)


@dataclass(frozen=True)
class SystemAnswers:
    driver: Answer[str]  # "580.159.04"
    cuda_driver: Answer[int]  # 13000 for CUDA 13.0
    nvml: Answer[str]  # "13.580.159.04"


@dataclass(frozen=True)
class NvLinkAnswers:
    link: int
    state: Answer[int]  # 1 active, 0 inactive
    version: Answer[int]  # NVML_NVLINK_VERSION_* (6 = NVLink 4.0)
    remote_type: Answer[int]  # NVML_NVLINK_DEVICE_TYPE_*: 0 GPU, 1 IBM NPU, 2 NVSwitch, 255 unknown
    remote_bus_id: Answer[str]  # "FFFFFFFF:FF:FF.0" inside VMs: never key anything on it alone


@dataclass(frozen=True)
class FabricAnswers:
    state: int  # NVML_GPU_FABRIC_STATE_*: 3 completed
    status: int  # an nvmlReturn_t; 0 success
    clique: int
    cluster_uuid: str  # 32 hex digits; all zero = no multi-node NVLink domain


@dataclass(frozen=True)
class MigDeviceAnswers:
    slot: int  # index passed to nvmlDeviceGetMigDeviceHandleByIndex
    name: Answer[str]
    uuid: Answer[str]
    memory_total: Answer[int]


@dataclass(frozen=True)
class GpuAnswers:
    index: int  # NVML index (= PCI bus order)
    name: Answer[str]
    uuid: Answer[str]
    bus_id: Answer[str]
    cuda_cc: Answer[tuple[int, int]]  # read through NVML so probing creates no CUDA context
    memory_total: Answer[int]  # bytes
    mig_mode: Answer[tuple[int, int]]  # (current, pending)
    mig_devices: tuple[MigDeviceAnswers, ...]
    pcie_gen_current: Answer[int]
    pcie_gen_max: Answer[int]
    pcie_width_current: Answer[int]
    pcie_width_max: Answer[int]
    numa_node: Answer[int]
    cpu_affinity: Answer[str]  # Linux cpulist, e.g. "0-31,64-95"
    nvlink_link_count: Answer[int]  # NVML_FI_DEV_NVLINK_LINK_COUNT; bounds the link scan when known
    # Links scanned; when the scan stopped early, the last entry's Unknown state says why.
    nvlinks: tuple[NvLinkAnswers, ...]
    fabric: Answer[FabricAnswers]
    # What the GPU was doing when it was read, not what it is: a probe refuses a busy GPU (its trials
    # would time someone else's load too). Left out of the fingerprint, as the node's class is not.
    compute_processes: Answer[int] = Unknown(UnknownReason.NOT_RECORDED, "not asked when this was recorded")
    utilization_gpu: Answer[int] = Unknown(UnknownReason.NOT_RECORDED, "not asked when this was recorded")


@dataclass(frozen=True)
class PairAnswers:
    """Answers for the ordered pair (a, b): P2P status per capability and the PCIe common ancestor."""

    a: int
    b: int
    p2p_read: Answer[int]  # NVML_P2P_STATUS_*: 0 OK
    p2p_write: Answer[int]
    p2p_nvlink: Answer[int]
    p2p_atomics: Answer[int]
    p2p_pci: Answer[int]
    common_ancestor: Answer[int]  # NVML_TOPOLOGY_*: 10 PIX ... 50 SYS


@dataclass(frozen=True)
class Capture:
    """Everything one collection saw, plus where and by what it was recorded."""

    system: SystemAnswers
    gpus: tuple[GpuAnswers, ...]
    pairs: tuple[PairAnswers, ...]
    device_count: Answer[int]
    created: str  # ISO 8601 UTC
    tool_version: str
    hostname: str | None
    binding: str | None  # "nvidia-ml-py 13.615.71"
    synthetic: bool = False  # hand-written fixture, not recorded by the tool
    note: str | None = None
