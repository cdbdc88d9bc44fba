"""The backend registry: name -> "module:Class", imported only when a worker loads one.

Listing or validating backend names imports nothing heavy (no torch, no flashinfer); only
``load_backend`` imports the module, inside a worker process. ``<plain>+rmsnorm`` names a composite
(``composite.py``; the names: ``names.py``): a registered plain backend followed by the add +
RMSNorm kernel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from topo_gate.trials.backends.names import is_composite, plain_of

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
    "trtllm_oneshot_vllm": "topo_gate.trials.backends.trtllm:TrtllmOneshotVllm",
    "trtllm_twoshot_vllm": "topo_gate.trials.backends.trtllm:TrtllmTwoshotVllm",
    "trtllm_oneshot_sglang": "topo_gate.trials.backends.trtllm:TrtllmOneshotSglang",
    "trtllm_twoshot_sglang": "topo_gate.trials.backends.trtllm:TrtllmTwoshotSglang",
    "trtllm_fused_oneshot_vllm": "topo_gate.trials.backends.trtllm:TrtllmFusedOneshotVllm",
    "trtllm_fused_twoshot_vllm": "topo_gate.trials.backends.trtllm:TrtllmFusedTwoshotVllm",
    "trtllm_fused_oneshot_sglang": "topo_gate.trials.backends.trtllm:TrtllmFusedOneshotSglang",
    "trtllm_fused_twoshot_sglang": "topo_gate.trials.backends.trtllm:TrtllmFusedTwoshotSglang",
    "symm_mem_oneshot": "topo_gate.trials.backends.symm_mem:SymmMemOneshot",
    "symm_mem_twoshot": "topo_gate.trials.backends.symm_mem:SymmMemTwoshot",
    "symm_mem_twoshot_vllm": "topo_gate.trials.backends.symm_mem:SymmMemTwoshotVllm",
    "vllm_custom": "topo_gate.trials.backends.vllm_custom:VllmCustom",
    "custom_v2_sglang": "topo_gate.trials.backends.custom_v2:CustomV2Sglang",
    "pcie_ipc": "topo_gate.trials.backends.pcie_ipc:PcieIpc",
}


class UnknownBackend(LookupError):
    """A name that is not in BACKENDS_BY_NAME."""


def known_backend(name: str) -> bool:
    """A registered name, or ``<registered>+rmsnorm``."""
    plain = plain_of(name) if is_composite(name) else name
    return plain in BACKENDS_BY_NAME


def load_backend(name: str) -> type[Backend]:
    """Import and return the class registered as ``name`` (or build its ``+rmsnorm`` composite).

    Raises UnknownBackend for an unregistered name; an ImportError from the module propagates, and the
    worker reports it as the backend being unavailable.
    """
    if is_composite(name):
        from topo_gate.trials.backends.composite import with_rmsnorm

        return with_rmsnorm(load_backend(plain_of(name)))
    try:
        target = BACKENDS_BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(BACKENDS_BY_NAME))
        raise UnknownBackend(f"unknown backend {name!r} (known: {known})") from None
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)
