"""``show`` of a profile copied away from its evidence is dated by its own ``created`` (the bundled
profile's screens, at 80 and 200 columns and with ``--verbose``, are golden files under tests/golden:
its why-cells cut to their first clause, its dates by the evidence's measurement)."""

from __future__ import annotations

from pathlib import Path

from topo_gate.cli import main

H200 = Path(__file__).resolve().parents[2] / "profiles/h200-x2/h7168-run1.yaml"


def test_a_profile_without_its_evidence_is_dated_by_its_own(capsys, monkeypatch, tmp_path) -> None:
    """The bundled profile was written by a replay a day after its trials: a copy without its evidence
    beside it is dated by its own ``created``."""
    monkeypatch.setenv("COLUMNS", "80")
    alone = tmp_path / "alone.yaml"
    alone.write_bytes(H200.read_bytes())
    assert main(["show", str(alone)]) == 0
    text = capsys.readouterr().out
    assert "Created      2026-12-01T22:15:21Z" in text and "Measured" not in text
