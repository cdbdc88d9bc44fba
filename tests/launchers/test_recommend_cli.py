"""``topo-gate recommend``: formats, the version it targets, the price against the launcher's default
(``--launcher-args``, ``--launcher-env``, ``--workload``, ``--explain``), fallbacks and exit codes.

Profiles are made the way a probe makes them (knob_cases.py, priced_profiles.py); each test reads
what a user sees: stdout (the knobs), stderr (the status and estimate lines), the exit code.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest
import yaml
from knob_cases import BY_NAME, KnobCase
from priced_profiles import FINGERPRINT

from topo_gate.cli import main
from topo_gate.launchers import sglang, vllm
from topo_gate.launchers.knobs import PINNED
from topo_gate.profile import dump_profile

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUNDLED_H200 = ROOT / "profiles" / "h200-x2" / "h7168-run1.yaml"


@pytest.fixture(autouse=True)
def verified_node(monkeypatch):
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", FINGERPRINT)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["recommend", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def user_options(case: KnobCase) -> list[str]:
    """The case's own launcher settings as ``recommend`` takes them."""
    options = ["--launcher-args", shlex.join(case.user_args)] if case.user_args else []
    for name, value in case.user_env.items():
        options += ["--launcher-env", f"{name}={value}"]
    return options


def recommend(capsys, tmp_path: Path, case: KnobCase, *extra: str, user: bool = True):
    path = case.write(tmp_path / f"{case.name}.yaml")
    argv = [str(path), "--tp", str(case.tp), "--launcher", case.launcher, "--model", case.model]
    return run(capsys, *argv, *(user_options(case) if user else []), *extra)


# -- formats ---------------------------------------------------------------------------------------


def test_args_format_is_one_shell_line(capsys, tmp_path) -> None:
    code, out, err = recommend(capsys, tmp_path, BY_NAME["vllm-fusion-size"])
    assert code == 0
    words = shlex.split(out)
    assert words[0] == "--compilation-config" and len(words) == 2
    assert json.loads(words[1])["pass_config"] == {
        "fuse_allreduce_rms": True,
        "fi_allreduce_fusion_max_size_mb": 0.21875,
    }
    assert f"topo-gate: vLLM {PINNED['vllm']}: following the profile" in err
    assert ": est. -" in err and "the workload 'serving'" in err and "all-reduce time vs default" in err


def test_env_format_is_key_value_lines(capsys, tmp_path) -> None:
    code, out, _ = recommend(capsys, tmp_path, BY_NAME["vllm-flashinfer-off"], "--format", "env")
    assert code == 0
    assert out.splitlines() == ["VLLM_ALLREDUCE_USE_FLASHINFER=0", "VLLM_ALLREDUCE_USE_SYMM_MEM=0"]


def test_json_has_the_plan_its_price_and_the_rows(capsys, tmp_path) -> None:
    code, out, _ = recommend(capsys, tmp_path, BY_NAME["sglang-custom-off"], "--json")
    data = json.loads(out)
    assert code == 0
    assert set(data) >= {"args", "env", "config", "notes", "launcher", "version", "fallback", "reason"}
    assert set(data) >= {"estimate", "price", "explain"}
    assert data["version"] == "0.5.23" and data["fallback"] is False
    assert data["args"] == ["--disable-custom-all-reduce"]
    price = data["price"]
    assert price["workload"] == "serving" and price["layers"] == 80 and price["calls_per_step"] == 161
    assert price["plan_us_per_step"] < price["default_us_per_step"] and 0 < price["saving"] < 1
    first = data["explain"][0]
    assert first["pattern"] == "allreduce" and first["tokens"] == [1, 1]
    assert (first["default"], first["plan"]) == ("vllm_custom", "nccl")
    assert first["saving_us_per_call"] == pytest.approx(
        first["default_us_per_call"] - first["plan_us_per_call"], abs=1e-3
    )
    fused = next(row for row in data["explain"] if row["pattern"] == "allreduce_rmsnorm")
    assert fused["saving_us_per_step"] == pytest.approx(fused["saving_us_per_call"] * 160, rel=1e-3)


