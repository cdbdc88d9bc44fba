"""Profile schema v1 as typed, immutable dataclasses (the YAML fields map 1:1 to attributes).

Every class checks its invariants in ``__post_init__``, so an invalid profile cannot be built, from a
file (``Profile.from_dict``) or from code (``decide``). ``from_dict`` ignores keys it does not know:
a minor schema bump (``v1.N``) only adds optional fields, which this version may safely skip.
``to_dict`` returns plain data in the canonical field order, ready for YAML or JSON.

The classes live by concern -- ``rules.py`` (the decisions), ``node.py`` (where and how it was
measured), ``measurements.py`` (the price table, v1.3), ``fields.py`` (names and field builders) --
and are all importable from here, where callers have always found them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topo_gate.profile.digest import compute_digest
from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.fields import (
    BACKENDS,
    COMPOSITE_SUFFIX,
    DTYPE_BYTES,
    FUSED_PATTERN,
    NCCL,
    PATTERNS,
    PLAIN_PATTERN,
    SCHEMA,
    each,
    of_type,
    or_empty,
    plain_copy,
    sub,
    typed_items,
)
from topo_gate.profile.measurements import BackendPrices, Measurement, Transition
from topo_gate.profile.node import EvidenceRef, Fleet, FleetNode, Node, Skipped, Tool, Trials
from topo_gate.profile.rules import Alternative, DecisionEntry, Rule
from topo_gate.profile.validate import describe, expect_digest, expect_str, require, schema_minor

__all__ = [
    "BACKENDS",
    "COMPOSITE_SUFFIX",
    "DTYPE_BYTES",
    "FUSED_PATTERN",
    "NCCL",
    "PATTERNS",
    "PLAIN_PATTERN",
    "SCHEMA",
    "Alternative",
    "BackendPrices",
    "DecisionEntry",
    "EvidenceRef",
    "Fleet",
    "FleetNode",
    "Measurement",
    "Node",
    "Profile",
    "Rule",
    "Skipped",
    "Tool",
    "Transition",
    "Trials",
    "plain_copy",
]

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A gating profile: per (TP, group class, pattern), which backend to use at which sizes.

    ``measurements`` (v1.3) is the price table a planner prices routes with, one per decision that
    was measured; ``()`` in older profiles, which keep their content and digest.

    ``digest`` is None only for a profile still being built; ``with_digest()`` seals it, and the
    loader refuses a file whose content does not hash to its digest.
    """

    schema: str
    created: str
    tool: Tool
    node: Node
    trials: Trials
    decisions: tuple[DecisionEntry, ...]
    skipped: tuple[Skipped, ...] = ()
    measurements: tuple[Measurement, ...] = ()  # v1.3; written only when not empty
    evidence: EvidenceRef | None = None
    fleet: Fleet | None = None  # v1.2; written only when set, so older profiles keep their digest
    digest: str | None = None

    @property
    def cpu_harness(self) -> bool:
        """Measured by the CPU harness (gloo on CPU processes): no GPU launcher runs what it measured."""
        return self.node.hardware.get("device") == "cpu"

    def __post_init__(self) -> None:
        schema_minor(self.schema)
        expect_str(self.created, "created")
        of_type(self.tool, Tool, "tool")
        of_type(self.node, Node, "node")
        of_type(self.trials, Trials, "trials")
        decisions = typed_items(self.decisions, DecisionEntry, "decisions")
        measurements = typed_items(self.measurements, Measurement, "measurements")
        object.__setattr__(self, "skipped", typed_items(self.skipped, Skipped, "skipped"))
        if self.evidence is not None:
            of_type(self.evidence, EvidenceRef, "evidence")
        if self.fleet is not None:
            of_type(self.fleet, Fleet, "fleet")
        if self.digest is not None:
            expect_digest(self.digest, "digest")
        _unique_keys(decisions, "decisions")
        _unique_keys(measurements, "measurements")
        object.__setattr__(self, "decisions", decisions)
        object.__setattr__(self, "measurements", measurements)

    def find(self, tp: int, pattern: str, group_class: str) -> DecisionEntry | None:
        for decision in self.decisions:
            if decision.key == (tp, pattern, group_class):
                return decision
        return None

    def measurement(self, tp: int, group_class: str, pattern: str) -> Measurement | None:
        """The price table of the run behind ``find(tp, pattern, group_class)``, or None."""
        for table in self.measurements:
            if table.key == (tp, pattern, group_class):
                return table
        return None

    def with_digest(self) -> Profile:
        """This profile sealed with the digest of its content."""
        from dataclasses import replace  # here: a launcher only reads profiles, it never seals one

        return replace(self, digest=compute_digest(self.to_dict()))

    @classmethod
    def from_dict(cls, data: object) -> Profile:
        """Build from plain data, checking everything except the digest (the loader checks that,
        over the file's own content). Raises ``ProfileInvalid`` / ``ProfileSchemaTooNew``."""
        if not isinstance(data, Mapping):
            raise ProfileInvalid(f"a profile must be a mapping of fields, found {describe(data)}")
        # The schema first: a v2 profile should say "too new", not list v1 fields it lacks.
        schema_minor(require(data, "schema"))
        evidence, fleet = data.get("evidence"), data.get("fleet")
        return cls(
            schema=data["schema"],
            created=require(data, "created"),
            tool=sub(data, "tool", Tool.from_dict),
            node=sub(data, "node", Node.from_dict),
            trials=sub(data, "trials", Trials.from_dict),
            decisions=each(require(data, "decisions"), "decisions", DecisionEntry.from_dict),
            skipped=each(or_empty(data.get("skipped"), []), "skipped", Skipped.from_dict),
            measurements=each(or_empty(data.get("measurements"), []), "measurements", Measurement.from_dict),
            evidence=None if evidence is None else sub(data, "evidence", EvidenceRef.from_dict),
            fleet=None if fleet is None else sub(data, "fleet", Fleet.from_dict),
            digest=data.get("digest"),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": self.schema,
            "created": self.created,
            "tool": self.tool.to_dict(),
            "node": self.node.to_dict(),
            "trials": self.trials.to_dict(),
            "skipped": [skipped.to_dict() for skipped in self.skipped],
            "decisions": [decision.to_dict() for decision in self.decisions],
        }
        if self.measurements:  # v1.3; omitted when empty, so an older profile keeps its digest
            data["measurements"] = [table.to_dict() for table in self.measurements]
        data["evidence"] = None if self.evidence is None else self.evidence.to_dict()
        if self.fleet is not None:
            data["fleet"] = self.fleet.to_dict()
        data["digest"] = self.digest
        return data


def _unique_keys(items: Sequence[DecisionEntry | Measurement], field: str) -> None:
    seen: dict[tuple[int, str, str], int] = {}
    for index, item in enumerate(items):
        if item.key in seen:
            tp, pattern, group_class = item.key
            raise ProfileInvalid(
                f"duplicate of {field}[{seen[item.key]}] (tp {tp}, pattern {pattern}, group_class {group_class})",
                f"{field}[{index}]",
            )
        seen[item.key] = index
