"""The real profiles under profiles/ stay valid, sealed, tied to their evidence, and reproducible.

They are what a newcomer replays and what launch configs point at, so a schema, classification or
decision change that would silently alter them must show up here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from topo_gate.probe import preview
from topo_gate.profile import load_profile

PROFILES = Path(__file__).resolve().parents[1] / "profiles"
BUNDLED = sorted(p for p in PROFILES.rglob("*.yaml") if p.parent.name != "examples")


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: str(p.relative_to(PROFILES)))
def test_bundled_profile_loads_and_its_evidence_is_the_recorded_file(path: Path) -> None:
    profile = load_profile(path)  # raises on schema or digest problems
    assert profile.evidence is not None, "a real profile must point at its evidence"
    evidence = path.parent / profile.evidence.path
    assert "sha256:" + hashlib.sha256(evidence.read_bytes()).hexdigest() == profile.evidence.digest


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: str(p.relative_to(PROFILES)))
def test_replaying_the_evidence_reproduces_the_decisions(path: Path) -> None:
    profile = load_profile(path)
    replayed = preview(path.parent / profile.evidence.path).profile
    assert replayed.node.fingerprint == profile.node.fingerprint
    assert replayed.decisions == profile.decisions
    assert replayed.skipped == profile.skipped


def test_the_two_h200_runs_agree() -> None:
    # Issue 5's repeatability bar: >= 95% of size buckets alike; these two agree everywhere.
    first, second = (load_profile(PROFILES / "h200-x2" / f"h7168-run{i}.yaml") for i in (1, 2))
    ladders = [
        [(e.tp, e.pattern, [(r.max_bytes, r.backend) for r in e.rules]) for e in p.decisions]
        for p in (first, second)
    ]
    assert ladders[0] == ladders[1]
