"""The backend registry: name -> "module:Class", imported only when a worker loads one.

Listing or validating backend names imports nothing heavy (no torch, no flashinfer); only
``load_backend`` imports the module, inside a worker process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topo_gate.trials.backends.base import Backend

BACKENDS_BY_NAME: dict[str, str] = {
    # CPU harness (gloo): two real algorithms, so CPU evidence has a baseline and a competitor.
    "gloo": "topo_gate.trials.backends.cpu:GlooAllReduce",
    "gloo_ring": "topo_gate.trials.backends.cpu:GlooRingAllReduce",
    # GPU backends. `nccl` serves both patterns (the unfused baseline of allreduce_rmsnorm too).
    "nccl": "topo_gate.trials.backends.nccl:NcclBackend",
    "trtllm_oneshot": "topo_gate.trials.backends.trtllm:TrtllmOneshot",
    "trtllm_twoshot": "topo_gate.trials.backends.trtllm:TrtllmTwoshot",
    "trtllm_fused_oneshot": "topo_gate.trials.backends.trtllm:TrtllmFusedOneshot",
    "trtllm_fused_twoshot": "topo_gate.trials.backends.trtllm:TrtllmFusedTwoshot",
    "symm_mem_oneshot": "topo_gate.trials.backends.symm_mem:SymmMemOneshot",
    "symm_mem_twoshot": "topo_gate.trials.backends.symm_mem:SymmMemTwoshot",
    "vllm_custom": "topo_gate.trials.backends.vllm_custom:VllmCustom",
    "pcie_ipc": "topo_gate.trials.backends.pcie_ipc:PcieIpc",
}


class UnknownBackend(LookupError):
    """A name that is not in BACKENDS_BY_NAME."""


def load_backend(name: str) -> type[Backend]:
    """Import and return the class registered as ``name``.

    Raises UnknownBackend for an unregistered name; an ImportError from the module propagates, and the
    worker reports it as the backend being unavailable.
    """
    try:
        target = BACKENDS_BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(BACKENDS_BY_NAME))
        raise UnknownBackend(f"unknown backend {name!r} (known: {known})") from None
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)
