"""Evidence -> profile: the pure decision, and the one writer of the profile that points at its evidence.

A replay (``replay``) starts from recorded evidence instead of trials: it rebuilds the topology from
the NVML capture embedded in the evidence (``node.capture``), re-decides, and writes a profile exactly
as the live probe did. That is how a machine without GPUs turns the bundled H200 evidence into a
real profile, and how a classification or decision fix reaches old measurements.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topo_gate._version import __version__
from topo_gate.decide import decide
from topo_gate.evidence.document import load_evidence
from topo_gate.probe.options import DecideSettings, ProbeResult
from topo_gate.profile.io import dump_profile
from topo_gate.profile.schema import SCHEMA, EvidenceRef, Node, Profile, Skipped, Tool, Trials
from topo_gate.profile.semantics import check_semantics
from topo_gate.topology.capture import capture_from_dict
from topo_gate.topology.fingerprint import node_fingerprint
from topo_gate.topology.model import build_node


def replay(evidence_path: Path, *, out: Path, settings: DecideSettings | None = None) -> ProbeResult:
    """Re-derive and write a profile from recorded evidence (no GPU, no trials)."""
    evidence = load_evidence(evidence_path)
    return decide_and_write(evidence, evidence_path, out, settings or DecideSettings(), [])


def preview(evidence_path: Path, *, settings: DecideSettings | None = None) -> ProbeResult:
    """What ``replay`` would write, without writing anything (``profile_path`` is where it would go)."""
    evidence = load_evidence(evidence_path)
    reference = EvidenceRef(path=str(evidence_path), digest=_file_digest(evidence_path))
    profile, notes = build_profile(evidence, reference, settings or DecideSettings())
    return ProbeResult(profile.with_digest(), Path("-"), evidence_path, notes, _preflight(evidence))


def build_profile(
    evidence: Mapping[str, Any], evidence_ref: EvidenceRef | None, settings: DecideSettings
) -> tuple[Profile, list[str]]:
    """The profile the evidence implies (unsealed), and notes for a person. Pure."""
    node_block, notes = replayed_node(evidence["node"])
    decided = decide(
        evidence,
        margin=settings.margin,
        ci_level=settings.ci_level,
        bootstrap=settings.bootstrap,
        seed=settings.seed,
    )
    trials = evidence["trials"]
    method = {
        **trials.get("method", {}),
        "margin": settings.margin,
        "ci_level": settings.ci_level,
        "bootstrap": settings.bootstrap,
    }
    profile = Profile(
        schema=SCHEMA,
        created=_utc_stamp(),
        tool=Tool("topo-gate", __version__),
        node=Node.from_dict(node_block),
        trials=Trials(
            trials["dtype"], trials["hidden"], tuple(trials["tp"]), tuple(trials["patterns"]), method
        ),
        decisions=tuple(decided.decisions),
        skipped=tuple(Skipped(s["tp"], s["reason"]) for s in evidence.get("skipped", [])),
        evidence=evidence_ref,
        measurements=tuple(decided.measurements),
    )
    check_semantics(profile)  # what the loader would refuse is never shown or written
    return profile, notes + decided.notes


def replayed_node(recorded: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The node block for the profile: rebuilt from ``node.capture`` when the evidence has one, so
    today's classification applies to old measurements; otherwise (CPU evidence) as recorded."""
    block = {key: recorded[key] for key in ("fingerprint", "hardware", "software") if key in recorded}
    block["provenance"] = recorded.get("provenance") or {}
    if recorded.get("capture") is None:
        return block, []
    topology = build_node(capture_from_dict(recorded["capture"], "evidence node.capture"))
    block["fingerprint"] = node_fingerprint(topology)
    block["hardware"] = topology.to_hardware_dict()
    notes = []
    if block["fingerprint"] != recorded.get("fingerprint"):
        notes.append(
            "the node fingerprint rebuilt from the recorded capture differs from the recorded one "
            "(topology classification changed since): the profile uses the rebuilt one"
        )
    return block, notes


def decide_and_write(
    evidence: Mapping[str, Any], evidence_path: Path, out: Path, settings: DecideSettings, notes: list[str]
) -> ProbeResult:
    reference = EvidenceRef(path=_relative(evidence_path, out.parent), digest=_file_digest(evidence_path))
    profile, more_notes = build_profile(evidence, reference, settings)
    dump_profile(profile, out)
    return ProbeResult(profile.with_digest(), out, evidence_path, notes + more_notes, _preflight(evidence))


def _preflight(evidence: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The recorded preflight rows (evidence v1.3), none in older evidence."""
    return tuple(evidence.get("preflight") or ())


def _relative(path: Path, start: Path) -> str:
    try:
        return os.path.relpath(path, start)
    except ValueError:  # another drive on Windows: no relative path exists
        return str(path.resolve())


def _file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
