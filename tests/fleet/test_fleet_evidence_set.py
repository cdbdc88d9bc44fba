"""Ambiguous fleets are refused by name: another class, another shape, one node twice."""

from __future__ import annotations

import json
import shutil

import pytest
from synthetic_fleet import H200_X2, twin

from topo_gate.cli import main
from topo_gate.fleet.evidence_set import FleetError, load_fleet, node_name


@pytest.mark.parametrize("command", ["merge", "outliers"])
def test_evidence_of_another_class_is_refused_by_name(write_fleet, capsys, tmp_path, command):
    other = twin(3)
    other["node"]["fingerprint"] = "sha256:" + "b" * 64
    paths = write_fleet([twin(0), twin(1), twin(2), other])
    extra = ["--out", str(tmp_path / "p.yaml")] if command == "merge" else []
    code = main(["fleet", command, *map(str, paths), *extra])
    _, err = capsys.readouterr()
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("topo-gate: error: evidence of another node class (fingerprint) refused: n3 (")
    assert not (tmp_path / "p.yaml").exists()


def test_an_even_split_refuses_every_node(write_fleet):
    other = twin(1)
    other["node"]["fingerprint"] = "sha256:" + "b" * 64
    with pytest.raises(FleetError, match=r"refused: n0, n1 \("):
        load_fleet(write_fleet([twin(0), other]))


def test_another_trial_shape_is_refused(write_fleet):
    other = twin(1)
    other["trials"]["hidden"] = 4096
    with pytest.raises(FleetError, match="n1 measured bfloat16 hidden 4096 on cuda, n0 bfloat16 hidden 7168"):
        load_fleet(write_fleet([twin(0), other]))


def test_two_runs_on_one_node_are_not_two_nodes():
    runs = [H200_X2 / "h7168-run1.evidence.json", H200_X2 / "h7168-run2.evidence.json"]
    first_gpu = json.loads(runs[0].read_text(encoding="utf-8"))["node"]["provenance"]["gpu_uuids"][0]
    with pytest.raises(FleetError, match=f"measured the same GPU {first_gpu}"):
        load_fleet(runs)


def test_the_same_file_twice_and_one_name_twice(write_fleet, tmp_path):
    [path] = write_fleet([twin(0)])
    with pytest.raises(FleetError, match="both name node 'n0'"):
        load_fleet([path, path])
    (tmp_path / "copy").mkdir()
    shutil.copy(path, tmp_path / "copy" / "other.evidence.json")
    with pytest.raises(FleetError, match="are the same evidence: one node counted twice"):
        load_fleet([path, tmp_path / "copy" / "other.evidence.json"])


def test_unreadable_evidence_exits_3(tmp_path, capsys):
    (tmp_path / "x.evidence.json").write_text("{")
    assert main(["fleet", "outliers", str(tmp_path / "x.evidence.json")]) == 3
    assert "not JSON" in capsys.readouterr().err


def test_node_names_come_from_file_names(tmp_path):
    assert node_name(tmp_path / "gpu-a17.evidence.json") == "gpu-a17"
    assert node_name(tmp_path / "gpu-a17.json") == "gpu-a17"
    assert node_name(tmp_path / ".evidence.json") == ".evidence"
