"""One rule for the node a plan is made for, in ``recommend``, ``exec`` and ``ab``: ``--node-fingerprint``,
else (unless ``--from`` names a capture to read) the env ``TOPO_GATE_NODE_FINGERPRINT``, else the node
is read (``exec``, ``ab``) or the profile's class is trusted unverified (``recommend``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from knob_cases import BY_NAME
from priced_profiles import FINGERPRINT

from topo_gate.cli import main
from topo_gate.cli._node import given_fingerprint

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "profiles" / "h200-x2" / "h200-x2.capture.json"
ENV = "TOPO_GATE_NODE_FINGERPRINT"
OTHER = "sha256:" + "cd" * 32
REPORTER = "import json, os; print(json.dumps(os.environ.get('TOPO_GATE_NODE_FINGERPRINT')))"
CASE = BY_NAME["vllm-flashinfer-off"]  # a plan with knobs: a verified node changes CMD's environment


@pytest.mark.parametrize(
    ("option", "capture", "environ", "expected"),
    [
        (FINGERPRINT, None, {ENV: OTHER}, (FINGERPRINT, "--node-fingerprint")),  # the option wins
        (FINGERPRINT, "c.json", {}, (FINGERPRINT, "--node-fingerprint")),
        (None, None, {ENV: OTHER}, (OTHER, ENV)),  # then the environment
        (None, "c.json", {ENV: OTHER}, None),  # --from asks for a node to be read
        (None, None, {ENV: ""}, None),  # empty is unset, as in the plugins
        ("", None, {ENV: OTHER}, (OTHER, ENV)),
        (None, None, {}, None),
    ],
)
def test_the_rule(option, capture, environ, expected) -> None:
    assert given_fingerprint(option, capture, environ) == expected


def _exec(profile: Path, *extra: str, env_fingerprint: str | None) -> subprocess.CompletedProcess[str]:
    reporter = profile.with_name("reporter.py")  # stands in for the launcher: prints what it inherited
    reporter.write_text(REPORTER)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_", "TLLM_", "TOPO_GATE_"))
    }
    env.update(CASE.user_env)
    if env_fingerprint is not None:
        env[ENV] = env_fingerprint
    argv = [
        "--profile",
        str(profile),
        "--tp",
        str(CASE.tp),
        "--launcher",
        CASE.launcher,
        "--model",
        CASE.model,
    ]
    return subprocess.run(
        [sys.executable, "-m", "topo_gate", "exec", *argv, *extra, "--", sys.executable, str(reporter), "-tp", str(CASE.tp), "--model", "m", "--enforce-eager"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_exec_plans_for_the_node_in_the_environment(tmp_path) -> None:
    # No NVML on the test machine: without the variable exec would run CMD unchanged ("node not checked").
    done = _exec(CASE.write(tmp_path / "p.yaml"), env_fingerprint=FINGERPRINT)
    assert done.returncode == 0, done.stderr
    assert "node not checked" not in done.stderr
    assert "topo-gate: + VLLM_ALLREDUCE_USE_FLASHINFER=0" in done.stderr
    assert json.loads(done.stdout) == FINGERPRINT  # passed on to what it starts


def test_exec_checks_the_node_in_the_environment_against_the_profile(tmp_path) -> None:
    done = _exec(CASE.write(tmp_path / "p.yaml"), env_fingerprint=OTHER)
    assert done.returncode == 0, done.stderr
    assert "is not the kind the profile was measured on" in done.stderr
    assert "topo-gate: + VLLM_" not in done.stderr


def test_exec_reads_the_capture_it_is_given_over_the_environment(tmp_path) -> None:
    # The capture is the bundled H200's node, not the case profile's: a mismatch although the env matches.
    done = _exec(CASE.write(tmp_path / "p.yaml"), "--from", str(CAPTURE), env_fingerprint=FINGERPRINT)
    assert done.returncode == 0, done.stderr
    assert "is not the kind the profile was measured on" in done.stderr


def test_exec_without_the_variable_still_reads_the_node(tmp_path) -> None:
    done = _exec(CASE.write(tmp_path / "p.yaml"), env_fingerprint=None)
    assert done.returncode == 0, done.stderr
    assert "node not checked" in done.stderr  # no NVML here


def test_recommend_plans_for_the_node_in_the_environment(tmp_path, capsys, monkeypatch) -> None:
    profile = CASE.write(tmp_path / "p.yaml")
    argv = [
        "recommend",
        str(profile),
        "--tp",
        str(CASE.tp),
        "--launcher",
        CASE.launcher,
        "--model",
        CASE.model,
    ]
    argv += [f"--launcher-env={k}={v}" for k, v in CASE.user_env.items()]
    monkeypatch.setenv(ENV, OTHER)
    assert main(argv) == 0
    assert "is not the kind the profile was measured on" in capsys.readouterr().err
    monkeypatch.setenv(ENV, FINGERPRINT)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "FALLBACK" not in err and "not verified" not in err
