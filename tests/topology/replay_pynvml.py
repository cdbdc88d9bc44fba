"""A stand-in for the ``pynvml`` module that answers from a recorded capture.

It lets ``topo_gate.topology.nvml.collect`` run its real code paths without a GPU: the same function
names and return shapes as nvidia-ml-py, and *the binding's own exception classes* for every unknown
answer (``NVMLError_NotSupported``, ``NVMLError_FunctionNotFound``, ...). It also reproduces the traps
``nvml.py`` must avoid, so a regression fails a test instead of crashing a node:

- a P2P capability index given as a tuple raises ``ctypes.ArgumentError`` (the binding's READ constant);
- a link index past the recorded links raises ``NVMLError_InvalidArgument``;
- fabric info not passed by reference raises ``TypeError`` (the real driver segfaults);
- ``crash_on=(function, gpu)`` really dies with SIGSEGV in that query (for crash isolation tests).

Used in-process (``ReplayNvml(capture)``) and as a module a child process imports by name
(``make_replay_module``), which is how ``collect_isolated`` is tested.
"""

from __future__ import annotations

import ctypes
import types
from pathlib import Path
from typing import Any

import pynvml as real  # noqa: TID251 -- the fake raises the real binding's exception classes

from topo_gate.topology.answers import Capture, GpuAnswers, Unknown, UnknownReason
from topo_gate.topology.capture import load_capture

_ERROR_CODE = {
    UnknownReason.NOT_SUPPORTED: real.NVML_ERROR_NOT_SUPPORTED,
    UnknownReason.NO_PERMISSION: real.NVML_ERROR_NO_PERMISSION,
    UnknownReason.FUNCTION_NOT_FOUND: real.NVML_ERROR_FUNCTION_NOT_FOUND,
    UnknownReason.GPU_LOST: real.NVML_ERROR_GPU_IS_LOST,
    UnknownReason.LIBRARY_NOT_FOUND: real.NVML_ERROR_LIBRARY_NOT_FOUND,
    UnknownReason.ARGUMENT_ERROR: real.NVML_ERROR_INVALID_ARGUMENT,
    UnknownReason.OTHER: real.NVML_ERROR_UNKNOWN,
    # A capture older than the question: replayed as the driver refusing it.
    UnknownReason.NOT_RECORDED: real.NVML_ERROR_NOT_SUPPORTED,
}


def error_for(unknown: Unknown) -> Exception:
    """The exception the binding would have raised for this recorded unknown."""
    if unknown.reason is UnknownReason.ARGUMENT_ERROR and "ctypes.ArgumentError" in unknown.detail:
        return ctypes.ArgumentError(unknown.detail)
    return real.NVMLError(_ERROR_CODE[unknown.reason])


def _answer(value: Any) -> Any:
    if isinstance(value, Unknown):
        raise error_for(value)
    return value


class _Handle:
    def __init__(self, gpu: GpuAnswers, mig_slot: int | None = None) -> None:
        self.gpu = gpu
        self.mig_slot = mig_slot


