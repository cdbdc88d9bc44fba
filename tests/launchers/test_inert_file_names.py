"""Text from a file or a file name reaches the terminal inert in every output: a workload file's name
in ``recommend --explain``'s total line and ``exec``'s estimate line, a profile set member's file name
in the "nothing to explain" line (``_terminal.shown``); the plugins' log line: tests/plugins/test_plugin_core.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from knob_cases import BY_NAME
from priced_profiles import FINGERPRINT

from topo_gate.cli import main

ESC = "\x1b]0;owned\x07\x1b[2J"  # retitles the window, clears the screen
CASE = BY_NAME["sglang-custom-off"]  # its plan: --disable-custom-all-reduce, priced over a workload


def _workload(tmp_path: Path) -> Path:
    path = tmp_path / f"w{ESC}.yaml"
    path.write_text("steps: {1: 1, 8: 1}\n")
    return path


def _recommend(capsys, profile: Path, *extra: str) -> tuple[int, str, str]:
    argv = ["recommend", str(profile), "--tp", "2", "--launcher", "sglang", "--model", CASE.model]
    code = main([*argv, "--node-fingerprint", FINGERPRINT, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_explain_total_line_shows_the_workload_files_name_inert(capsys, tmp_path) -> None:
    profile = CASE.write(tmp_path / "node.yaml")
    code, out, err = _recommend(capsys, profile, "--workload", str(_workload(tmp_path)), "--explain")
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    total = out.splitlines()[-1]
    assert total.startswith("workload 'w\\x1b]0;owned\\x07\\x1b[2J.yaml' (")
    assert len(out.splitlines()) > 2  # the table's own lines are kept, one per range


def test_a_fallbacks_reason_shows_a_profile_set_members_name_inert(capsys, tmp_path) -> None:
    """A fallback explains nothing but its reason (no price), and the reason names the member inert."""
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / f"bad{ESC}.yaml").write_text("not: a profile\n")
    code, out, err = _recommend(capsys, folder, "--explain")
    assert code == 0, err
    assert "\x1b" not in out + err
    assert out.strip() == ""  # no args to set, and no price of a fallback
    assert "FALLBACK (launcher-default): " in err and "unusable members: bad\\x1b]0;owned" in err


def test_the_trtllm_options_files_notes_are_inert_comments(capsys, tmp_path) -> None:
    """The chosen set member's name is a comment of the options file: a newline in it would end the
    comment and add a key (here: NCCL over the plan's TWOSHOT) to the file TensorRT-LLM reads."""
    case = BY_NAME["trtllm-twoshot"]
    folder = tmp_path / "set"
    folder.mkdir()
    case.write(folder / "n\nallreduce_strategy: NCCL\n#.yaml")
    argv = ["recommend", str(folder), "--tp", str(case.tp), "--launcher", "trtllm", "--model", case.model]
    env = ["--launcher-env", "TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1"]
    code = main([*argv, "--node-fingerprint", FINGERPRINT, *env, "--format", "yaml"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"# using profile set {folder}: n\\x0aallreduce_strategy: NCCL\\x0a#.yaml" in out.splitlines()
    assert yaml.safe_load(out) == {"allreduce_strategy": "TWOSHOT"}


def test_execs_estimate_line_shows_the_workload_files_name_inert(tmp_path) -> None:
    profile = CASE.write(tmp_path / "node.yaml")
    reporter = tmp_path / "launcher.py"
    reporter.write_text("print('started')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "TOPO_GATE_"))}
    child = subprocess.run(
        [sys.executable, "-m", "topo_gate", "exec", "--profile", str(profile), "--launcher", "sglang",
         "--model", CASE.model, "--node-fingerprint", FINGERPRINT, "--workload", str(_workload(tmp_path)),
         "--", sys.executable, str(reporter), "--tp-size", "2"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    assert "\x1b" not in child.stderr and child.stdout == "started\n"
    estimate = next(line for line in child.stderr.splitlines() if line.startswith("topo-gate: plan: "))
    assert "'w\\x1b]0;owned\\x07\\x1b[2J.yaml'" in estimate
