"""The A/B record: sealed, checked field by field on load, refused when edited."""

from __future__ import annotations

import json

import pytest
from ab_helpers import record_method

from topo_gate.ab.record import (
    FORMAT,
    RecordError,
    load_record,
    looks_like_record,
    record_problem,
    seal,
    write_record,
)


def minimal_record() -> dict:
    run = {
        "index": 0,
        "arm": "default",
        "round": 1,
        "status": "ok",
        "exit_code": 0,
        "value": 1.5,
        "reason": None,
        "tail": [],
        "stdout": "r/0.out",
        "stderr": "r/0.err",
        "result": None,
        "wall_s": 1.0,
    }
    arm = {
        "args": [],
        "env": {},
        "config": {},
        "added": [],
        "warnings": [],
        "notes": [],
        "reason": "as given",
        "same_as": None,
    }
    summary = {
        "rounds": [1],
        "samples": [1.5],
        "successes": 1,
        "failures": 0,
        "median": 1.5,
        "mean": 1.5,
        "spread": 0.0,
    }
    return {
        "format": FORMAT,
        "created": "2026-12-01T00:00:00Z",
        "tool": {"name": "topo-gate", "version": "0"},
        "command": ["vllm", "bench", "latency"],
        "launcher": "vllm",
        "launcher_version": "0.33.0",
        "benchmark": "vllm-latency",
        "result_via": "stdout",
        "metric": {"name": "avg_latency", "direction": "lower", "unit": "s"},
        "model": None,
        "hidden": None,
        "tp": 2,
        "profile": {"path": "p.yaml", "digest": None, "fingerprint": None},
        "node": {},
        "method": record_method("r", runs=1),
        "arms": {"default": arm, "plan": {**arm, "reason": "following the profile"}},
        "runs": [run],
        "summary": {"default": summary},
        "comparisons": [
            {
                "arm": "plan",
                "against": "default",
                "pairs": 0,
                "ratio": None,
                "ci": None,
                "verdict": "no verdict",
                "reason": "plan has 0 successful runs",
            }
        ],
        "verdict": "no verdict",
        "notes": [],
    }


def test_a_written_record_loads_back_whole(tmp_path) -> None:
    path = write_record(tmp_path / "ab.json", minimal_record())
    loaded = load_record(path)
    assert loaded == seal(minimal_record())
    assert loaded["digest"].startswith("sha256:") and looks_like_record(path)


def test_an_edited_record_is_refused(tmp_path) -> None:
    path = write_record(tmp_path / "ab.json", minimal_record())
    data = json.loads(path.read_text())
    data["runs"][0]["value"] = 9.0
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match="digest mismatch") as caught:
        load_record(path)
    assert caught.value.kind == "tampered"


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda r: r.pop("verdict"), "verdict: missing"),
        (lambda r: r.update(tp="2"), "tp: unexpected value"),
        (lambda r: r["runs"][0].update(status="great"), "runs[0].status"),
        (lambda r: r["runs"][0].update(arm="other"), "runs[0].arm"),
        (lambda r: r["runs"][0].update(value=None), "runs[0]: status ok with value None"),
        (lambda r: r["metric"].update(direction="up"), "metric.direction"),
        (lambda r: r["comparisons"][0].update(ci=[1]), "comparisons[0].ci"),
        (lambda r: r["arms"]["plan"].update(env={"A": 1}), "arms.plan.env"),
        (lambda r: r.update(format="topo-gate/ab/v9"), "format: expected"),
    ],
)
def test_a_malformed_record_names_the_field(tmp_path, edit, field) -> None:
    record = minimal_record()
    edit(record)
    assert field in (record_problem(seal(record)) or "")
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(seal(record)))
    with pytest.raises(RecordError, match="ab.json: ") as caught:
        load_record(path)
    assert caught.value.kind == "invalid" and field in str(caught.value)


def test_an_invalid_record_is_never_written(tmp_path) -> None:
    record = minimal_record()
    record["tp"] = None
    with pytest.raises(ValueError, match="tp: unexpected value"):
        write_record(tmp_path / "ab.json", record)
    assert not (tmp_path / "ab.json").exists()


@pytest.mark.parametrize("content", [None, "not json", "[1, 2]", '{"format": "topo-gate/ab/v1"'])
def test_unreadable_inputs_are_one_line(tmp_path, content) -> None:
    path = tmp_path / "ab.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(RecordError) as caught:
        load_record(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_profile_or_evidence_is_not_a_record(tmp_path) -> None:
    from ab_helpers import BUNDLED_PROFILE

    assert not looks_like_record(BUNDLED_PROFILE)
    assert not looks_like_record(tmp_path / "missing.json")
    assert not looks_like_record(tmp_path)
