"""The user's command line is read once per ``exec``, and a plan reads no line per candidate.

A reading is the launcher's parser replayed on a line (``options.Table.read``: SGLang and vLLM, and
every option lookup of a merge) or TensorRT-LLM's click options read off one (``forms.trtllm_options``);
the tests count both. A plan prices dozens of candidates (``CANDIDATES_AT_LEAST``), each merged with
the user's knobs: the merge works on the knobs as read once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from topo_gate.cli import exec_
from topo_gate.launchers import PLANNERS, PlanRequest
from topo_gate.launchers.command import forms, options
from topo_gate.launchers.command import parse as cmdline
from topo_gate.launchers.command.user_command import read_command

PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "h200-x2" / "h7168-run1.yaml"
FINGERPRINT = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))["node"]["fingerprint"]
#: Lines as a user hands them to ``exec`` (``python -m``: an interpreter this test can find on PATH),
#: each with a flag of the user's own besides the TP size and the served model.
COMMANDS = {
    "vllm": (
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "Qwen/Qwen3-32B",
        "-tp",
        "2",
        "--max-model-len",
        "8192",
    ),
    "sglang": (
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-32B",
        "--tp-size",
        "2",
        "--mem-fraction-static",
        "0.85",
    ),
    "trtllm": (sys.executable, "-m", "tensorrt_llm.commands.serve", "Qwen/Qwen3-32B", "--tp_size", "2"),
}
#: The SGLang and vLLM plans on this profile price this many candidates or more (every combination of
#: their knob values): a reading per candidate would show as that many readings.
CANDIDATES_AT_LEAST = 20


@pytest.fixture
def readings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The launcher of every reading of a line from here on, in order."""
    seen: list[str] = []
    replay = options.Table.read
    click_options = forms.trtllm_options

    def counted_replay(self: options.Table, args: Sequence[str]) -> options.Reading:
        seen.append(self.launcher)
        return replay(self, args)

    def counted_click_options(args: Sequence[str]) -> list[forms.ClickOption]:
        seen.append("trtllm")
        return click_options(args)

    monkeypatch.setattr(options.Table, "read", counted_replay)
    monkeypatch.setattr(forms, "trtllm_options", counted_click_options)
    return seen


@pytest.mark.parametrize("launcher", ["vllm", "sglang"])
def test_exec_reads_the_command_line_once(
    launcher: str, readings: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started = []
    monkeypatch.setattr(exec_, "exec_merged", lambda merged, plan: started.append((merged, plan)))
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)
    argv = ["--profile", str(PROFILE), "--node-fingerprint", FINGERPRINT, "--", *COMMANDS[launcher]]
    result = CliRunner().invoke(exec_.command, argv)
    assert result.exit_code == 0, result.output
    [(merged, plan)] = started
    assert not plan.fallback, plan.reason
    assert plan.choice is not None and len(plan.choice.rejected) + 1 >= CANDIDATES_AT_LEAST
    assert merged.argv[: len(COMMANDS[launcher])] == COMMANDS[launcher]
    assert readings == [launcher]


@pytest.mark.parametrize("launcher", ["vllm", "sglang", "trtllm"])
def test_a_plan_for_a_line_read_at_the_door_reads_no_line(launcher: str, readings: list[str]) -> None:
    command = read_command(launcher, COMMANDS[launcher], {}, None)
    readings.clear()
    request = PlanRequest(PROFILE, tp=2, model="qwen3-32b", fingerprint=FINGERPRINT, command=command)
    plan = PLANNERS[launcher](request)
    assert not plan.fallback, plan.reason
    assert readings == []


@pytest.mark.parametrize("launcher", ["vllm", "sglang"])
def test_a_plan_for_a_line_not_yet_read_reads_it_once_whatever_the_candidates(
    launcher: str, readings: list[str]
) -> None:
    request = PlanRequest(
        PROFILE, tp=2, model="qwen3-32b", fingerprint=FINGERPRINT, user_args=COMMANDS[launcher], user_env={}
    )
    plan = PLANNERS[launcher](request)
    assert plan.choice is not None and len(plan.choice.rejected) + 1 >= CANDIDATES_AT_LEAST
    assert readings == [launcher]


def test_a_command_stands_for_the_args_env_and_release_it_was_read_with() -> None:
    command = read_command("vllm", COMMANDS["vllm"], {}, None)
    with pytest.raises(ValueError, match="takes its args, env and release from it alone"):
        PlanRequest(PROFILE, tp=2, command=command, user_args=("--max-model-len", "8192"))


def test_a_command_read_for_another_launcher_is_refused() -> None:
    command = read_command("vllm", COMMANDS["vllm"], {}, None)
    with pytest.raises(ValueError, match="a sglang plan asked for a vllm command line"):
        PLANNERS["sglang"](PlanRequest(PROFILE, tp=2, fingerprint=FINGERPRINT, command=command))


CORPUS = yaml.safe_load((Path(__file__).parent / "cmdline" / "corpus.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", [c for c in CORPUS if "error" not in c], ids=lambda c: c["id"])
def test_the_knobs_line_built_from_a_reading_is_the_line_read_from_the_knobs(
    case: dict, tmp_path: Path
) -> None:
    """The merge works on the user's knobs as built from the reading of their whole line; reading
    the knobs' own args gives the same options, destinations and forms."""
    for name, text in (case.get("files") or {}).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    argv = [token.replace("{dir}", str(tmp_path)) for token in case["argv"]]
    entry = cmdline.find_entry(argv)
    assert entry is not None  # every case of the corpus starts its launcher
    launcher = entry.launcher
    built = cmdline.user_knobs_of(cmdline.read(launcher, argv), {})
    assert built.line == cmdline.read(launcher, built.knobs.args)
