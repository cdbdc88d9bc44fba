"""A finished A/B session to its summaries, comparisons and record (topo_gate/ab/outcome.py): which
arms are summarized and compared, warm-ups left out, the options ``evaluate`` takes by keyword only,
and each run's entry in the record: wall time to the millisecond, log paths relative to the record's
folder where they lie under it and absolute elsewhere."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from topo_gate.ab.arms import Arm
from topo_gate.ab.metrics import regex_metric
from topo_gate.ab.outcome import build_record, evaluate
from topo_gate.ab.schedule import Slot
from topo_gate.ab.session import RunResult
from topo_gate.ab.verdict import IDENTICAL, REGRESSION

METRIC = regex_metric("tps=([0-9.]+)", higher_is_better=True)
DEFAULT = {1: 100.0, 2: 101.0, 3: 99.0, 4: 100.0, 5: 102.0}
PLAN = {1: 90.0, 2: 91.0, 3: 89.5, 4: 90.0, 5: 91.5}  # 10% fewer tokens/s


def _arm(name: str, same_as: str | None = None) -> Arm:
    knobs: dict[str, object] = {"env": {}, "added": [], "warnings": [], "same_as": same_as}
    return Arm(name, ("bench",), {}, knobs, (), same_as)


def _result(index: int, arm: str, round_index: int | None, value: float | None, **paths: Path) -> RunResult:
    slot = Slot(index, arm, round_index)
    stdout = paths.get("stdout", Path(f"o{index}"))
    stderr = paths.get("stderr", Path(f"e{index}"))
    return RunResult(slot, "ok", 0, value, None, (), stdout, stderr, paths.get("result"), 1.0)


def _session(series: dict[str, dict[int, float]]) -> list[RunResult]:
    """A warm-up of each arm (a value far off, which must not count), then the rounds."""
    results = [_result(i, arm, None, 1.0) for i, arm in enumerate(series)]
    for round_index in DEFAULT:
        for arm, values in series.items():
            results.append(_result(len(results), arm, round_index, values[round_index]))
    return results


def test_each_measured_arm_is_summarized_from_its_rounds_and_compared_with_the_default() -> None:
    arms = [_arm("default"), _arm("plan"), _arm("nccl", same_as="default")]
    summaries, comparisons = evaluate(
        arms, _session({"default": DEFAULT, "plan": PLAN}), metric=METRIC, margin=0.02, seed=0
    )
    # nccl repeats the default's command: it never ran, so it has no summary and is identical.
    assert list(summaries) == ["default", "plan"]
    assert summaries["plan"].samples == tuple(PLAN.values()) and summaries["plan"].rounds == (1, 2, 3, 4, 5)
    assert summaries["default"].median == 100.0
    assert [(c.arm, c.verdict) for c in comparisons] == [("plan", REGRESSION), ("nccl", IDENTICAL)]


def test_evaluate_takes_its_options_by_keyword_only() -> None:
    arms = [_arm("default"), _arm("plan")]
    results = _session({"default": DEFAULT, "plan": PLAN})
    # Positional margin and seed are two bare numbers, easy to swap unseen.
    with pytest.raises(TypeError):
        evaluate(arms, results, METRIC, 0.02, 0)  # type: ignore[call-arg]


def _record(results: list[RunResult], folder: Path, *, logs: Path | None = None) -> dict:
    arms = [_arm("default"), _arm("plan")]
    summaries, comparisons = evaluate(arms, results, metric=METRIC, margin=0.02, seed=0)
    return build_record(
        command=["bench"],
        launcher="vllm",
        launcher_version="0",
        metric=METRIC,
        result_via="stdout",
        model=None,
        hidden=None,
        tp=2,
        profile={},
        node={},
        method={"logs": str(logs or folder / "ab.runs")},
        arms=arms,
        results=results,
        summaries=summaries,
        comparisons=comparisons,
        notes=[],
        folder=folder,
    )


@pytest.mark.parametrize(
    "wall_s, recorded",
    [(12.3456, 12.346), (12.3454, 12.345), (0.0004, 0.0), (0.0005001, 0.001)],
)
def test_a_runs_wall_time_is_recorded_to_the_millisecond(tmp_path, wall_s, recorded) -> None:
    run = dataclasses.replace(_result(0, "default", 1, 100.0), wall_s=wall_s)
    assert _record([run], tmp_path)["runs"][0]["wall_s"] == recorded


def test_log_paths_are_relative_to_the_records_folder_and_absolute_outside_it(tmp_path) -> None:
    folder = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    run = _result(
        0,
        "default",
        1,
        100.0,
        stdout=folder / "ab.runs" / "0.out",
        stderr=elsewhere / "0.err",
        result=folder / "ab.runs" / "0.json",
    )
    entry = _record([run], folder)["runs"][0]
    assert entry["stdout"] == str(Path("ab.runs") / "0.out")
    assert entry["stderr"] == str((elsewhere / "0.err").resolve())
    assert entry["result"] == str(Path("ab.runs") / "0.json")
    assert _record([_result(0, "default", 1, 100.0)], folder)["runs"][0]["result"] is None


@pytest.mark.parametrize("inside", [True, False])
def test_the_logs_folder_is_recorded_relative_to_the_records_folder_where_it_lies_under_it(
    tmp_path, inside
) -> None:
    folder = tmp_path / "out"
    logs = folder / "ab.runs" if inside else tmp_path / "logs"
    method = _record([], folder, logs=logs)["method"]
    assert method["logs"] == ("ab.runs" if inside else str(logs.resolve()))


def test_two_sessions_of_one_process_in_one_second_get_folders_of_their_own(tmp_path, monkeypatch) -> None:
    from topo_gate.ab import driver

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "ab.json"
    folders = [driver.logs_folder(None, out) for _ in range(3)]  # well within one second, one pid
    assert len(set(folders)) == 3 and all(f.is_dir() and f.parent == tmp_path / "ab.runs" for f in folders)
