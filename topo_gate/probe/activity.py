"""Whether the GPUs a probe is about to time are busy: a GPU in use is a measurement spoiled.

Read from the node's capture (``compute_processes``, ``utilization_gpu``: NVML, crash-isolated like
every other answer) before any worker starts. A GPU with a compute process or a utilisation at or
above ``BUSY_UTILIZATION_PCT`` is busy, and the probe refuses it unless ``--allow-busy``, which the
evidence records. A reading NVML could not give is said as such (unknown is not idle, nor busy).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topo_gate.topology.answers import Capture, GpuAnswers, Unknown, UnknownReason

#: Utilisation at or above this is someone else's load: an idle GPU reads 0%, and NVML's sample
#: window (up to a second) can catch a brief monitoring query, hence not 1%.
BUSY_UTILIZATION_PCT = 10


class GpuBusy(Exception):
    """A GPU the trials would use is running something else, and ``--allow-busy`` was not given."""


@dataclass(frozen=True)
class Activity:
    """The GPUs of this run found busy, and those whose activity could not be read (with why)."""

    busy: tuple[str, ...]
    unread: tuple[str, ...]

    def refusal(self) -> str:
        gpus = "; ".join(self.busy)
        return (
            f"busy GPU: {gpus}: a probe on a busy GPU times that load too; stop it, or pass --allow-busy "
            "to measure anyway (recorded in the evidence)"
        )


def activity(capture: Capture, gpus: Iterable[int]) -> Activity:
    """What ``capture`` says the GPUs of ``gpus`` were doing."""
    by_index = {gpu.index: gpu for gpu in capture.gpus}
    busy, unread = [], []
    for index in sorted(set(gpus)):
        gpu = by_index.get(index)
        if gpu is None:
            continue
        found = _busy_words(gpu)
        if found:
            busy.append(f"GPU {index} ({found})")
        unknown = [
            f"{name} {answer.reason.value}"
            for name, answer in (("processes", gpu.compute_processes), ("utilisation", gpu.utilization_gpu))
            if isinstance(answer, Unknown) and answer.reason is not UnknownReason.NOT_RECORDED
        ]
        if unknown and not found:
            unread.append(f"GPU {index} ({', '.join(unknown)})")
    return Activity(tuple(busy), tuple(unread))


def _busy_words(gpu: GpuAnswers) -> str:
    words = []
    processes, utilization = gpu.compute_processes, gpu.utilization_gpu
    if isinstance(processes, int) and processes > 0:
        words.append(f"{processes} compute process{'es' if processes != 1 else ''}")
    if isinstance(utilization, int) and utilization >= BUSY_UTILIZATION_PCT:
        words.append(f"{utilization}% utilisation")
    return ", ".join(words)
