"""evidence/document.py: built from plan results, written atomically, and every bad file refused in one line.

Bad inputs are data files in data/evidence/ with their expected message in expected-errors.json.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from gloo_helpers import gloo_plan

from topo_gate.cli import main
from topo_gate.evidence.document import (
    WRITTEN_FORMAT,
    EvidenceError,
    evidence_from_results,
    load_evidence,
    trials_meta,
    write_evidence,
)
from topo_gate.trials.plan import Skipped
from topo_gate.trials.results import BackendOutcome, PlanResult

DATA = Path(__file__).parent / "data" / "evidence"
CAPTURES = Path(__file__).parents[1] / "fixtures" / "captures"
EXPECTED = json.loads((DATA / "expected-errors.json").read_text())
NODE = {"fingerprint": "sha256:" + "0" * 64, "hardware": {}, "software": {}, "provenance": {}}


def recorded_result() -> PlanResult:
    """A plan result as the runner builds it: one backend measured, one that timed out."""
    plan = gloo_plan(tokens=(1,), rounds=2)
    measured = {
        "backend": "gloo", "tokens": 1, "nbytes": 64, "status": "ok", "reason": None,
        "samples_us": [12.5, 11.0], "per_rank_us": [[12.5, 10.0], [9.0, 11.0]], "skew_us": [0.4, 0.2],
        "graph_calls": 4, "max_abs_err": 0.0,
    }  # fmt: skip
    hung = {**measured, "backend": "gloo_ring", "status": "timeout", "reason": "no progress for 2 s",
            "samples_us": [], "per_rank_us": [], "skew_us": [], "max_abs_err": None}  # fmt: skip
    outcomes = {"gloo": BackendOutcome("ok"), "gloo_ring": BackendOutcome("timeout", "no progress for 2 s")}
    return PlanResult(plan, outcomes, [measured, hung], attempts=2)


def test_evidence_round_trips_through_a_file(tmp_path: Path) -> None:
    result = recorded_result()
    capture = json.loads((CAPTURES / "h200-x2.real.json").read_text(encoding="utf-8"))
    evidence = evidence_from_results(
        [result], NODE, trials_meta([result.plan]), [Skipped(4, "node has 2 usable GPUs")],
        capture=capture, created=datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc),
    )  # fmt: skip
    path = write_evidence(tmp_path / "evidence.json", evidence)
    loaded = load_evidence(path)
    assert loaded == evidence
    assert loaded["format"] == WRITTEN_FORMAT and loaded["created"] == "2026-11-30T08:00:00Z"
    assert loaded["node"]["capture"] == capture
    assert loaded["skipped"] == [{"tp": 4, "reason": "node has 2 usable GPUs"}]
    assert loaded["budget"] == {"seconds": None, "dropped": []}  # v1.2: no budget, nothing left out
    assert loaded["trials"]["method"] == {"graph_calls": 4, "rounds": 2, "warmup": 1}
    run = loaded["runs"][0]
    assert run["backends"]["gloo_ring"] == {"status": "timeout", "reason": "no progress for 2 s"}
    assert [r["status"] for r in run["results"]] == ["ok", "timeout"]


def test_invalid_evidence_is_never_written(tmp_path: Path) -> None:
    evidence = evidence_from_results([recorded_result()], NODE, trials_meta([gloo_plan()]))
    evidence["runs"][0]["results"][0]["samples_us"] = []
    with pytest.raises(ValueError, match="status ok without samples"):
        write_evidence(tmp_path / "evidence.json", evidence)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_evidence_is_refused_in_one_line(name: str) -> None:
    with pytest.raises(EvidenceError) as caught:
        load_evidence(DATA / name)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(DATA / name)) and EXPECTED[name] in message


def test_a_minor_version_with_unknown_fields_is_read() -> None:
    assert load_evidence(DATA / "good-minor-version.json")["future_field"] == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [(lambda p: p, "is a directory, not an evidence file"), (lambda p: p / "none.json", "no such file")],
)
def test_unreadable_paths_are_one_line_errors(tmp_path: Path, make, message: str) -> None:
    with pytest.raises(EvidenceError, match=message):
        load_evidence(make(tmp_path))


@pytest.mark.parametrize("command", ["decide", "probe --replay"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_evidence_is_the_input_error_exit_in_one_line(
    name: str, command: str, tmp_path: Path, capsys
) -> None:
    """Malformed but parseable evidence included: exit 3, one line naming the file and the field."""
    path = DATA / name
    argv = [*command.split(), str(path), "--out", str(tmp_path / "p.yaml")]
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"topo-gate: error: {path}: ") and EXPECTED[name] in err
    assert not (tmp_path / "p.yaml").exists()


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "evidence.json"
    os.mkfifo(fifo)  # opening it for reading would block forever without O_NONBLOCK
    with pytest.raises(EvidenceError, match="is not a regular file, not an evidence file"):
        load_evidence(fifo)


def test_a_device_is_never_read() -> None:
    with pytest.raises(EvidenceError, match="/dev/zero: is not a regular file, not an evidence file"):
        load_evidence("/dev/zero")
