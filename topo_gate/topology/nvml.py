"""The only module that talks to NVML (through ``pynvml``, the nvidia-ml-py binding).

Every query goes through ``_Session.ask``, which returns the value or an ``Unknown`` naming why NVML
gave none -- never raises for an NVML error, so one unsupported query cannot hide the others. The
traps below were all met on real machines (see ``../shared/reference`` beside the repository):

- ``NVML_P2P_CAPS_INDEX_READ`` is the tuple ``(0,)`` in every binding release: pass the integer.
- ``NVML_NVLINK_MAX_LINKS`` is 36 in 13.x and 18 in 12.x, and asking past a GPU's last link raises:
  bound the scan by the ``NVML_FI_DEV_NVLINK_LINK_COUNT`` field when it is known, otherwise stop at
  the first link NVML rejects.
- ``nvmlDeviceGetGpuFabricInfoV`` takes the struct *by reference* with ``version`` set; passing it by
  value crashed a real process with SIGSEGV.
- Compute capability comes from NVML, not CUDA, so probing creates no CUDA context.
- NVML ignores ``CUDA_VISIBLE_DEVICES``; indices here are NVML's (PCI bus order). ``model.Node.cuda_order``
  maps them to CUDA ordinals.

``collect`` takes the binding as a parameter so tests can hand it a replay of a recorded capture and
run these exact code paths without a GPU.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import os
import socket
from collections.abc import Callable
from datetime import datetime, timezone
from types import ModuleType
from typing import Any

from topo_gate._version import __version__
from topo_gate.topology.answers import (
    Answer,
    Capture,
    FabricAnswers,
    GpuAnswers,
    MigDeviceAnswers,
    NvLinkAnswers,
    PairAnswers,
    SystemAnswers,
    Unknown,
    UnknownReason,
    known,
)
from topo_gate.topology.errors import NvmlUnavailable

__all__ = ["Answer", "Unknown", "UnknownReason", "collect", "P2P_CAPS"]

# NVML's nvmlGpuP2PCapsIndex_t values (C ABI, stable). Spelled out because the binding's READ
# constant is a tuple.
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}

_FIELD_NVLINK_LINK_COUNT = 91  # NVML_FI_DEV_NVLINK_LINK_COUNT; missing from very old bindings

# Called with (query label, None) before a query and (query label, answer) after it, so a parent
# process can name the query in flight when the driver kills this one.
Progress = Callable[[str, Any], None]


def collect(binding: ModuleType | None = None, progress: Progress | None = None) -> Capture:
    """Ask NVML everything topo-gate needs and return the raw answers.

    ``binding`` defaults to ``pynvml``; raises ``NvmlUnavailable`` when NVML cannot be initialised
    (no driver, no library). Everything after initialisation is recorded, known or not.
    """
    nvml = binding if binding is not None else importlib.import_module("pynvml")
    session = _Session(nvml, progress or (lambda label, answer: None))
    session.init()
    try:
        return session.collect()
    finally:
        session.shutdown()


class _Session:
    def __init__(self, nvml: ModuleType, progress: Progress) -> None:
        self.nvml = nvml
        self.progress = progress

    # -- the one defensive call -------------------------------------------------------------------

    def ask(self, label: str, function: str, *args: Any, convert: Callable[[Any], Any] = lambda v: v) -> Any:
        """Call ``nvml.<function>(*args)``; return ``convert(value)`` or an ``Unknown`` saying why not."""
        self.progress(label, None)
        call = getattr(self.nvml, function, None)
        if call is None:
            answer: Any = Unknown(
                UnknownReason.FUNCTION_NOT_FOUND, f"{label}: this nvidia-ml-py has no {function}"
            )
        else:
            try:
                answer = convert(call(*args))
            except self.nvml.NVMLError as error:
                answer = Unknown(self.reason(error), f"{label}: {type(error).__name__}: {error}")
            except ctypes.ArgumentError as error:
                answer = Unknown(UnknownReason.ARGUMENT_ERROR, f"{label}: ctypes.ArgumentError: {error}")
        self.progress(label, answer)
        return answer

    def reason(self, error: Exception) -> UnknownReason:
        nvml = self.nvml
        for error_class, reason in (
            (nvml.NVMLError_NotSupported, UnknownReason.NOT_SUPPORTED),
            (nvml.NVMLError_NoPermission, UnknownReason.NO_PERMISSION),
            (nvml.NVMLError_FunctionNotFound, UnknownReason.FUNCTION_NOT_FOUND),
            (nvml.NVMLError_GpuIsLost, UnknownReason.GPU_LOST),
            (nvml.NVMLError_LibraryNotFound, UnknownReason.LIBRARY_NOT_FOUND),
            (nvml.NVMLError_DriverNotLoaded, UnknownReason.LIBRARY_NOT_FOUND),
            (nvml.NVMLError_InvalidArgument, UnknownReason.ARGUMENT_ERROR),
        ):
            if isinstance(error, error_class):
                return reason
        return UnknownReason.OTHER

    # -- lifecycle --------------------------------------------------------------------------------

    def init(self) -> None:
        self.progress("nvmlInit()", None)
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as error:
            raise NvmlUnavailable(f"no NVIDIA driver/NVML found: {type(error).__name__}: {error}") from None
        self.progress("nvmlInit()", "ok")

    def shutdown(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass  # nothing to do about a failed shutdown; the process is about to report anyway

    # -- what is collected ------------------------------------------------------------------------

    def collect(self) -> Capture:
        system = SystemAnswers(
            driver=self.ask("nvmlSystemGetDriverVersion()", "nvmlSystemGetDriverVersion", convert=_text),
            cuda_driver=self.ask(
                "nvmlSystemGetCudaDriverVersion()", "nvmlSystemGetCudaDriverVersion", convert=int
            ),
            nvml=self.ask("nvmlSystemGetNVMLVersion()", "nvmlSystemGetNVMLVersion", convert=_text),
        )
        device_count = self.ask("nvmlDeviceGetCount()", "nvmlDeviceGetCount", convert=int)
        handles: list[Any] = []
        gpus: list[GpuAnswers] = []
        for index in range(device_count if known(device_count) else 0):
            handle = self.ask(f"nvmlDeviceGetHandleByIndex({index})", "nvmlDeviceGetHandleByIndex", index)
            handles.append(handle)
            gpus.append(self.gpu(index, handle) if known(handle) else _unreachable_gpu(index, handle))
        pairs = [
            self.pair(a, b, handles[a], handles[b])
            for a in range(len(handles))
            for b in range(len(handles))
            if a != b and known(handles[a]) and known(handles[b])
        ]
        return Capture(
            system=system,
            gpus=tuple(gpus),
            pairs=tuple(pairs),
            device_count=device_count,
            created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            tool_version=__version__,
            hostname=socket.gethostname(),
            binding=_binding_description(self.nvml),
        )

    def gpu(self, index: int, handle: Any) -> GpuAnswers:
        def ask(function: str, *args: Any, convert: Callable[[Any], Any] = lambda v: v) -> Any:
            return self.ask(f"{function}(gpu {index})", function, handle, *args, convert=convert)

        mig_mode = ask("nvmlDeviceGetMigMode", convert=lambda v: (int(v[0]), int(v[1])))
        link_count = self.nvlink_link_count(index, handle)
        return GpuAnswers(
            index=index,
            name=ask("nvmlDeviceGetName", convert=_text),
            uuid=ask("nvmlDeviceGetUUID", convert=_text),
            bus_id=ask("nvmlDeviceGetPciInfo", convert=lambda info: _text(info.busId)),
            cuda_cc=ask("nvmlDeviceGetCudaComputeCapability", convert=lambda v: (int(v[0]), int(v[1]))),
            memory_total=ask("nvmlDeviceGetMemoryInfo", convert=lambda info: int(info.total)),
            mig_mode=mig_mode,
            mig_devices=self.mig_devices(index, handle) if known(mig_mode) and mig_mode[0] == 1 else (),
            pcie_gen_current=ask("nvmlDeviceGetCurrPcieLinkGeneration", convert=int),
            pcie_gen_max=ask("nvmlDeviceGetMaxPcieLinkGeneration", convert=int),
            pcie_width_current=ask("nvmlDeviceGetCurrPcieLinkWidth", convert=int),
            pcie_width_max=ask("nvmlDeviceGetMaxPcieLinkWidth", convert=int),
            numa_node=ask("nvmlDeviceGetNumaNodeId", convert=int),
            cpu_affinity=ask("nvmlDeviceGetCpuAffinity", _cpu_set_words(), convert=_cpulist),
            nvlink_link_count=link_count,
            nvlinks=self.nvlinks(index, handle, link_count),
            fabric=self.fabric(index, handle),
            compute_processes=ask("nvmlDeviceGetComputeRunningProcesses", convert=len),
            utilization_gpu=ask("nvmlDeviceGetUtilizationRates", convert=lambda rates: int(rates.gpu)),
        )

    def nvlink_link_count(self, index: int, handle: Any) -> Answer[int]:
        field = getattr(self.nvml, "NVML_FI_DEV_NVLINK_LINK_COUNT", _FIELD_NVLINK_LINK_COUNT)
        label = f"nvmlDeviceGetFieldValues(gpu {index}, NVML_FI_DEV_NVLINK_LINK_COUNT)"
        values = self.ask(label, "nvmlDeviceGetFieldValues", handle, [field])
        if not known(values):
            return values
        # The call succeeds as a whole while each field carries its own return code.
        if values[0].nvmlReturn != 0:
            error = self.nvml.NVMLError(values[0].nvmlReturn)
            return Unknown(self.reason(error), f"{label}: {type(error).__name__}: {error}")
        return int(values[0].value.uiVal)

    def nvlinks(self, index: int, handle: Any, link_count: Answer[int]) -> tuple[NvLinkAnswers, ...]:
        binding_max = int(getattr(self.nvml, "NVML_NVLINK_MAX_LINKS", 18))
        bound = binding_max if isinstance(link_count, Unknown) else min(link_count, binding_max)
        links: list[NvLinkAnswers] = []
        for link in range(bound):

            def ask(function: str, convert: Callable[[Any], Any] = int, link: int = link) -> Any:
                return self.ask(
                    f"{function}(gpu {index}, link {link})", function, handle, link, convert=convert
                )

            state = ask("nvmlDeviceGetNvLinkState")
            if not known(state) and not known(link_count) and state.reason in _PAST_LAST_LINK:
                # Without a link count, the first rejected link marks the end; keep it so the
                # capture says why the scan stopped.
                links.append(NvLinkAnswers(link, state, state, state, state))
                break
            links.append(
                NvLinkAnswers(
                    link=link,
                    state=state,
                    version=ask("nvmlDeviceGetNvLinkVersion"),
                    remote_type=ask("nvmlDeviceGetNvLinkRemoteDeviceType"),
                    remote_bus_id=ask(
                        "nvmlDeviceGetNvLinkRemotePciInfo", convert=lambda info: _text(info.busId)
                    ),
                )
            )
        return tuple(links)

    def fabric(self, index: int, handle: Any) -> Answer[FabricAnswers]:
        nvml = self.nvml
        label = f"nvmlDeviceGetGpuFabricInfoV(gpu {index})"
        struct_type = getattr(nvml, "c_nvmlGpuFabricInfoV_t", None)
        if struct_type is None:
            return Unknown(UnknownReason.FUNCTION_NOT_FOUND, f"{label}: this nvidia-ml-py has no fabric info")
        info = struct_type()  # its constructor sets info.version
        # By reference: by value, the driver writes through a garbage pointer (SIGSEGV seen).
        answer = self.ask(label, "nvmlDeviceGetGpuFabricInfoV", handle, ctypes.byref(info))
        if not known(answer):
            return answer
        return FabricAnswers(
            state=int(info.state),
            status=int(info.status),
            clique=int(info.cliqueId),
            cluster_uuid=bytes(info.clusterUuid).hex(),
        )

    def mig_devices(self, index: int, handle: Any) -> tuple[MigDeviceAnswers, ...]:
        slots = self.ask(
            f"nvmlDeviceGetMaxMigDeviceCount(gpu {index})",
            "nvmlDeviceGetMaxMigDeviceCount",
            handle,
            convert=int,
        )
        devices: list[MigDeviceAnswers] = []
        for slot in range(slots if known(slots) else 0):
            label = f"nvmlDeviceGetMigDeviceHandleByIndex(gpu {index}, slot {slot})"
            self.progress(label, None)
            try:
                mig = self.nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except self.nvml.NVMLError_NotFound:
                self.progress(label, "empty")
                continue  # an empty slot: no instance was created there
            except self.nvml.NVMLError as error:
                self.progress(label, Unknown(self.reason(error), f"{label}: {error}"))
                continue
            self.progress(label, "ok")

            def ask(function: str, convert: Callable[[Any], Any], mig: Any = mig, slot: int = slot) -> Any:
                return self.ask(f"{function}(gpu {index}, mig slot {slot})", function, mig, convert=convert)

            devices.append(
                MigDeviceAnswers(
                    slot=slot,
                    name=ask("nvmlDeviceGetName", _text),
                    uuid=ask("nvmlDeviceGetUUID", _text),
                    memory_total=ask("nvmlDeviceGetMemoryInfo", lambda info: int(info.total)),
                )
            )
        return tuple(devices)

    def pair(self, a: int, b: int, handle_a: Any, handle_b: Any) -> PairAnswers:
        def p2p(capability: str) -> Answer[int]:
            return self.ask(
                f"nvmlDeviceGetP2PStatus(gpu {a}, gpu {b}, {capability})",
                "nvmlDeviceGetP2PStatus",
                handle_a,
                handle_b,
                P2P_CAPS[capability],
                convert=int,
            )

        return PairAnswers(
            a=a,
            b=b,
            p2p_read=p2p("read"),
            p2p_write=p2p("write"),
            p2p_nvlink=p2p("nvlink"),
            p2p_atomics=p2p("atomics"),
            p2p_pci=p2p("pci"),
            common_ancestor=self.ask(
                f"nvmlDeviceGetTopologyCommonAncestor(gpu {a}, gpu {b})",
                "nvmlDeviceGetTopologyCommonAncestor",
                handle_a,
                handle_b,
                convert=int,
            ),
        )


# A link index past the GPU's last link answers one of these.
_PAST_LAST_LINK = (UnknownReason.NOT_SUPPORTED, UnknownReason.ARGUMENT_ERROR)


def _unreachable_gpu(index: int, why: Unknown) -> GpuAnswers:
    """A GPU whose handle NVML refused: every fact about it is unknown for the same reason."""
    return GpuAnswers(
        index=index,
        name=why,
        uuid=why,
        bus_id=why,
        cuda_cc=why,
        memory_total=why,
        mig_mode=why,
        mig_devices=(),
        pcie_gen_current=why,
        pcie_gen_max=why,
        pcie_width_current=why,
        pcie_width_max=why,
        numa_node=why,
        cpu_affinity=why,
        nvlink_link_count=why,
        nvlinks=(),
        fabric=why,
    )


def _text(value: Any) -> str:
    """Bindings return ``bytes`` or ``str`` for C strings depending on version."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _cpu_set_words() -> int:
    """How many 64-bit words a CPU mask of this machine needs."""
    return max(1, ((os.cpu_count() or 1) + 63) // 64)


def _cpulist(words: Any) -> str:
    """NVML's CPU mask (64-bit words, lowest CPUs first) as a Linux cpulist: ``"0-31,64-95"``."""
    cpus = [n * 64 + bit for n, word in enumerate(words) for bit in range(64) if int(word) >> bit & 1]
    runs: list[list[int]] = []
    for cpu in cpus:
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def _binding_description(nvml: ModuleType) -> str:
    if nvml.__name__ == "pynvml":
        try:
            return f"nvidia-ml-py {importlib.metadata.version('nvidia-ml-py')}"
        except importlib.metadata.PackageNotFoundError:
            return "pynvml (version unknown)"
    return getattr(nvml, "BINDING_DESCRIPTION", nvml.__name__)
