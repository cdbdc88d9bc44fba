"""``recommend --explain`` as a user reads it: a summary line first that names what binds the plan and
the fix; token ranges with their bytes, unpriced rows folded into one range; per-step figures that say
which steps they cover; the model warning in every format; a fallback's reason without a price; TP 1
with nothing to plan; a CPU-harness profile refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from knob_cases import BY_NAME

from topo_gate.cli import main
from topo_gate.launchers.knobs import PINNED

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "profiles/h200-x2/h7168-run1.yaml"
PCIE = ROOT / "profiles/examples/synthetic-rtxpro6000-pcie-x4.yaml"
# Recorded by `topo-gate probe --device cpu --tp 2 --hidden 64 --max-tokens 1` (gloo on 2 CPU processes).
CPU_HARNESS = ROOT / "tests/fixtures/profiles/cpu-harness-tp2.yaml"


@pytest.fixture(autouse=True)
def no_terminal(monkeypatch) -> None:
    """Output to a pipe: each line whole (the width test below sets a terminal's width)."""
    monkeypatch.delenv("COLUMNS", raising=False)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["recommend", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _explain_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line]


def test_the_first_line_names_the_untimed_default_that_binds_and_its_fix(capsys) -> None:
    code, out, _ = run(
        capsys, str(H200), "--launcher", "vllm", "--tp", "2", "--model", "llama-3-70b", "--explain"
    )
    assert code == 0
    first = _explain_lines(out)[0]
    assert first.startswith(
        f"no knobs, because vLLM {PINNED['vllm']} runs mnnvl_fused_vllm here by default at 1-2048 tokens of the workload, "
        "which is not measured: "
    )
    assert "Fix: VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm" in first
    assert first.endswith(
        "the steps at 8192 tokens lie beyond the largest measured size and are left as they are."
    )


def test_the_first_line_names_a_saving_refused_for_want_of_one_measurement(capsys) -> None:
    argv = (str(H200), "--launcher", "sglang", "--tp", "2", "--model", "llama-3-70b", "--explain")
    code, out, _ = run(capsys, *argv, "--launcher-env", "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0")
    assert code == 0
    first = _explain_lines(out)[0]
    assert first.startswith(
        "no knobs, because --flashinfer-allreduce-fusion-backend trtllm is refused only for want of one "
        "measurement: trtllm_oneshot_sglang's size transition after 2048 tokens."
    )


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


def test_no_faster_knob_set_says_so_first(capsys) -> None:
    code, out, _ = run(
        capsys, str(PCIE), "--launcher", "sglang", "--tp", "2", "--model", "qwen3-32b", "--explain"
    )
    assert code == 0
    assert _explain_lines(out)[0].startswith(
        "no knobs: the launcher's default is the fastest measured choice"
    )


def test_unpriced_ranges_fold_into_one_row_with_tokens_and_bytes(capsys) -> None:
    argv = (str(H200), "--launcher", "sglang", "--tp", "2", "--model", "llama-3-70b", "--explain")
    _, out, _ = run(capsys, *argv)
    rows = [line.split() for line in out.splitlines() if line.startswith("allreduce ")]
    assert rows[0][:5] == ["allreduce", "1-1024", "up", "to", "16"]
    assert " ".join(rows[0]).endswith("default not measured: left as it is")
    assert rows[1][1] == "1025-1792" and "28 MiB" in " ".join(rows[1])
    assert sum(1 for row in rows if "custom_v2_sglang" in row) == 1


def test_the_json_rows_carry_bytes_beside_tokens(capsys) -> None:
    argv = (str(H200), "--launcher", "sglang", "--tp", "2", "--model", "llama-3-70b", "--json")
    _, out, _ = run(capsys, *argv)
    data = json.loads(out)
    first = data["explain"][0]
    assert first["tokens"] == [1, 1024] and first["bytes"] == [16384, 16384 * 1024]
    # Figures only: the cause the summary line names is its first unmeasured entry, in words there.
    assert "summary" not in data["price"] and data["price"]["knobs"] == ""
    assert data["price"]["unmeasured"][0]["runs"].startswith("SGLang 0.5.23 runs custom_v2_sglang")


def test_per_step_figures_say_which_steps_they_cover(capsys) -> None:
    argv = (str(H200), "--launcher", "vllm", "--tp", "2", "--model", "deepseek-v3")
    _, _, err = run(capsys, *argv)
    # The one line on stderr: the covered share first, and no per-step figure below half the steps.
    assert "only 5% of the workload 'serving' steps could be priced: no per-step figure" in err
    _, _, err = run(capsys, str(PCIE), "--launcher", "vllm", "--tp", "2", "--model", "qwen3-32b")
    assert (
        "on the 90% of the workload 'serving' steps that could be priced: 4563.3 us of all-reduce per step"
        in err
    )


@pytest.mark.parametrize("fmt", ["args", "env", "json", "yaml"])
def test_without_a_model_every_format_warns_on_stderr(capsys, fmt: str) -> None:
    code, out, err = run(capsys, str(H200), "--launcher", "vllm", "--tp", "2", "--format", fmt)
    assert code == 0
    assert "topo-gate: warning: no --model/--hidden:" in err and "warning" not in out
    _, _, err = run(capsys, str(H200), "--launcher", "vllm", "--tp", "2", "--format", fmt, "--hidden", "7168")
    assert "no --model/--hidden" not in err


def test_a_fallback_prints_its_reason_and_no_price(capsys) -> None:
    code, out, err = run(
        capsys, str(H200), "--launcher", "vllm", "--tp", "4", "--model", "qwen3-32b", "--explain"
    )
    assert code == 0
    assert out.strip() == ""
    assert "FALLBACK (launcher-default): " in err and "us per step" not in err + out
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


@pytest.mark.parametrize("columns", [80, 200])
def test_explain_keeps_within_the_terminals_width(capsys, monkeypatch, columns: int) -> None:
    """Prose wraps; a range table wider than the terminal becomes one stacked entry per range. Only
    a token that cannot be broken (the knobs' JSON) and the stderr status lines may run past it."""
    monkeypatch.setenv("COLUMNS", str(columns))
    _, out, _ = run(capsys, str(PCIE), "--launcher", "vllm", "--tp", "2", "--model", "qwen3-32b", "--explain")
    long = [line for line in out.splitlines()[1:] if len(line) > columns]
    assert all(" " not in line.strip() for line in long), long
    stacked = "allreduce_rmsnorm 1 token (10 KiB): default vllm_custom+rmsnorm 13.03 us/call"
    assert (stacked in out.replace("\n  ", " ")) == (columns == 80)
