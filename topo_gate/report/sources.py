"""What a report is made of: each input file as a profile (its decisions) plus the evidence behind it.

An input is either evidence (``topo-gate/evidence/v1``: the decisions are re-derived from it exactly
as ``topo-gate decide`` would) or a profile (its recorded decisions; the evidence it names, relative
to the profile, is loaded when present and its digest matches).  No matplotlib, no rich.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from topo_gate._inputs import InputError, RegularFile
from topo_gate.evidence.document import EvidenceError, load_evidence
from topo_gate.probe import DecideSettings, build_profile
from topo_gate.profile import Profile, ProfileDigestMismatch, ProfileError, load_profile
from topo_gate.profile.schema import EvidenceRef
from topo_gate.topology.errors import CaptureError

_EVIDENCE_MARK = b'"topo-gate/evidence/'
_SNIFF_BYTES = 1 << 16


class ReportInputError(Exception):
    """An input that cannot be reported on; the message is one line naming the file."""


@dataclass(frozen=True)
class Source:
    """One input: a label for legends and tables, its decisions, and its evidence when there is any."""

    label: str
    path: Path
    kind: str  # "evidence" or "profile"
    profile: Profile
    evidence: Mapping[str, Any] | None
    notes: tuple[str, ...] = ()

    @property
    def margin(self) -> float:
        return float(self.profile.trials.method.get("margin", DecideSettings().margin))

    @property
    def ci_level(self) -> float:
        return float(self.profile.trials.method.get("ci_level", DecideSettings().ci_level))

    @property
    def bootstrap(self) -> int:
        return int(self.profile.trials.method.get("bootstrap", DecideSettings().bootstrap))

    @property
    def baseline(self) -> str:
        device = (self.evidence or {}).get("trials", {}).get("device", "cuda")
        return "gloo" if device == "cpu" else "nccl"


def load_sources(paths: Sequence[Path], settings: DecideSettings) -> list[Source]:
    """Every input, labelled uniquely, in the order given."""
    labels = _labels(paths)
    sources = [_load(path, label, settings) for path, label in zip(paths, labels, strict=True)]
    return [replace(source, notes=(*_warnings(source), *source.notes)) for source in sources]


def _warnings(source: Source) -> list[str]:
    """What a reader must know before trusting any number of this input (as ``show`` says it)."""
    warnings = []
    if source.profile.node.provenance.get("synthetic") is True:
        warnings.append("SYNTHETIC: made-up numbers, not measured on any node")
    if source.profile.node.hardware.get("device") == "cpu" or source.baseline == "gloo":
        warnings.append("CPU harness (gloo): a demo of the pipeline, never valid for a GPU node")
    if source.evidence is not None and not source.evidence.get("runs"):
        warnings.append("the evidence holds no trial runs (every TP size skipped): nothing to plot")
    return warnings


def load_baseline(path: Path) -> Profile:
    """The ``--baseline`` profile, whether or not its digest still matches (a hand edit is compared
    as it reads); anything else wrong is a ``ReportInputError``."""
    try:
        return load_profile(path)
    except ProfileDigestMismatch:
        return load_profile(path, verify_digest=False)
    except ProfileError as error:
        raise ReportInputError(f"{path}: {error}") from None


def _load(path: Path, label: str, settings: DecideSettings) -> Source:
    if _looks_like_evidence(path):
        try:
            evidence = load_evidence(path)
        except EvidenceError as error:
            raise ReportInputError(str(error)) from None
        reference = EvidenceRef(path=path.name, digest=_file_digest(path))
        try:
            profile, notes = build_profile(evidence, reference, settings)
        except CaptureError as error:
            raise ReportInputError(f"{path}: {error}") from None
        except ProfileError as error:  # evidence that loads but implies no valid profile
            raise ReportInputError(f"{path}: the profile it implies is invalid: {error}") from None
        return Source(label, path, "evidence", profile.with_digest(), evidence, tuple(notes))
    notes = []
    try:
        profile = load_profile(path)
    except ProfileDigestMismatch as mismatch:
        profile = load_profile(path, verify_digest=False)
        notes.append(f"{mismatch}: launchers ignore this profile")
    except ProfileError as error:
        raise ReportInputError(f"{path}: {error}") from None
    named_evidence, evidence_notes = _profile_evidence(path, profile)
    return Source(label, path, "profile", profile, named_evidence, (*notes, *evidence_notes))


def _looks_like_evidence(path: Path) -> bool:
    """Evidence is JSON naming its format near the top; a profile is YAML (errors come from the
    profile loader, which names the problem for a missing or garbled file)."""
    try:
        with RegularFile(path, "an evidence file or a profile") as source:  # a FIFO is not waited on
            head = source.read_head(_SNIFF_BYTES)
    except InputError:
        return False
    return head.lstrip().startswith(b"{") and _EVIDENCE_MARK in head


def _profile_evidence(path: Path, profile: Profile) -> tuple[Mapping[str, Any] | None, list[str]]:
    reference = profile.evidence
    if reference is None:
        return None, ["the profile names no evidence: decisions only, no curves"]
    evidence_path = path.parent / reference.path
    if not evidence_path.is_file():
        return None, [f"its evidence {reference.path} is not there: decisions only, no curves"]
    if reference.digest is not None and _file_digest(evidence_path) != reference.digest:
        return None, [
            f"{reference.path} is not the evidence the profile was derived from "
            "(digest differs): decisions only, no curves"
        ]
    try:
        return load_evidence(evidence_path), []
    except EvidenceError as error:
        return None, [f"its evidence is unusable ({error}): decisions only, no curves"]


def _labels(paths: Sequence[Path]) -> list[str]:
    """Short names for legends: the file name without ``.evidence.json`` / ``.yaml``; the parent
    folder joins it when two inputs would otherwise share one."""
    short = [_stem(path) for path in paths]
    if len(set(short)) == len(short):
        return short
    long = [f"{path.parent.name}/{_stem(path)}" for path in paths]
    if len(set(long)) == len(long):
        return long
    return [f"{index + 1}: {name}" for index, name in enumerate(long)]


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".evidence.json", ".json", ".yaml", ".yml"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
