"""``recommend --explain`` as a user reads it, beyond the screens tests/golden pins whole (the bundled
H200 and PCIe profiles, at 80 and 200 columns and to a pipe): the first line of a plan names it, its
saving and where it binds; the JSON rows carry bytes beside tokens; the model warning in every format;
a fallback without a price in JSON; TP 1 with nothing to plan; a CPU-harness profile refused in one
line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from knob_cases import BY_NAME

from topo_gate.cli import main

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "profiles/h200-x2/h7168-run1.yaml"
# Recorded by `topo-gate probe --device cpu --tp 2 --hidden 64 --max-tokens 1` (gloo on 2 CPU processes).
CPU_HARNESS = ROOT / "tests/fixtures/profiles/cpu-harness-tp2.yaml"


@pytest.fixture(autouse=True)
def no_terminal(monkeypatch) -> None:
    """Output to a pipe: each line whole."""
    monkeypatch.delenv("COLUMNS", raising=False)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["recommend", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _explain_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line]


def test_the_first_line_of_a_plan_names_it_its_saving_and_where_it_binds(capsys, tmp_path) -> None:
    case = BY_NAME["sglang-custom-off"]
    profile = case.write(tmp_path / "node.yaml")
    code, out, _ = run(
        capsys, str(profile), "--launcher", "sglang", "--tp", "2", "--model", case.model, "--explain"
    )
    assert code == 0
    first = _explain_lines(out)[1]  # after the knobs themselves on stdout
    assert first.startswith("plan: --disable-custom-all-reduce (est. -")
    assert "all-reduce time per step); it comes closest to the default's limit at " in first


def test_the_json_rows_carry_bytes_beside_tokens(capsys) -> None:
    argv = (str(H200), "--launcher", "sglang", "--tp", "2", "--model", "llama-3-70b", "--json")
    _, out, _ = run(capsys, *argv)
    data = json.loads(out)
    first = data["explain"][0]
    assert first["tokens"] == [1, 1024] and first["bytes"] == [16384, 16384 * 1024]
    # Figures only: the cause the summary line names is its first unmeasured entry, in words there.
    assert "summary" not in data["price"] and data["price"]["knobs"] == ""
    assert data["price"]["unmeasured"][0]["runs"].startswith("SGLang 0.5.23 runs custom_v2_sglang")


@pytest.mark.parametrize("fmt", ["args", "env", "json", "yaml"])
def test_without_a_model_every_format_warns_on_stderr(capsys, fmt: str) -> None:
    code, out, err = run(capsys, str(H200), "--launcher", "vllm", "--tp", "2", "--format", fmt)
    assert code == 0
    assert "topo-gate: warning: no --model/--hidden:" in err and "warning" not in out
    _, _, err = run(capsys, str(H200), "--launcher", "vllm", "--tp", "2", "--format", fmt, "--hidden", "7168")
    assert "no --model/--hidden" not in err


def test_a_fallback_has_no_price(capsys) -> None:
    _, out, _ = run(capsys, str(H200), "--launcher", "vllm", "--tp", "4", "--model", "qwen3-32b", "--json")
    data = json.loads(out)
    assert data["fallback"] is True and "price" not in data and "explain" not in data


def test_tp_1_has_nothing_to_plan_and_is_not_a_fallback(capsys) -> None:
    code, out, err = run(
        capsys, str(H200), "--launcher", "sglang", "--tp", "1", "--model", "qwen3-32b", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["fallback"] is False and data["args"] == [] and data["env"] == {}
    assert data["reason"] == "TP 1: no tensor-parallel all-reduce: nothing to plan"
    assert "FALLBACK" not in err
    code, _, _ = run(
        capsys, str(H200), "--launcher", "sglang", "--tp", "1", "--strict", "--model", "qwen3-32b"
    )
    assert code == 0


@pytest.mark.parametrize("launcher", ["sglang", "vllm", "trtllm"])
def test_a_cpu_harness_profile_is_refused_for_a_gpu_launcher_in_one_line(capsys, launcher: str) -> None:
    code, out, err = run(
        capsys, str(CPU_HARNESS), "--launcher", launcher, "--tp", "2", "--model", "qwen3-32b"
    )
    assert code == 1 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"topo-gate: error: {launcher}: ") and "is a CPU-harness (gloo) profile" in line