def test_json_of_a_fallback_has_no_price(capsys, tmp_path) -> None:
    code, out, _ = run(capsys, str(tmp_path / "nope.yaml"), "--tp", "2", "--launcher", "vllm", "--json")
    data = json.loads(out)
    assert code == 0 and data["fallback"] is True and "price" not in data and "explain" not in data


def test_trtllm_yaml_is_the_options_file(capsys, tmp_path) -> None:
    code, out, err = recommend(capsys, tmp_path, BY_NAME["trtllm-nccl"], "--format", "yaml")
    assert code == 0 and yaml.safe_load(out) == {"allreduce_strategy": "NCCL"}
    assert out.startswith("# extra LLM-API options for TensorRT-LLM git-f6a156b, from topo-gate")
    code, out, err = recommend(capsys, tmp_path, BY_NAME["trtllm-nccl"])
    assert code == 0 and out == "\n" and "--extra_llm_api_options extra.yaml" in err


# -- the default the plan is priced against ------------------------------------------------------------


def test_the_users_flashinfer_backend_makes_vllms_default_measurable(capsys, monkeypatch) -> None:
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT")  # planned for the bundled profile's node class
    # On the bundled 2x H200 profile vLLM's default FlashInfer backend is MNNVL (multicast, never
    # timed): nothing to price. With the user's VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm the default
    # runs the TRT-LLM kernels the probe timed, and the default has a price.
    base = [str(BUNDLED_H200), "--tp", "2", "--launcher", "vllm", "--model", "llama-3.1-70b", "--json"]
    code, out, err = run(capsys, *base)
    unmeasured = json.loads(out)
    assert code == 0 and unmeasured["price"]["default_us_per_step"] is None
    assert "the default's paths were not measured at any of the workload 'serving' sizes" in err
    assert "nothing changed" not in err
    # vLLM's fusion pass fuses the embedding's all-reduce with the first norm: every site of its
    # step is a norm site, so the rows are the fused pattern's.
    assert {row["default"] for row in unmeasured["explain"] if row["tokens"][0] == 1} == {"mnnvl_fused_vllm"}
    assert unmeasured["price"]["sites_per_step"] == {"allreduce": 0, "allreduce_rmsnorm": 161}
    code, out, err = run(capsys, *base, "--launcher-env", "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm")
    measured = json.loads(out)
    assert code == 0 and measured["price"]["default_us_per_step"] > 0
    assert {row["default"] for row in measured["explain"] if row["tokens"][0] == 1} == {
        "trtllm_fused_oneshot_vllm"
    }
    assert "for the launcher's default paths" not in err and "us of all-reduce per step" in err


def test_the_users_own_flag_is_priced_as_the_default_and_not_emitted(capsys, tmp_path) -> None:
    # SGLang's custom all-reduce is slower than NCCL here; with the user's own
    # --disable-custom-all-reduce the default already runs NCCL: nothing left to save.
    case = BY_NAME["sglang-custom-off"]
    code, out, err = recommend(
        capsys, tmp_path, case, "--launcher-args", "--disable-custom-all-reduce", "--json"
    )
    data = json.loads(out)
    assert code == 0 and data["args"] == [] and data["env"] == {}
    assert data["price"]["default_us_per_step"] == data["price"]["plan_us_per_step"]
    assert {row["default"] for row in data["explain"]} == {"nccl"}
    assert "no knobs: nothing measured beats the launcher's default" in err


@pytest.mark.slow
def test_launcher_env_and_args_are_refused_when_malformed(capsys, tmp_path) -> None:
    case = BY_NAME["vllm-custom-off"]
    code, _, err = recommend(capsys, tmp_path, case, "--launcher-env", "NOEQUALS", user=False)
    assert code == 2 and "expected KEY=VALUE" in err and "Traceback" not in err
    code, _, err = recommend(capsys, tmp_path, case, "--launcher-args", "--flag 'unclosed", user=False)
    assert code == 2 and "Traceback" not in err


