"""The real profiles under profiles/ stay valid, sealed, tied to their evidence, and reproducible.

They are what a newcomer replays and what launch configs point at, so a schema, classification or
decision change that would silently alter them must show up here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from topo_gate.probe import preview
from topo_gate.profile import load_profile
from topo_gate.profile.figures import speedup_text

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


def test_the_two_h200_runs_agree_on_at_least_95_percent_of_size_buckets() -> None:
    # The repeatability bar: per (TP, pattern, measured size) the same backend in both profiles.
    folder = PROFILES / "h200-x2"
    first, second = (load_profile(folder / f"h7168-run{i}.yaml") for i in (1, 2))
    evidence = json.loads((folder / "h7168-run1.evidence.json").read_text())
    buckets = [
        (run["tp"], run["pattern"], cell["nbytes"]) for run in evidence["runs"] for cell in run["results"]
    ]
    buckets = sorted(set(buckets))

    def backend(profile, tp: int, pattern: str, nbytes: int) -> str:
        entry = next(e for e in profile.decisions if (e.tp, e.pattern) == (tp, pattern))
        return entry.rule_for(nbytes)[1].backend

    same = [b for b in buckets if backend(first, *b) == backend(second, *b)]
    assert len(buckets) == 28
    assert len(same) / len(buckets) >= 0.95


def test_show_displays_the_in_context_figures(capsys) -> None:
    from topo_gate.cli import main

    path = PROFILES / "h200-x2" / "h7168-run1.yaml"
    rule = load_profile(path).decisions[0].rules[0]
    assert rule.in_context is not None
    assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "In context" in shown and f"in context {speedup_text(rule.in_context)}" in shown
    assert main(["show", str(path), "--json"]) == 0
    assert f'"in_context": {rule.in_context}' in capsys.readouterr().out
