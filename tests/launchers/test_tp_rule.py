"""One TP rule for ``recommend``, ``exec`` and ``ab``: the TP size that runs is the launcher's own, read
from its arguments as its parser reads them, and a ``--tp`` that disagrees is refused with the same
line everywhere (the profile is not followed; ``--strict`` and ``ab`` exit 1)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from knob_cases import BY_NAME
from priced_profiles import FINGERPRINT

from topo_gate.cli import main
from topo_gate.launchers.command.parse import tp_disagreement

REASON = "--tp 2 disagrees with the command's TP size 4: the profile's TP 2 decisions do not apply"
CASE = BY_NAME["vllm-custom-off"]  # its TP 2 plan: --disable-custom-all-reduce


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    return CASE.write(tmp_path / "node.yaml")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_rule() -> None:
    assert tp_disagreement(2, 4) == REASON
    assert tp_disagreement(2, 2) is None
    assert tp_disagreement(2, None) is None  # the command names none: --tp is all there is


@pytest.mark.parametrize(
    "spelled", ["--tensor-parallel-size 4", "--tensor-parallel 4", "--tensor_parallel_size=4", "-tp=4"]
)
def test_recommend_does_not_print_the_tp2_plan_for_a_tp4_command_line(capsys, profile, spelled) -> None:
    argv = ["recommend", str(profile), "--tp", "2", "--launcher", "vllm", "--model", CASE.model]
    argv += ["--node-fingerprint", FINGERPRINT, "--launcher-args", spelled]
    code, out, err = _run(capsys, *argv)
    assert code == 0 and out == "\n", out  # the fallback: nothing of the TP 2 plan
    assert f"FALLBACK (launcher-default): {REASON}" in err
    code, out, err = _run(capsys, *argv, "--strict")
    assert code == 1 and out == "" and REASON in err


def test_recommend_with_an_agreeing_command_line_plans(capsys, profile) -> None:
    argv = ["recommend", str(profile), "--tp", "2", "--launcher", "vllm", "--model", CASE.model]
    code, out, err = _run(capsys, *argv, "--node-fingerprint", FINGERPRINT, "--launcher-args", "-tp 2")
    assert code == 0 and shlex.split(out) == ["--disable-custom-all-reduce"], err


def test_exec_and_ab_refuse_with_the_same_line(capsys, profile, tmp_path) -> None:
    script = tmp_path / "launcher.py"
    script.write_text("print('ran')\n")
    cmd = ["--", sys.executable, str(script), "-tp", "4"]
    common = ["--profile", str(profile), "--tp", "2", "--launcher", "vllm", "--node-fingerprint", FINGERPRINT]
    code, out, err = _run(capsys, "exec", *common, "--strict", *cmd)
    assert code == 1 and out == "" and REASON in err
    code, out, err = _run(capsys, "ab", *common, "--metric-regex", "tps=t=(\\d+)", "--higher-is-better", *cmd)
    assert code == 1 and out == "" and f"no plan: {REASON}" in err
