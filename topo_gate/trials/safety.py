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
