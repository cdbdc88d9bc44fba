"""The software block of a profile: what was installed when the node was measured.

Driver, CUDA driver API and NVML versions come from the capture (NVML); torch, NCCL, FlashInfer and
Python from package metadata -- never by importing torch, so reading versions costs milliseconds.
The launcher releases installed beside them (vLLM, SGLang, TensorRT-LLM) are recorded too: a plan is
for a launcher release (DESIGN.md, principle 8), and a profile says which ones the probed node held.
A version that cannot be found is ``None`` (unknown, or not installed), not an empty string.
"""

from __future__ import annotations

import importlib.metadata
import platform

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


def python_versions() -> dict[str, str | None]:
    return {
        "torch": package_version("torch"),
        "nccl": package_version(*_NCCL_DISTRIBUTIONS),
        "flashinfer": package_version("flashinfer-python", "flashinfer"),
        "python": platform.python_version(),
        **{name: package_version(name) for name in LAUNCHER_DISTRIBUTIONS},
    }


def software_block(node: Node) -> dict[str, str | None]:
    """``profile.node.software``: the node's driver-side versions plus this Python environment's."""
    return {**node.software_dict(), **python_versions()}
