"""The environment that keeps trials from creating NVLink multicast objects (DESIGN.md principle 5).

Shared by the runner, which sets it for every worker, and the worker, which refuses to start without
it. Stdlib only: the worker checks it before importing torch, so no GPU is touched on a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Variable -> required value. NCCL NVLS, torch symmetric-memory multicast and NVSHMEM NVLS each
#: allocate multicast objects that can wedge a shared node's fabric manager when misused; all three
#: are switched off unless the user explicitly passed --allow-multicast.
SAFETY_ENV: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def missing_safety_env(environ: Mapping[str, str]) -> list[str]:
    """The ``NAME=value`` settings of SAFETY_ENV that ``environ`` lacks (empty when all are set)."""
    return [f"{name}={value}" for name, value in SAFETY_ENV.items() if environ.get(name) != value]


#: Settings that make the measurement trustworthy, not safe; set for every worker unless the user's
#: environment already sets them. NCCL_GRAPH_MIXING_SUPPORT=1 (NCCL's default) makes back-to-back
#: NCCL calls captured in one CUDA graph pay a cross-stream penalty that grows with the graph length:
#: on 2x H200 (NCCL 2.28.9) NCCL read 12.6 us/call at K=32 and 5-64% more at K=64, with rank skews up
#: to 490 us, while =0 read 6.4 us at both K (profiles/h200-x2/README.md). A launcher's decode graph
#: has compute between its all-reduces, so it does not pay that penalty the same way; measuring with
#: =0 gives the faster, stable NCCL baseline, which makes every speed-up conservative (never inflated).
MEASUREMENT_ENV: Mapping[str, str] = {
    "NCCL_GRAPH_MIXING_SUPPORT": "0",
}
