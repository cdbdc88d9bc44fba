"""Failures of topology collection and capture reading, each one line for the CLI to print."""

from __future__ import annotations


class NvmlUnavailable(Exception):
    """No NVIDIA driver or NVML on this machine (CLI exit code 4)."""


class NvmlCrash(Exception):
    """NVML collection died (a signal, a hang, a GPU lost) while asking ``query`` (CLI exit code 5).

    ``partial`` maps each query that completed before the crash to its JSON-encoded answer, so a bug
    report can carry the facts that were gathered.
    """

    def __init__(self, query: str, why: str, partial: dict[str, object] | None = None) -> None:
        super().__init__(f"NVML crashed in {query}: {why}")
        self.query = query
        self.why = why
        self.partial = partial or {}


class CaptureError(Exception):
    """A capture file is missing, unreadable, garbled, or of an unknown format (CLI exit code 3)."""
