"""torch symmetric memory (c10d): whether the launchers' symm-mem users get NVLink multicast.

SGLang's and vLLM's torch symm-mem communicators allocate through torch and disable themselves when
the rendezvoused buffer has no multicast address (``multicast_ptr == 0``); SGLang's custom
all-reduce v2 allocates the same way and drops its multicast two-shot pull without one. torch
creates the multicast object only where the device supports NVLink multicast *and*
``TORCH_SYMM_MEM_DISABLE_MULTICAST`` is not ``"1"`` (``c10::utils::check_env``: exactly ``"1"`` is
true, ``"0"`` false, anything else ignored with a warning). topo-gate's trials always set it, so
every symm-mem path a launcher runs with multicast is a path no trial timed.
"""

from __future__ import annotations

from collections.abc import Mapping

from topo_gate.launchers.routes.base import Cite, Context

#: torch's source read at this commit (the stored pytorch/pytorch snapshot); the launchers pin
#: torch 2.14.0 (vLLM) and 2.14.1 (SGLang), whose wheels carry no C++ source to read.
RELEASE = "torch (pytorch/pytorch@09a6d12)"
DISABLE_MULTICAST_ENV = "TORCH_SYMM_MEM_DISABLE_MULTICAST"
#: The only value ``check_env`` reads as true.
_DISABLE_MULTICAST_TRUE = "1"

CITES = {
    "multicast_env": Cite(
        RELEASE, "torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryUtils.cpp", "21-26"
    ),
    "check_env": Cite("torch (pytorch/pytorch@1071fd2)", "c10/util/env.cpp", "76-100"),
    "multicast_init": Cite(
        "torch (pytorch/pytorch@029e473)",
        "torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory.cu",
        "check_group_multicast_support, init_multicast_for_block",
    ),
}

#: torch's two-shot all-reduce as both launchers call it (copy in, in-place, copy out) in a process
#: that created NVLink multicast objects: no trial times it (the measured ``symm_mem_twoshot_vllm``
#: ran with multicast disabled, where neither launcher runs symm-mem at all).
TWOSHOT_MULTICAST = "symm_mem_twoshot_multicast_vllm"
#: torch's multimem all-reduce (multicast loads and stores): no trial times it.
MULTIMEM = "symm_mem_multimem"


def multicast_disabled(env: Mapping[str, str]) -> bool:
    """``TORCH_SYMM_MEM_DISABLE_MULTICAST`` as torch reads it."""
    return env.get(DISABLE_MULTICAST_ENV) == _DISABLE_MULTICAST_TRUE


def multicast(env: Mapping[str, str], ctx: Context) -> bool:
    """Whether a torch symm-mem allocation on this group gets a multicast address."""
    return ctx.multicast and not multicast_disabled(env)