def test_a_command_line_the_launcher_would_refuse_falls_back_with_the_reason(capsys, tmp_path) -> None:
    case = BY_NAME["vllm-custom-off"]
    code, out, err = recommend(capsys, tmp_path, case, "--launcher-args", "--max-num-seq", user=False)
    assert code == 0 and out == "\n"
    assert "FALLBACK (launcher-default): your command line cannot be read as vllm reads it" in err


# -- workloads ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("workload", ["decode", "serving", "prefill"])
def test_each_preset_workload_prices_the_plan(capsys, tmp_path, workload: str) -> None:
    code, out, err = recommend(
        capsys, tmp_path, BY_NAME["sglang-custom-off"], "--workload", workload, "--json"
    )
    price = json.loads(out)["price"]
    assert code == 0 and price["workload"] == workload
    assert f"the workload '{workload}'" in err


def test_a_workload_file_weights_the_steps(capsys, tmp_path) -> None:
    # Only 1024-token steps: custom all-reduce (SGLang's default up to 512 tokens) never runs, so
    # turning it off saves nothing, and the plan is no knobs.
    path = tmp_path / "w.yaml"
    path.write_text("name: prefill-1k\nsteps: {1024: 1}\n")
    case = BY_NAME["sglang-custom-off"]
    code, out, err = recommend(capsys, tmp_path, case, "--workload", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and data["price"]["workload"] == "prefill-1k" and data["args"] == []
    assert "no knobs" in err and "'prefill-1k'" in err
    path.write_text("steps: {1: 1, 8: 1}\n")
    code, out, _ = recommend(capsys, tmp_path, case, "--workload", str(path), "--json")
    data = json.loads(out)
    assert (
        code == 0
        and data["price"]["workload"] == "w.yaml"
        and data["args"] == ["--disable-custom-all-reduce"]
    )


def test_a_workload_file_out_of_token_order_prices_each_step_at_its_own_weight(capsys, tmp_path) -> None:
    """95% full prefill chunks, 5% one-token decode steps, listed largest first: the price weighs the
    8192-token step at 95%, exactly as the same file listed smallest first."""
    case = BY_NAME["sglang-custom-off"]
    prices = {}
    for order, steps in (("descending", "{8192: 95, 1: 5}"), ("ascending", "{1: 5, 8192: 95}")):
        path = tmp_path / f"{order}.yaml"
        path.write_text(f"name: prefill-heavy\nsteps: {steps}\n")
        code, out, _ = recommend(capsys, tmp_path, case, "--workload", str(path), "--json")
        assert code == 0
        prices[order] = json.loads(out)["price"]
    weights = {row["tokens"]: row["weight"] for row in prices["descending"]["steps"]}
    assert weights == {1: pytest.approx(0.05), 8192: pytest.approx(0.95)}
    assert prices["descending"] == prices["ascending"]


def test_an_unknown_workload_is_a_usage_error(capsys, tmp_path) -> None:
    code, out, err = recommend(capsys, tmp_path, BY_NAME["vllm-custom-off"], "--workload", "chat")
    assert code == 2 and out == ""
    assert err == (
        "topo-gate: error: --workload: unknown workload 'chat': a preset (serving, decode, prefill) or a "
        "file path\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("steps: [1, 2]\n", "expected a mapping with 'steps: {tokens: weight, ...}'"),
        ("steps: {1: -1}\n", "weight of 1 tokens must be > 0"),
        ("steps: {0: 1}\n", "token count 0 is not an integer"),
        ("steps: {1: 1}\nextra: 2\n", "unknown key(s) extra"),
        ("{{{{", "not YAML/JSON"),
    ],
)
def test_an_unusable_workload_file_exits_3_naming_it(capsys, tmp_path, content: str, words: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(content)
    code, out, err = recommend(capsys, tmp_path, BY_NAME["vllm-custom-off"], "--workload", str(path))
    assert code == 3 and out == "" and err.count("\n") == 1
    assert err.startswith(f"topo-gate: error: --workload: {path}: ") and words in err


def test_a_missing_workload_file_exits_3(capsys, tmp_path) -> None:
    path = tmp_path / "sub" / "absent.yaml"
    code, _, err = recommend(capsys, tmp_path, BY_NAME["vllm-custom-off"], "--workload", str(path))
    assert code == 3 and str(path) in err and "Traceback" not in err


# -- explain -----------------------------------------------------------------------------------------------


def test_explain_prints_each_range_with_both_prices_and_the_workload_total(capsys, tmp_path) -> None:
    code, out, _ = recommend(
        capsys, tmp_path, BY_NAME["sglang-custom-off"], "--explain", "--workload", "decode"
    )
    lines = out.splitlines()
    assert code == 0 and lines[0] == "--disable-custom-all-reduce"
    at = next(i for i, line in enumerate(lines) if line.startswith("pattern "))
    header = lines[at].split()
    assert header[:5] == ["pattern", "tokens", "size", "default", "runs"] and "saving/step" in header
    first = lines[at + 1].split()
    # SGLang's custom all-reduce at 1 token (one token's bytes beside it): 12 us (1.5 x NCCL's 8);
    # the plan's NCCL: 8 us.
    assert first[:4] == ["allreduce", "1", "16", "KiB"]
    assert first[4:8] == ["vllm_custom", "12.00", "nccl", "8.00"]
    assert first[8:11] == ["+4.00", "+4.00", "isolated"] and "plan measured faster" in lines[at + 1]
    fused = next(line for line in lines if line.startswith("allreduce_rmsnorm  1 "))
    assert fused.split()[4:8] == ["vllm_custom+rmsnorm", "13.60", "nccl", "9.60"]
    # 4 us a call at 160 norm sites a step (80 layers)
    assert float(fused.split()[9]) == pytest.approx(4.0 * 160, rel=1e-3)
    beyond = [line for line in lines if "beyond the largest measured size" in line]
    assert len(beyond) == 2 and all("n/a" in line for line in beyond)
    total = lines[-1]
    assert total.startswith(
        "workload 'decode' (decode steps at batch 1, 2, 4, ..., 512, equal weights; 80 layers"
    )
    assert "default " in total and " -> plan " in total and "us per step (-" in total


def test_explain_of_a_fallback_prints_its_reason_only(capsys, tmp_path) -> None:
    code, out, err = run(
        capsys, str(tmp_path / "nope.yaml"), "--tp", "2", "--launcher", "sglang", "--explain"
    )
    assert code == 0 and out == "\n"  # no args to set, and no price
    assert err.splitlines() == [
        next(line for line in err.splitlines() if line.startswith("topo-gate: SGLang 0.5.23: FALLBACK"))
    ]
    assert "allreduce: profile " in err


# -- fallbacks ---------------------------------------------------------------------------------------------


def test_a_missing_profile_changes_nothing_unless_fallback_nccl(capsys, tmp_path) -> None:
    missing = str(tmp_path / "nope.yaml")
    code, out, err = run(capsys, missing, "--tp", "2", "--launcher", "sglang")
    assert code == 0 and out == "\n"
    assert "FALLBACK (launcher-default)" in err and "no such file" in err
    code, out, err = run(capsys, missing, "--tp", "2", "--launcher", "sglang", "--fallback", "nccl")
    assert code == 0 and shlex.split(out) == list(sglang.FORCE_NCCL.args)
    assert "FALLBACK (nccl)" in err and "no such file" in err


def _v12(tmp_path: Path, case: KnobCase) -> str:
    """``case``'s profile as schema v1.2 wrote it: the same decisions, no measurement table."""
    path = tmp_path / "v12.yaml"
    dump_profile(
        dataclasses.replace(case.profile(), schema="topo-gate/profile/v1.2", measurements=()).with_digest(),
        path,
    )
    return str(path)


@pytest.mark.parametrize("where", ["v1.2 profile", "unmeasured TP size"])
def test_no_price_table_for_the_tp_size_is_a_fallback(capsys, tmp_path, where: str) -> None:
    case = BY_NAME["vllm-custom-off"]
    if where == "v1.2 profile":
        path, tp, reason = _v12(tmp_path, case), "2", "no measurement table for TP 2"
    else:
        path, tp, reason = str(case.write(tmp_path / "p.yaml")), "4", "TP 4"
    base = [path, "--tp", tp, "--launcher", "vllm", "--model", case.model, "--format", "json"]
    code, out, err = run(capsys, *base)
    data = json.loads(out)
    assert code == 0 and data["fallback"] is True and reason in data["reason"]
    assert (data["args"], data["env"], "price" in data) == ([], {}, False)
    assert "FALLBACK (launcher-default)" in err
    code, out, err = run(capsys, *base, "--fallback", "nccl")
    data = json.loads(out)
    assert code == 0 and data["fallback"] is True and reason in data["reason"]
    assert tuple(data["args"]) == vllm.FORCE_NCCL.args and data["env"] == dict(vllm.FORCE_NCCL.env)
    assert "FALLBACK (nccl)" in err


def test_strict_fallback_exits_1(capsys, tmp_path) -> None:
    case = BY_NAME["vllm-custom-off"]
    path = str(case.write(tmp_path / "p.yaml"))
    code, out, err = run(capsys, path, "--tp", "4", "--launcher", "vllm", "--strict")
    assert code == 1 and out == "" and err.count("\n") == 1 and "not in the profile" in err


def test_unknown_launcher_is_a_usage_error(capsys, tmp_path) -> None:
    path = str(BY_NAME["vllm-custom-off"].write(tmp_path / "p.yaml"))
    code, _, err = run(capsys, path, "--tp", "2", "--launcher", "tgi")
    assert code == 2 and "Traceback" not in err


# -- patterns ----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("pattern", "fused"), [("all", True), ("allreduce_rmsnorm", True), ("allreduce", False)]
)
def test_pattern_limits_which_paths_a_plan_may_change(capsys, tmp_path, pattern: str, fused: bool) -> None:
    # vLLM's plan here is the fusion pass up to 224 KiB: it changes the fused pattern only.
    code, out, _ = recommend(capsys, tmp_path, BY_NAME["vllm-fusion-size"], "--pattern", pattern, "--json")
    data = json.loads(out)
    assert code == 0 and ("--compilation-config" in data["args"]) is fused
    left_out = {"all": None, "allreduce": "allreduce_rmsnorm", "allreduce_rmsnorm": "allreduce"}[pattern]
    assert any(f"{left_out} not requested" in note for note in data["notes"]) is (left_out is not None)


