"""What a first-time user reads, beyond the golden screens under tests/golden (the help's account of
what a launcher does without a profile, the probe's one-line usage errors): the no-GPU hints (real
recorded files, named) and the flat-set hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.cli._hints import REAL_CAPTURE, REAL_EVIDENCE
from topo_gate.probe.replay import replayed_node
from topo_gate.topology.capture import load_capture
from topo_gate.topology.fingerprint import node_fingerprint
from topo_gate.topology.model import build_node

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_hinted_files_are_the_real_h200_recordings() -> None:
    evidence = REPO / REAL_EVIDENCE
    capture = load_capture(REPO / REAL_CAPTURE)
    assert not capture.synthetic and "examples" not in REAL_EVIDENCE
    # The capture is the node the evidence was recorded on: the same class as its profile. The
    # profile's node is the one replay rebuilds from the evidence (replayed_node), without deciding.
    recorded = json.loads(evidence.read_text())["node"]
    node_block, _ = replayed_node(recorded)
    assert node_fingerprint(build_node(capture)) == node_block["fingerprint"]
    assert [g["uuid"] for g in recorded["capture"]["gpus"]] == [g.uuid for g in capture.gpus]


def test_probe_without_a_gpu_names_the_real_evidence(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # an installed topo-gate: the hint is the same, a clone's path
    code, _, err = run(capsys, "probe", "--tp", "2", "--hidden", "64", "--out", str(tmp_path / "p.yaml"))
    assert code == 4
    assert err.count("\n") == 1
    assert f"`topo-gate probe --replay {REAL_EVIDENCE}`" in err and "synthetic" not in err


@pytest.mark.parametrize("argv", [["topo"], ["check", str(REPO / "profiles/h200-x2/h7168-run1.yaml")]])
def test_reading_the_node_without_a_gpu_names_a_real_capture(argv, capsys) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 4
    assert err.count("\n") == 1 and f"--from {REAL_CAPTURE}" in err


def test_the_documented_capture_command_runs(capsys, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    assert (
        "topo-gate topo --from profiles/h200-x2/h200-x2.capture.json"
        in (REPO / "docs/topology.md").read_text()
    )
    code, out, _ = run(capsys, "topo", "--from", REAL_CAPTURE)
    assert code == 0 and "2x NVIDIA H200" in out


def test_validate_on_a_folder_of_folders_says_sets_are_flat(capsys, tmp_path) -> None:
    nested = tmp_path / "profiles" / "h200-x2"
    nested.mkdir(parents=True)
    (nested / "node.yaml").write_bytes((REPO / "profiles/h200-x2/h7168-run1.yaml").read_bytes())
    code, _, err = run(capsys, "validate", str(tmp_path / "profiles"))
    assert code == 1 and err.count("\n") == 1
    assert "no profiles (*.yaml, *.yml) in the set (a set is flat" in err
    assert f"{nested}/" in err and f"`topo-gate validate {tmp_path / 'profiles' / '*' / '*.yaml'}`" in err


def test_validate_on_an_empty_folder_gives_no_nesting_hint(capsys, tmp_path) -> None:
    code, _, err = run(capsys, "validate", str(tmp_path))
    assert code == 1 and "flat" not in err


def test_validate_names_a_few_sub_folders_and_counts_the_rest(capsys, tmp_path) -> None:
    for name in "abcde":
        (tmp_path / name).mkdir()
        (tmp_path / name / "p.yml").write_text("{}")
    _, _, err = run(capsys, "validate", str(tmp_path))
    assert f"{tmp_path / 'c'}/ and 2 more" in err and f"{tmp_path / 'd'}/" not in err


def test_every_readme_torch_install_names_the_cpu_index_in_the_line_itself() -> None:
    lines = [line for line in (REPO / "README.md").read_text().splitlines() if "pip install" in line]
    torch = [line for line in lines if "torch==" in line]
    assert torch, "the README installs torch for the tests"
    assert all("--index-url https://download.pytorch.org/whl/cpu" in line for line in torch)
    # --index-url replaces PyPI for that one command: the test extras are installed in another.
    assert all(".[test]" not in line.split("&&")[0] for line in torch)
