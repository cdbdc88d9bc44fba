"""topo-gate: measure which tensor-parallel all-reduce backend wins on a node, and gate launchers on it.

This top level is the launcher-facing API and stays cheap to import (standard library + PyYAML; no
torch, pynvml, click or rich)::

    import topo_gate
    decision = topo_gate.gate("node.yaml", tp=4, nbytes=tokens * hidden * 2)
    if decision.backend == "trtllm_oneshot":
        ...  # enable the fast path up to decision.max_bytes; NCCL everywhere else
"""

from topo_gate._version import __version__
from topo_gate.profile import (
    Decision,
    Profile,
    ProfileDigestMismatch,
    ProfileError,
    ProfileInvalid,
    ProfileSchemaTooNew,
    ProfileUnreadable,
    gate,
    load_profile,
)

__all__ = [
    "Decision",
    "Profile",
    "ProfileDigestMismatch",
    "ProfileError",
    "ProfileInvalid",
    "ProfileSchemaTooNew",
    "ProfileUnreadable",
    "__version__",
    "gate",
    "load_profile",
]
