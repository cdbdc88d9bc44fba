"""Inputs that used to end in ``internal error`` get their documented exit code and one line.

(Each class's own tests hold the rest: odd capabilities and GPU counts in tests/profile/malformed,
an asymmetric pair list in tests/topology/data/bad-captures, mathtext in tests/report/test_inert.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from topo_gate.cli import main
from topo_gate.profile import load_profile
from topo_gate.profile.digest import compute_digest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "profiles" / "examples" / "synthetic-h200x2.yaml"
CPU_EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"


def run(*argv: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "topo_gate", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_encode_the_text_gets_it_escaped(encoding: str, tmp_path: Path) -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    for gpu in data["node"]["hardware"]["gpus"]:
        gpu["model"] = "NVIDIA H200 \u4e2d\u6587"
    data["digest"] = compute_digest(data)
    profile = tmp_path / "\u4e2d.yaml"
    profile.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    shown = run("show", str(profile), env={"PYTHONIOENCODING": encoding, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert "H200 \\u4e2d\\u6587" in shown.stdout
    missing = run("validate", str(tmp_path / "\u4e2d-missing.yaml"), env={"PYTHONIOENCODING": encoding})
    assert (
        missing.returncode == 3 and missing.stderr.count("\n") == 1 and "internal error" not in missing.stderr
    )


def test_a_fifo_given_to_report_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "input.json"
    os.mkfifo(fifo)
    done = run("report", str(fifo), "--out", str(tmp_path / "r"), "--format", "md", timeout=60)
    assert done.returncode == 3 and "not a regular file" in done.stderr


def test_fleet_merge_of_evidence_with_an_empty_hostname(tmp_path: Path, capsys) -> None:
    evidence = json.loads(CPU_EVIDENCE.read_text())
    evidence["node"]["provenance"]["hostname"] = ""  # used to be ProfileInvalid escaping as a traceback
    path = tmp_path / "node-a.evidence.json"
    path.write_text(json.dumps(evidence))
    out = tmp_path / "fleet.yaml"
    assert main(["fleet", "merge", str(path), "--out", str(out), "--bootstrap", "100"]) == 0
    assert [node.hostname for node in load_profile(out).fleet.nodes] == [None]


@pytest.mark.parametrize("size", ["\u00b2", "\u2463", "4\u00bd"])
def test_a_tp_flag_with_digits_int_does_not_read_is_a_usage_error(size: str, tmp_path: Path) -> None:
    launcher = tmp_path / "vllm"  # never started: the line is refused first
    launcher.write_text("#!/bin/sh\nexit 99\n")
    launcher.chmod(0o755)
    path = {"PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = run("exec", "--profile", str(EXAMPLE), "--", "vllm", "serve", "m", "-tp", size, env=path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("topo-gate: error: vllm would refuse CMD: --tensor-parallel-size")
