"""fleet outliers: a synthetic slow node is named with its cells; identical twins raise no alarm."""

from __future__ import annotations

import json

import pytest
from synthetic_fleet import LARGE, RUNS, twin

from topo_gate.cli import main
from topo_gate.fleet.evidence_set import load_fleet
from topo_gate.fleet.outliers import VERDICTS, find_outliers

pytestmark = pytest.mark.slow

# Cells measured ok that did not stop early (those are not scored): the same cells in both runs.
FULL_CELLS = sum(
    result["status"] == "ok" and not result.get("stopped_early")
    for run in RUNS[0]["runs"]
    for result in run["results"]
)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("first", [0, 6, 12])
def test_identical_twins_raise_no_alarm(write_fleet, first):
    report = find_outliers(load_fleet(write_fleet([twin(i) for i in range(first, first + 5)])))
    assert [node.verdict for node in report.nodes] == ["pass"] * 5
    assert all(node.scored == FULL_CELLS for node in report.nodes)  # every full-round cell, both patterns
    assert report.warnings == ()


@pytest.mark.slow
def test_a_node_8_percent_slower_on_one_backend_at_large_sizes_is_named(write_fleet, capsys):
    paths = write_fleet([twin(0), twin(1), twin(2, slow_backend="nccl"), twin(3), twin(4)])
    report = find_outliers(load_fleet(paths))
    assert [(node.name, node.verdict) for node in report.nodes] == [
        ("n0", "pass"),
        ("n1", "pass"),
        ("n2", "slower"),
        ("n3", "pass"),
        ("n4", "pass"),
    ]
    flagged = {(f.cell[1], f.cell[3], f.cell[4]) for f in report.nodes[2].flags}
    large = [14680064, 29360128, 58720256, 117440512]
    assert flagged == {
        (pattern, "nccl", size) for pattern in ("allreduce", "allreduce_rmsnorm") for size in large
    }
    assert all(4.5 < flag.z < 6.5 for flag in report.nodes[2].flags)  # 8% over the 1.5% floor
    code, out, err = run(capsys, "fleet", "outliers", *map(str, paths))
    assert code == 1
    assert err == "topo-gate: error: outlier node(s): n2 (slower)\n"
    assert f"n2: slower ({FULL_CELLS} cells scored)" in out
    assert "TP2 allreduce nccl @ 112 MiB (nvswitch): " in out and "(+8.0%, z +" in out


def test_json_lists_verdicts_and_cells(write_fleet, capsys):
    paths = write_fleet([twin(0), twin(1), twin(2, slow_backend="vllm_custom"), twin(3)])
    code, out, _ = run(capsys, "fleet", "outliers", "--json", *map(str, paths))
    report = json.loads(out)
    assert code == 1 and report["outliers"] == ["n2"]
    assert {node["verdict"] for node in report["nodes"]} <= set(VERDICTS)
    cells = report["nodes"][2]["flags"]
    assert {(c["backend"], c["nbytes"]) for c in cells} == {
        (r["backend"], r["nbytes"])
        for r in RUNS[0]["runs"][0]["results"]
        if r["backend"] == "vllm_custom" and r["nbytes"] >= LARGE and not r.get("stopped_early")
    }
    assert len(cells) == 3  # 14, 28 and 56 MiB; at 112 MiB vllm_custom stopped early: not scored
    assert all(c["z"] > 3.5 and c["node_us"] > c["fleet_us"] for c in cells)


def test_a_slowdown_inside_the_noise_floor_is_not_an_alarm(write_fleet):
    """The documented threshold: 3.5 x 1.5% = 5.25% from the fleet median; 3% is within it."""
    paths = write_fleet([twin(0), twin(1), twin(2, slow_backend="nccl", factor=1.03), twin(3)])
    assert [node.verdict for node in find_outliers(load_fleet(paths)).nodes] == ["pass"] * 4


def test_a_faster_node_is_reported_too(write_fleet):
    paths = write_fleet([twin(0), twin(1), twin(2, slow_backend="vllm_custom", factor=0.85), twin(3)])
    report = find_outliers(load_fleet(paths))
    assert report.nodes[2].verdict == "faster"
    assert all(flag.z < -3.5 for flag in report.nodes[2].flags)


def test_a_backend_that_fails_only_on_one_node_is_an_error(write_fleet, capsys):
    broken = twin(1)
    for result in broken["runs"][0]["results"]:
        if result["backend"] == "trtllm_oneshot" and result["nbytes"] < LARGE:
            result.update(status="wrong", samples_us=[])
    paths = write_fleet([twin(0), broken, twin(2), twin(3)])
    report = find_outliers(load_fleet(paths))
    assert report.nodes[1].verdict == "error"
    assert {flag.problem for flag in report.nodes[1].flags} == {"wrong"}
    code, out, _ = run(capsys, "fleet", "outliers", *map(str, paths))
    assert code == 1 and "trtllm_oneshot @ 14 KiB (nvswitch): wrong here, ok on the others" in out


def test_two_nodes_are_too_thin_to_judge(write_fleet, capsys):
    paths = write_fleet([twin(0), twin(1, slow_backend="nccl", factor=1.5)])
    code, out, err = run(capsys, "fleet", "outliers", *map(str, paths))
    assert code == 0
    assert out == "n0: no data (0 cells scored)\nn1: no data (0 cells scored)\n"
    assert "thin evidence: 2 node(s); a robust z-score needs at least 3 nodes" in err


def test_few_rounds_are_called_thin(write_fleet):
    short = twin(2)
    short["trials"]["method"]["rounds"] = 5
    report = find_outliers(load_fleet(write_fleet([twin(0), twin(1), short])))
    assert any("n2 ran 5 rounds per cell" in warning for warning in report.warnings)
