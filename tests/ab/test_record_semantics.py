"""An A/B record's derived fields must follow from its runs, as a profile's decisions from its
measurements: a resealed hand edit (data/resealed-records.yaml) is refused by ``load_record`` naming
the field, and ``show`` and ``report`` exit 1 on it (the README's "invalid or tampered")."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_record import minimal_record

from topo_gate.ab.arms import Arm
from topo_gate.ab.metrics import regex_metric
from topo_gate.ab.outcome import evaluate
from topo_gate.ab.record import RecordError, load_record, seal, write_record
from topo_gate.ab.record_check import semantic_problem
from topo_gate.ab.schedule import Slot
from topo_gate.ab.session import RunResult
from topo_gate.ab.verdict import overall
from topo_gate.cli import main

EDITS = yaml.safe_load((Path(__file__).parent / "data" / "resealed-records.yaml").read_text())
DEFAULT = [100.0, 101.0, 99.0, 100.0, 102.0]
PLAN = [90.0, 91.0, 89.5, 90.0, 91.5]  # 10% fewer tokens/s: a regression


def consistent_record(rounds: int = 5) -> dict[str, Any]:
    """A record whose summaries, comparison and verdict are what ``ab`` derives from its runs."""
    record = minimal_record()
    record["metric"] = {"name": "tps", "direction": "higher", "unit": "tok/s"}
    record["method"].update(runs=rounds)
    base = record["runs"][0]
    runs, results = [], []
    for round_index in range(1, rounds + 1):
        for arm, series in (("default", DEFAULT), ("plan", PLAN)):
            value = series[(round_index - 1) % len(series)]
            runs.append({**base, "index": len(runs), "arm": arm, "round": round_index, "value": value})
            slot = Slot(len(results), arm, round_index)
            results.append(RunResult(slot, "ok", 0, value, None, (), Path("o"), Path("e"), None, 1.0))
    record["runs"] = runs
    method = record["method"]
    arms = [Arm(name, ("x",), {}, {}) for name in ("default", "plan")]
    metric = regex_metric("tps=([0-9.]+)", higher_is_better=True)
    summaries, comparisons = evaluate(
        arms, results, metric=metric, margin=method["margin"], seed=method["seed"]
    )
    record["summary"] = {name: summary.to_dict() for name, summary in summaries.items()}
    record["comparisons"] = [comparison.to_dict() for comparison in comparisons]
    record["verdict"] = overall(comparisons).verdict  # type: ignore[union-attr]
    return record


def _edited(edit: dict[str, Any]) -> dict[str, Any]:
    if "repeat_runs" in edit:
        return consistent_record(edit["repeat_runs"])
    record = copy.deepcopy(consistent_record())
    for dotted, value in edit["set"].items():
        *parents, last = dotted.split(".")
        where: Any = record
        for key in parents:
            where = where[int(key)] if isinstance(where, list) else where[key]
        if isinstance(where, list):
            where[int(last)] = value
        else:
            where[last] = value
    return record


def test_the_consistent_record_passes_and_says_regression(tmp_path) -> None:
    record = consistent_record()
    assert record["verdict"] == "regression" and semantic_problem(seal(record)) is None
    assert load_record(write_record(tmp_path / "ab.json", record))["verdict"] == "regression"


@pytest.mark.parametrize("edit", EDITS, ids=[edit["why"] for edit in EDITS])
def test_a_resealed_edit_is_refused_naming_the_field(tmp_path, edit) -> None:
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(seal(_edited(edit))))
    with pytest.raises(RecordError) as caught:
        load_record(path)
    assert caught.value.kind == "invalid" and edit["error"] in str(caught.value)


@pytest.mark.parametrize("command", ["show", "report"])
def test_show_and_report_exit_1_on_a_resealed_edit(tmp_path, capsys, command) -> None:
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(seal(_edited(EDITS[0]))))
    argv = [command, str(path)] + (
        ["--out", str(tmp_path / "r"), "--format", "md"] if command == "report" else []
    )
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("topo-gate: error: ") and EDITS[0]["error"] in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r" / "summary.md").exists()


def test_report_exits_3_only_for_a_record_it_cannot_read(tmp_path, capsys) -> None:
    path = tmp_path / "ab.json"
    path.write_text('{"format": "topo-gate/ab/v1", ')  # cut short
    assert main(["report", str(path), "--out", str(tmp_path / "r"), "--format", "md"]) == 3
