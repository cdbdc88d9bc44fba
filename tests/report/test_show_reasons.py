"""``show`` at 80 columns: each range's why-cell is the first clause of its reason, said once to be
cut; ``--verbose`` prints the whole reason and the other backends faster than NCCL."""

from __future__ import annotations

from pathlib import Path

from topo_gate.cli import main
from topo_gate.profile.io import load_profile
from topo_gate.report.tables import CUT_NOTE

H200 = Path(__file__).resolve().parents[2] / "profiles/h200-x2/h7168-run1.yaml"


def _show(capsys, monkeypatch, *extra: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["show", str(H200), *extra]) == 0
    return capsys.readouterr().out


def test_the_why_cells_hold_the_first_clause_and_verbose_the_rest(capsys, monkeypatch) -> None:
    short, whole = _show(capsys, monkeypatch), _show(capsys, monkeypatch, "--verbose")
    reason = load_profile(H200).decisions[0].rules[1].reason
    detail = reason.split("; ")[1].split()[0]  # the first word after the first clause ("weakest")
    assert "size transition after" not in short and "also faster than" not in short
    assert "size transition after" in whole and "also faster than" in whole
    note = " ".join(CUT_NOTE.split())
    assert note in " ".join(short.split()) and note not in " ".join(whole.split())
    assert detail in whole
    assert len(short.splitlines()) < len(whole.splitlines()) - 40


def test_a_cpu_profiles_headings_say_gloo_and_ranks(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    cpu = Path(__file__).resolve().parents[2] / "tests/fixtures/profiles/cpu-harness-tp2.yaml"
    assert main(["show", str(cpu)]) == 0
    out = capsys.readouterr().out
    assert "(measured on gloo ranks [0, 1]), each backend vs gloo" in out
    assert "vs NCCL" not in out and "on GPUs" not in out


def test_a_replayed_profile_is_dated_by_its_measurement(capsys, monkeypatch, tmp_path) -> None:
    """The bundled profile was written by a replay a day after its trials: show dates it by the
    evidence's ``created``; a copy without its evidence beside it is dated by its own."""
    out = _show(capsys, monkeypatch)
    assert "Measured     2026-11-30T13:42:44Z (its evidence)" in out
    assert "Written      2026-12-01T22:15:21Z by topo-gate" in out
    alone = tmp_path / "alone.yaml"
    alone.write_bytes(H200.read_bytes())
    assert main(["show", str(alone)]) == 0
    text = capsys.readouterr().out
    assert "Created      2026-12-01T22:15:21Z" in text and "Measured" not in text
