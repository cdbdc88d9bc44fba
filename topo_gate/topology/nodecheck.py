"""This node's fingerprint, read through NVML (in a child process) or from a recorded capture.

The one place ``exec`` touches the topology layer, so tests inject a capture file instead of a GPU.
"""

from __future__ import annotations

import os


class NodeCheckError(Exception):
    """The node could not be read. ``kind``: ``"no-driver"``, ``"nvml-crash"`` or ``"unreadable"``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def current_fingerprint(from_capture: str | os.PathLike[str] | None = None) -> str:
    """``sha256:...`` of this node's class (or of a recorded capture); raises ``NodeCheckError``."""
    from topo_gate.topology.capture import read_capture
    from topo_gate.topology.errors import CaptureError, NvmlCrash, NvmlUnavailable
    from topo_gate.topology.fingerprint import node_fingerprint
    from topo_gate.topology.model import build_node

    try:
        return node_fingerprint(build_node(read_capture(from_capture)))
    except NvmlUnavailable as error:
        raise NodeCheckError("no-driver", str(error)) from None
    except NvmlCrash as error:
        raise NodeCheckError("nvml-crash", f"NVML failed: {error}") from None
    except CaptureError as error:
        raise NodeCheckError("unreadable", str(error)) from None
