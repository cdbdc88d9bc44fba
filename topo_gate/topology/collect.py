"""Child process of ``capture.collect_isolated``: ``python -m topo_gate.topology.collect``.

Writes one JSON line per query to stdout, flushed before the query runs, so that if the driver kills
this process the parent still knows which query was in flight and what was answered before it:

    {"ask": "nvmlDeviceGetGpuFabricInfoV(gpu 1)"}
    {"answer": "nvmlDeviceGetGpuFabricInfoV(gpu 1)", "value": {...}}
    ...
    {"capture": {...}}            # or {"unavailable": "..."} / {"error": "..."}
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

from topo_gate.topology import nvml
from topo_gate.topology.capture import capture_to_dict, encode_answer
from topo_gate.topology.errors import NvmlUnavailable


def _emit(message: dict[str, Any]) -> None:
    # Device handles are answers too, but opaque pointers: shown by type name only.
    sys.stdout.write(json.dumps(message, default=lambda obj: f"<{type(obj).__name__}>") + "\n")
    sys.stdout.flush()  # before the next query: a SIGSEGV loses whatever is still buffered


def _progress(label: str, answer: Any) -> None:
    if answer is None:
        _emit({"ask": label})
    else:
        _emit({"answer": label, "value": encode_answer(answer)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topo_gate.topology.collect")
    parser.add_argument("--binding", default="pynvml", help="module to use as pynvml (a replay in tests)")
    args = parser.parse_args(argv)
    try:
        binding = importlib.import_module(args.binding)
        capture = nvml.collect(binding, progress=_progress)
    except NvmlUnavailable as error:
        _emit({"unavailable": str(error)})
        return 4
    except ImportError as error:
        _emit({"unavailable": f"no NVIDIA driver/NVML found: cannot import {args.binding}: {error}"})
        return 4
    except Exception as error:  # noqa: BLE001 -- reported to the parent as one line, with the query
        _emit({"error": f"{type(error).__name__}: {error}"})
        return 5
    _emit({"capture": capture_to_dict(capture)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