class ReplayNvml(types.ModuleType):
    """``pynvml`` answering from ``capture``. ``max_links`` mimics the binding version (36 or 18)."""

    def __init__(
        self,
        capture: Capture,
        *,
        max_links: int = 36,
        library_missing: bool = False,
        crash_on: tuple[str, int] | None = None,
    ) -> None:
        super().__init__("replay_pynvml")
        self.capture = capture
        self.library_missing = library_missing
        self.crash_on = crash_on
        self.calls: list[str] = []
        self.BINDING_DESCRIPTION = f"replay of a capture ({capture.binding})"
        self.NVML_NVLINK_MAX_LINKS = max_links
        self.NVML_FI_DEV_NVLINK_LINK_COUNT = real.NVML_FI_DEV_NVLINK_LINK_COUNT
        self.NVML_P2P_CAPS_INDEX_READ = real.NVML_P2P_CAPS_INDEX_READ  # the tuple trap, kept as is
        self.c_nvmlGpuFabricInfoV_t = real.c_nvmlGpuFabricInfoV_t
        for name in dir(real):
            if name.startswith("NVMLError"):
                setattr(self, name, getattr(real, name))
        self._pairs = {(pair.a, pair.b): pair for pair in capture.pairs}

    def _enter(self, function: str, handle: _Handle | None = None) -> None:
        self.calls.append(function)
        if self.crash_on is not None and handle is not None and self.crash_on == (function, handle.gpu.index):
            ctypes.string_at(0)  # a real SIGSEGV, like a driver fault

    # -- lifecycle and system ---------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self.library_missing:
            raise real.NVMLError(real.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return _answer(self.capture.system.driver)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return _answer(self.capture.system.cuda_driver)

    def nvmlSystemGetNVMLVersion(self) -> bytes:
        self._enter("nvmlSystemGetNVMLVersion")
        return _answer(self.capture.system.nvml).encode()  # old bindings return bytes

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return _answer(self.capture.device_count)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        gpu = self.capture.gpus[index]
        # A GPU recorded as unreachable has the handle's error in every field.
        if isinstance(gpu.uuid, Unknown) and gpu.uuid == gpu.name == gpu.bus_id:
            raise error_for(gpu.uuid)
        return _Handle(gpu)

    # -- per GPU ----------------------------------------------------------------------------------

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        self._enter("nvmlDeviceGetName", handle)
        return _answer(self._mig(handle).name if handle.mig_slot is not None else handle.gpu.name)

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        self._enter("nvmlDeviceGetUUID", handle)
        return _answer(self._mig(handle).uuid if handle.mig_slot is not None else handle.gpu.uuid)

    def nvmlDeviceGetPciInfo(self, handle: _Handle) -> Any:
        self._enter("nvmlDeviceGetPciInfo", handle)
        # str, like the binding: its _PrintableStructure decodes char arrays (pynvml.py, nvidia-ml-py 12+).
        return types.SimpleNamespace(busId=_answer(handle.gpu.bus_id))

    def nvmlDeviceGetCudaComputeCapability(self, handle: _Handle) -> tuple[int, int]:
        self._enter("nvmlDeviceGetCudaComputeCapability", handle)
        return _answer(handle.gpu.cuda_cc)

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo", handle)
        total = self._mig(handle).memory_total if handle.mig_slot is not None else handle.gpu.memory_total
        return types.SimpleNamespace(total=_answer(total), free=0, used=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        return [types.SimpleNamespace(pid=0, usedGpuMemory=0)] * _answer(handle.gpu.compute_processes)

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates", handle)
        return types.SimpleNamespace(gpu=_answer(handle.gpu.utilization_gpu), memory=0)

    def nvmlDeviceGetMigMode(self, handle: _Handle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", handle)
        return list(_answer(handle.gpu.mig_mode))

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", handle)
        return max([7] + [mig.slot + 1 for mig in handle.gpu.mig_devices])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: _Handle, slot: int) -> _Handle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        if not any(mig.slot == slot for mig in handle.gpu.mig_devices):
            raise real.NVMLError(real.NVML_ERROR_NOT_FOUND)
        return _Handle(handle.gpu, slot)

    def _mig(self, handle: _Handle) -> Any:
        return next(mig for mig in handle.gpu.mig_devices if mig.slot == handle.mig_slot)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        return _answer(handle.gpu.pcie_gen_current)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        return _answer(handle.gpu.pcie_gen_max)

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkWidth", handle)
        return _answer(handle.gpu.pcie_width_current)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkWidth", handle)
        return _answer(handle.gpu.pcie_width_max)

    def nvmlDeviceGetNumaNodeId(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetNumaNodeId", handle)
        return _answer(handle.gpu.numa_node)

    def nvmlDeviceGetCpuAffinity(self, handle: _Handle, cpu_set_words: int) -> list[int]:
        # Returns the whole recorded mask even when the replaying machine has fewer CPUs.
        self._enter("nvmlDeviceGetCpuAffinity", handle)
        words: list[int] = []
        for part in _answer(handle.gpu.cpu_affinity).split(","):
            first, _, last = part.partition("-")
            for cpu in range(int(first), int(last or first) + 1):
                while len(words) <= cpu // 64:
                    words.append(0)
                words[cpu // 64] |= 1 << (cpu % 64)
        return words + [0] * max(0, cpu_set_words - len(words))

    def nvmlDeviceGetFieldValues(self, handle: _Handle, field_ids: list[int]) -> Any:
        self._enter("nvmlDeviceGetFieldValues", handle)
        count = handle.gpu.nvlink_link_count
        if isinstance(count, Unknown) and count.reason is UnknownReason.FUNCTION_NOT_FOUND:
            raise error_for(count)
        values = (real.c_nvmlFieldValue_t * len(field_ids))()
        for value, field_id in zip(values, field_ids, strict=True):
            assert field_id == real.NVML_FI_DEV_NVLINK_LINK_COUNT, f"replay has no field {field_id}"
            value.fieldId = field_id
            # NVML reports per-field failures in the entry, not as an error of the call.
            if isinstance(count, Unknown):
                value.nvmlReturn = _ERROR_CODE[count.reason]
            else:
                value.value.uiVal = count
        return values

    # -- NVLink -----------------------------------------------------------------------------------

    def _link(self, handle: _Handle, link: int) -> Any:
        for recorded in handle.gpu.nvlinks:
            if recorded.link == link:
                return recorded
        raise real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetNvLinkState(self, handle: _Handle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkState", handle)
        return _answer(self._link(handle, link).state)

    def nvmlDeviceGetNvLinkVersion(self, handle: _Handle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkVersion", handle)
        return _answer(self._link(handle, link).version)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: _Handle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkRemoteDeviceType", handle)
        return _answer(self._link(handle, link).remote_type)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: _Handle, link: int) -> Any:
        self._enter("nvmlDeviceGetNvLinkRemotePciInfo", handle)
        return types.SimpleNamespace(busId=_answer(self._link(handle, link).remote_bus_id))

    def nvmlDeviceGetGpuFabricInfoV(self, handle: _Handle, info_ref: Any) -> int:
        self._enter("nvmlDeviceGetGpuFabricInfoV", handle)
        if type(info_ref).__name__ != "CArgObject":
            raise TypeError("fabric info passed by value: the real driver segfaults on this")
        info = info_ref._obj
        if info.version == 0:
            raise real.NVMLError(real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        fabric = _answer(handle.gpu.fabric)
        info.state, info.status, info.cliqueId = fabric.state, fabric.status, fabric.clique
        ctypes.memmove(info.clusterUuid, bytes.fromhex(fabric.cluster_uuid), 16)
        return real.NVML_SUCCESS

    # -- pairs ------------------------------------------------------------------------------------

    def nvmlDeviceGetP2PStatus(self, a: _Handle, b: _Handle, index: Any) -> int:
        self._enter("nvmlDeviceGetP2PStatus", a)
        if not isinstance(index, int):
            raise ctypes.ArgumentError("argument 3: TypeError: Don't know how to convert parameter 3")
        pair = self._pairs[(a.gpu.index, b.gpu.index)]
        field = ["p2p_read", "p2p_write", "p2p_nvlink", "p2p_atomics", "p2p_pci"][index]
        return _answer(getattr(pair, field))

    def nvmlDeviceGetTopologyCommonAncestor(self, a: _Handle, b: _Handle) -> int:
        self._enter("nvmlDeviceGetTopologyCommonAncestor", a)
        return _answer(self._pairs[(a.gpu.index, b.gpu.index)].common_ancestor)


def make_replay_module(folder: Path, capture_path: Path, crash_on: tuple[str, int] | None = None) -> str:
    """Write a module into ``folder`` that *is* a replay of ``capture_path`` when imported; return its name.

    A child process started by ``collect_isolated(binding=name)`` imports it as its NVML binding.
    """
    name = "replay_binding"
    (folder / f"{name}.py").write_text(
        "import sys\n"
        "from replay_pynvml import ReplayNvml\n"
        "from topo_gate.topology.capture import load_capture\n"
        f"sys.modules[__name__] = ReplayNvml(load_capture({str(capture_path)!r}), crash_on={crash_on!r})\n"
    )
    return name


def replay_of(path: Path, **options: Any) -> ReplayNvml:
    return ReplayNvml(load_capture(path), **options)
