"""A probe that could measure nothing writes nothing: on the recorded one-GPU H100 node (a real capture,
``fixtures/captures/h100-x1.real.json``) no TP size fits, so it refuses in one line with exit 2, and
neither a profile nor evidence appears (its words with the default TP sizes are a golden screen under
tests/golden). A TP size that did not fit is never shown as a decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo_gate.cli import main

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
ONE_H100 = CAPTURES / "h100-x1.real.json"
#: Evidence of a 2-GPU node probed at TP 2, 4 and 8: TP 4 and 8 were skipped.
TWO_GPUS = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.evidence.json"


@pytest.mark.parametrize(
    ("tps", "words"),
    [
        (("--tp", "2"), "this node has 1 usable GPU: TP 2 needs 2; nothing to probe"),
        (("--tp", "4,2"), "this node has 1 usable GPU: TP 4 and 2 need 4 and 2; nothing to probe"),
    ],
)
def test_on_one_gpu_the_probe_refuses_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tps: tuple[str, ...], words: str
) -> None:
    out = tmp_path / "p.yaml"
    code = main(["probe", "--from", str(ONE_H100), "--model", "llama-3.1-70b", "--out", str(out), *tps])
    assert code == 2
    assert capsys.readouterr().err == f"topo-gate: error: {words}\n"
    assert list(tmp_path.iterdir()) == []  # no profile, no evidence


def test_tp_1_alone_is_nothing_to_probe_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.yaml"
    assert main(["probe", "--from", str(ONE_H100), "--hidden", "8192", "--out", str(out), "--tp", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("topo-gate: error: nothing to probe: TP 1: ") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("columns", ["80", "200"])
def test_a_skipped_tp_size_reads_not_measured_never_nccl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert main(["probe", "--replay", str(TWO_GPUS), "--out", str(tmp_path / "p.yaml")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│ TP 4 ")]
    assert len(rows) == 1, "the decisions table has one row for the skipped TP 4"
    (row,) = rows
    assert "not measured" in row and "nccl" not in row
