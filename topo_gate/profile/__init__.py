"""The profile contract: schema v1 dataclasses (v1.3: the price table too), canonical YAML I/O with a
digest, and the reader.

Standard library and PyYAML only: launchers import this at startup (DESIGN.md, principle 6).
"""

from topo_gate.profile.digest import canonical_json, compute_digest
from topo_gate.profile.errors import (
    ProfileDigestMismatch,
    ProfileError,
    ProfileInvalid,
    ProfileSchemaTooNew,
    ProfileUnreadable,
)
from topo_gate.profile.io import dump_profile, load_profile, profile_from_text, profile_to_yaml
from topo_gate.profile.reader import Admission, Decision, admit, gate
from topo_gate.profile.schema import (
    BACKENDS,
    NCCL,
    PATTERNS,
    SCHEMA,
    Alternative,
    BackendPrices,
    DecisionEntry,
    EvidenceRef,
    Fleet,
    FleetNode,
    Measurement,
    Node,
    Profile,
    Rule,
    Skipped,
    Tool,
    Transition,
    Trials,
)

__all__ = [
    "BACKENDS",
    "NCCL",
    "PATTERNS",
    "SCHEMA",
    "Admission",
    "Alternative",
    "BackendPrices",
    "Decision",
    "DecisionEntry",
    "EvidenceRef",
    "Fleet",
    "FleetNode",
    "Measurement",
    "Node",
    "Profile",
    "ProfileDigestMismatch",
    "ProfileError",
    "ProfileInvalid",
    "ProfileSchemaTooNew",
    "ProfileUnreadable",
    "Rule",
    "Skipped",
    "Tool",
    "Transition",
    "Trials",
    "admit",
    "canonical_json",
    "compute_digest",
    "dump_profile",
    "gate",
    "load_profile",
    "profile_from_text",
    "profile_to_yaml",
]
