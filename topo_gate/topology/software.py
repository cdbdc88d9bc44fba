"""The software block of a profile: what was installed when the node was measured.

Driver, CUDA driver API and NVML versions come from the capture (NVML); torch, NCCL, FlashInfer and
Python from package metadata -- never by importing torch, so reading versions costs milliseconds.
The launcher releases installed beside them (vLLM, SGLang, TensorRT-LLM) are recorded too: a plan is
for a launcher release (DESIGN.md, principle 8), and a profile says which ones the probed node held.
A version that cannot be found is ``None`` (unknown, or not installed), not an empty string.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
from pathlib import Path

from topo_gate.topology.model import Node

# NCCL ships in one of these wheels depending on the CUDA major version torch was built for.
_NCCL_DISTRIBUTIONS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl")
#: The launchers' distributions, recorded under these names in ``node.software``.
LAUNCHER_DISTRIBUTIONS = ("vllm", "sglang", "tensorrt_llm")


def package_version(*distributions: str) -> str | None:
    """The installed version of the first of ``distributions`` that is installed, else None."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


#: ``__version__ = "0.7.2.post1"`` in FlashInfer's ``_build_meta.py``, which its ``version.py`` reads.
_BUILD_META_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def flashinfer_version() -> str | None:
    """FlashInfer's version from its distribution metadata, else from its ``_build_meta.py`` where the
    package is importable without metadata (a tree unpacked onto ``PYTHONPATH``, as on offline GPU
    nodes). Read as text: importing FlashInfer takes seconds and initialises CUDA."""
    found = package_version("flashinfer-python", "flashinfer")
    if found is not None:
        return found
    try:
        spec = importlib.util.find_spec("flashinfer")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        try:
            text = (Path(folder) / "_build_meta.py").read_text(encoding="utf-8", errors="replace")[:4096]
        except OSError:
            continue
        match = _BUILD_META_VERSION.search(text)
        if match:
            return match.group(1)
    return None


def python_versions() -> dict[str, str | None]:
    return {
        "torch": package_version("torch"),
        "nccl": package_version(*_NCCL_DISTRIBUTIONS),
        "flashinfer": flashinfer_version(),
        "python": platform.python_version(),
        **{name: package_version(name) for name in LAUNCHER_DISTRIBUTIONS},
    }


def software_block(node: Node) -> dict[str, str | None]:
    """``profile.node.software``: the node's driver-side versions plus this Python environment's."""
    return {**node.software_dict(), **python_versions()}