@pytest.mark.slow
def test_trtllms_one_strategy_serves_both_patterns_so_leaving_one_out_keeps_the_default(
    capsys, tmp_path
) -> None:
    case = BY_NAME["trtllm-nccl"]
    code, out, _ = recommend(capsys, tmp_path, case, "--pattern", "allreduce", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["config"] == {} and data["fallback"] is False
    code, out, _ = recommend(capsys, tmp_path, case, "--format", "json")
    assert json.loads(out)["config"] == {"allreduce_strategy": "NCCL"}


def test_unknown_pattern_in_the_api_changes_nothing(tmp_path) -> None:
    case = BY_NAME["vllm-custom-off"]
    plan = case.plan(str(case.write(tmp_path / "p.yaml")), patterns=("allgather",))
    assert plan.fallback and "unknown pattern" in plan.reason and plan.args == ()


def test_env_format_of_a_plan_with_flags_names_them_and_exits_9(tmp_path, capsys) -> None:
    """An env file cannot carry flags: the env lines are printed, stderr names the flags left out,
    and the exit code is not 0, so ``--format env > x.env`` is not taken for the whole plan."""
    case = BY_NAME["sglang-custom-off"]
    profile = case.write(tmp_path / "node.yaml")
    argv = ["recommend", str(profile), "--tp", "2", "--launcher", "sglang", "--model", case.model]
    code = main([*argv, "--format", "env"])
    out, err = capsys.readouterr()
    assert code == 9
    assert "--format env cannot carry the plan's flags --disable-custom-all-reduce" in err
    assert "--disable-custom-all-reduce" not in out
    assert main([*argv, "--format", "args"]) == 0
