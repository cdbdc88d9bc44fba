"""The real profiles under profiles/ stay valid, sealed, tied to their evidence, and reproducible.

They are what a newcomer replays and what launch configs point at, so a schema, classification or
decision change that would silently alter them must show up here.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from topo_gate._units import speedup_text
from topo_gate.probe import preview
from topo_gate.profile import load_profile

pytestmark = pytest.mark.slow

PROFILES = Path(__file__).resolve().parents[1] / "profiles"
BUNDLED = sorted(p for p in PROFILES.rglob("*.yaml") if p.parent.name != "examples")
EXAMPLES = sorted((PROFILES / "examples").glob("*.yaml"))


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
    assert replayed.measurements == profile.measurements  # the price table (schema v1.3) too
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


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_synthetic_examples_are_what_their_script_and_decide_make(path: Path) -> None:
    """Not hand-typed YAML: scripts/synthetic_evidence.py writes the evidence, decide the profile."""
    sys.path.insert(0, str(PROFILES.parent / "scripts"))
    import synthetic_evidence

    evidence = path.parent / f"{path.stem}.evidence.json"
    assert json.loads(evidence.read_text(encoding="utf-8")) == synthetic_evidence.evidence(path.stem)
    profile = load_profile(path)
    assert profile.evidence.path == evidence.name
    replayed = preview(evidence).profile
    assert (replayed.decisions, replayed.measurements, replayed.skipped) == (
        profile.decisions,
        profile.measurements,
        profile.skipped,
    )
    provenance = profile.node.provenance
    assert provenance["synthetic"] is True and provenance["note"].startswith("SYNTHETIC: ")
    assert provenance["command"] == "python scripts/synthetic_evidence.py"


def test_the_pcie_example_wins_at_tp2_and_loses_at_tp4() -> None:
    """What the SM 12.0 PCIe example is for: PCIe IPC / custom all-reduce win at TP2, lose at TP4."""
    profile = load_profile(PROFILES / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml")
    assert {gpu["sm"] for gpu in profile.node.hardware["gpus"]} == {"12.0"}
    tp2 = profile.find(2, "allreduce", "pcie-switch")
    assert [rule.backend for rule in tp2.rules] == ["pcie_ipc", "vllm_custom", "nccl"]
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        assert [rule.backend for rule in profile.find(4, pattern, "pcie-hostbridge").rules] == ["nccl"]
        table = profile.measurement(4, "pcie-hostbridge", pattern)
        nccl = table.backends["nccl"].median_us
        for name, prices in table.backends.items():
            for column, value in enumerate(prices.median_us):
                assert value is None or name == "nccl" or value > nccl[column], (name, column)
    assert profile.measurement(4, "pcie-hostbridge", "allreduce").backends["vllm_custom"].status == (
        ("unavailable",) * 11
    )


def test_the_sm120_example_holds_only_what_its_trials_would_admit() -> None:
    """The fused all-reduce + RMSNorm kernels are refused on SM 12.0 by the trial backend's own rule
    (``trtllm_unavailable``), and each launcher variant of the one-shot kernel runs only where that
    launcher's rule picks one-shot: no example decision rests on a path no probe could time."""
    sys.path.insert(0, str(PROFILES.parent / "scripts"))
    import synthetic_evidence

    document = synthetic_evidence.evidence("synthetic-rtxpro6000-pcie-x4")
    fused = [
        (run["tp"], name, outcome)
        for run in document["runs"]
        for name, outcome in run["backends"].items()
        if name.startswith("trtllm_fused_")
    ]
    assert fused and all(
        outcome == {"status": "unavailable", "reason": "fused all-reduce + RMSNorm is enabled by launchers "
                    "on SM90/SM10x only, found SM120"}
        for _, _, outcome in fused
    )  # fmt: skip
    (tp4,) = [run for run in document["runs"] if run["tp"] == 4 and run["pattern"] == "allreduce"]
    (largest,) = [
        cell
        for cell in tp4["results"]
        if cell["backend"] == "trtllm_oneshot_sglang" and cell["tokens"] == 1024
    ]
    assert (largest["status"], largest["reason"]) == (
        "unavailable",
        "the launcher's flashinfer rule runs two-shot at this size",
    )
    profile = load_profile(PROFILES / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml")
    backends = {rule.backend for entry in profile.decisions for rule in entry.rules}
    assert not any(name.startswith("trtllm_fused_") for name in backends)
