"""A GPU in use is a measurement spoiled: the probe reads what NVML says is running on the GPUs it
is about to time (recorded in the capture it plans from) and refuses a busy one unless --allow-busy,
which the evidence records. Boundaries: no process and 9% is idle; one process, or 10%, is busy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.probe.activity import BUSY_UTILIZATION_PCT, activity
from topo_gate.topology.answers import Unknown, UnknownReason
from topo_gate.topology.capture import load_capture

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
TWO_H200 = CAPTURES / "h200-x2.real.json"
#: Recorded on a real one-GPU H100 node, idle and then while a torch process held memory on it.
ONE_H100, ONE_H100_BUSY = CAPTURES / "h100-x1.real.json", CAPTURES / "h100-x1-busy.real.json"


def with_activity(tmp_path: Path, processes: int | dict, utilization: int | dict) -> Path:
    data = json.loads(TWO_H200.read_text())
    data["gpus"][1].update(compute_processes=processes, utilization_gpu=utilization)
    data["gpus"][0].update(compute_processes=0, utilization_gpu=0)
    path = tmp_path / "busy.capture.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("processes", "utilization", "busy"),
    [
        (0, BUSY_UTILIZATION_PCT - 1, ()),
        (0, BUSY_UTILIZATION_PCT, ("GPU 1 (10% utilisation)",)),
        (1, 0, ("GPU 1 (1 compute process)",)),
        (3, 97, ("GPU 1 (3 compute processes, 97% utilisation)",)),
    ],
)
def test_busy_is_a_process_or_the_utilisation_bound(
    tmp_path: Path, processes: int, utilization: int, busy
) -> None:
    capture = load_capture(with_activity(tmp_path, processes, utilization))
    assert activity(capture, [0, 1]).busy == busy
    assert activity(capture, [0]).busy == ()  # only the GPUs the trials use count


def test_a_reading_nvml_could_not_give_is_said_not_taken_for_idle(tmp_path: Path) -> None:
    refused = {"unknown": "no_permission", "detail": "nvmlDeviceGetComputeRunningProcesses(gpu 1): no"}
    found = activity(load_capture(with_activity(tmp_path, refused, 0)), [0, 1])
    assert found.busy == () and found.unread == ("GPU 1 (processes no_permission)",)


def test_an_older_capture_without_activity_is_neither_busy_nor_unread() -> None:
    capture = load_capture(TWO_H200)
    assert capture.gpus[0].compute_processes == Unknown(
        UnknownReason.NOT_RECORDED, "not asked when this was recorded"
    )
    assert activity(capture, [0, 1]) == activity(capture, [])


def test_the_probe_refuses_a_busy_gpu_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = with_activity(tmp_path, 2, 97)
    out = tmp_path / "p.yaml"
    code = main(["probe", "--from", str(capture), "--tp", "2", "--hidden", "7168", "--out", str(out)])
    assert code == 6
    assert capsys.readouterr().err == (
        "topo-gate: error: busy GPU: GPU 1 (2 compute processes, 97% utilisation): a probe on a busy GPU "
        "times that load too; stop it, or pass --allow-busy to measure anyway (recorded in the evidence)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy.capture.json"]  # no profile, no evidence


def test_allow_busy_measures_anyway_and_the_evidence_records_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = with_activity(tmp_path, 2, 97)
    evidence = tmp_path / "e.json"
    argv = ["probe", "--from", str(capture), "--tp", "2", "--hidden", "7168", "--rounds", "15"]
    code = main(
        [
            *argv,
            "--max-tokens",
            "1",
            "--out",
            str(tmp_path / "p.yaml"),
            "--evidence",
            str(evidence),
            "--allow-busy",
        ]
    )
    err = capsys.readouterr()
    assert "busy GPU" not in err.err.partition("error:")[2]  # past the check: this machine has no GPU to time
    said = " ".join(err.out.split())  # the note wraps at the terminal's width
    assert "measuring on a busy GPU (--allow-busy): GPU 1 (2 compute processes, 97% utilisation)" in said
    recorded = json.loads(evidence.read_text())["activity"]
    assert recorded == {
        "allow_busy": True,
        "busy": ["GPU 1 (2 compute processes, 97% utilisation)"],
        "unread": [],
    }
    assert code == 6


def test_a_real_node_reads_idle_and_then_busy_while_a_process_holds_the_gpu() -> None:
    assert activity(load_capture(ONE_H100), [0]) == activity(load_capture(ONE_H100), [])
    assert activity(load_capture(ONE_H100_BUSY), [0]).busy == ("GPU 0 (1 compute process)",)
