"""No command writes over what it reads: an output that is an input (or another output) is exit 8,
naming both paths, and the input is left byte for byte as it was.

Files are told apart as the file system does: the same path, another spelling of it, a hard link, a
symlink to it, and a path not yet created inside a symlinked folder are all the same file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from topo_gate.cli import main

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
UNWRITABLE = 8


def _same(kind: str, tmp_path: Path) -> Callable[[Path], Path]:
    """A path naming the same file as ``path`` does, spelled another way."""

    def spelled(path: Path) -> Path:
        if kind == "same path":
            return path
        if kind == "dot-dot":
            (tmp_path / "sub").mkdir(exist_ok=True)
            return tmp_path / "sub" / ".." / path.name
        if kind == "hard link":
            other = tmp_path / f"hard-{path.name}"
            os.link(path, other)
            return other
        other = tmp_path / f"soft-{path.name}"
        other.symlink_to(path)
        return other

    return spelled


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _commands(evidence: Path, twin: Path, out: Path) -> dict[str, list[str]]:
    return {
        "decide": ["decide", str(evidence), "--out", str(out), "--bootstrap", "100"],
        "probe --replay": ["probe", "--replay", str(evidence), "--out", str(out)],
        "fleet merge": ["fleet", "merge", str(evidence), str(twin), "--out", str(out)],
        "report": ["report", str(evidence), "--out", str(out.parent), "--format", "md"],
    }


@pytest.mark.parametrize("kind", ["same path", "dot-dot", "hard link", "symlink"])
@pytest.mark.parametrize("command", ["decide", "probe --replay", "fleet merge", "report"])
def test_an_output_that_is_an_input_is_refused(command: str, kind: str, tmp_path: Path, capsys) -> None:
    name = "summary.md" if command == "report" else "node-a.evidence.json"
    evidence = tmp_path / name
    shutil.copy(EVIDENCE, evidence)
    twin = tmp_path / "node-b.evidence.json"
    shutil.copy(EVIDENCE, twin)
    before = _digest(evidence)
    other = _same(kind, tmp_path)(evidence)
    # report writes DIR/summary.md: the input is read through the other spelling, the output is it.
    argv = _commands(other, twin, tmp_path / name)[command] if command == "report" else None
    assert main(argv or _commands(evidence, twin, other)[command]) == UNWRITABLE
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("topo-gate: error: ")
    assert str(other) in err and str(evidence) in err
    assert "would destroy that input" in err  # said as an input it would destroy, not as two outputs
    assert _digest(evidence) == before


def test_probe_out_and_evidence_the_same_new_file_through_a_symlinked_folder(tmp_path: Path, capsys) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    argv = ["probe", "--device", "cpu", "--tp", "2", "--hidden", "64", "--rounds", "15"]
    assert main([*argv, "--out", str(tmp_path / "link" / "x.yaml"), "--evidence", str(real / "x.yaml")]) == 8
    _, err = capsys.readouterr()
    assert "same file" in err and str(real / "x.yaml") in err and str(tmp_path / "link" / "x.yaml") in err
    assert list(real.iterdir()) == []  # refused before any trial ran or any file was written


def test_probe_out_the_capture_it_plans_from(tmp_path: Path, capsys) -> None:
    capture = tmp_path / "node.json"
    shutil.copy(REPO / "tests" / "fixtures" / "captures" / "h200-x2.real.json", capture)
    before = _digest(capture)
    assert main(["probe", "--from", str(capture), "--hidden", "64", "--out", str(capture)]) == UNWRITABLE
    assert "(--from)" in capsys.readouterr().err
    assert _digest(capture) == before


def test_report_out_over_the_baseline_is_refused(tmp_path: Path, capsys) -> None:
    baseline = tmp_path / "summary.md"
    shutil.copy(REPO / "profiles" / "h200-x2" / "h7168-run1.yaml", baseline)
    argv = ["report", str(EVIDENCE), "--out", str(tmp_path), "--format", "md", "--baseline", str(baseline)]
    assert main(argv) == UNWRITABLE
    assert "(--baseline)" in capsys.readouterr().err


def test_distinct_files_are_written(tmp_path: Path) -> None:
    # The guard does not refuse what it should let through: a new file beside the input.
    assert main(["decide", str(EVIDENCE), "--out", str(tmp_path / "p.yaml"), "--bootstrap", "100"]) == 0
    assert (tmp_path / "p.yaml").is_file()


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda tmp: tmp / "plain-file" / "p.yaml", "a component of the path is not a folder"),
        (lambda tmp: tmp / "no-such-folder" / "p.yaml", "folder"),
    ],
    ids=["under a regular file", "in a folder that does not exist"],
)
def test_an_output_path_the_guard_cannot_place_is_left_to_the_writer_to_refuse(
    tmp_path: Path, capsys, make: Callable[[Path], Path], why: str
) -> None:
    """The clobbering guard compares what it can identify and leaves the rest to the write, which says
    why in one line (exit 8); the guard itself never fails on a path it cannot stat."""
    (tmp_path / "plain-file").write_text("", encoding="utf-8")
    out = make(tmp_path)
    assert main(["decide", str(EVIDENCE), "--out", str(out), "--bootstrap", "100"]) == UNWRITABLE
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"topo-gate: error: {out}: cannot write: ") and why in err


@pytest.mark.parametrize("role", ["output", "input"])
def test_a_path_with_a_nul_byte_is_not_a_crash_of_the_guard(tmp_path: Path, role: str) -> None:
    from topo_gate._atomic import refuse_clobbering

    hostile = f"{tmp_path}/a\0b.yaml"
    good = tmp_path / "p.yaml"
    outputs = [("--out", hostile if role == "output" else good)]
    inputs = [("EVIDENCE", hostile if role == "input" else EVIDENCE)]
    assert refuse_clobbering(outputs, inputs) is None  # nothing to compare with: no refusal, no error
