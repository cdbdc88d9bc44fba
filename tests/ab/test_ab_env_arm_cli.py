"""``topo-gate ab --arm NAME:VAR=VALUE`` end to end: real processes of the stand-in benchmark, which
tells its arm from the variables it actually sees; the arm's verdict beside the plan's and nccl's,
the record, ``show`` and ``report``, and the refusals."""

from __future__ import annotations

import json

import pytest
from ab_helpers import DATA

from topo_gate.ab.record import load_record
from topo_gate.cli import main

pytestmark = pytest.mark.slow

# Per arm, the value of each call: the warm-up first, then rounds 1-5 (vLLM's avg_latency, seconds).
STEADY = [1.30, 1.30, 1.31, 1.29, 1.30, 1.31]
BACKEND = "VLLM_FLASHINFER_ALLREDUCE_BACKEND"
TRTLLM_ARM = f"trtllm:{BACKEND}=trtllm"
SECRET = "hf_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3"


def scaled(factor: float) -> list[float]:
    return [round(v * factor, 6) for v in STEADY]


def vllm_latency(bench, values, markers=()) -> list[str]:
    """The stand-in as ``vllm bench latency`` at TP4; the env arm is whichever call sees trtllm."""
    bench.scenario(
        arms=[*markers, {"arm": "trtllm", "env": {BACKEND: "trtllm"}}],
        values=values,
        template=str(DATA / "vllm-latency.json"),
        set=["avg_latency"],
        result_flag="--output-json",
    )
    return [bench.program("vllm"), "bench", "latency", "--model", "M", "-tp", "4", "--batch-size", "8"]


def ab(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["ab", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_env_change_alone_needs_no_profile_and_wins_against_the_default(bench, capsys, tmp_path) -> None:
    cmd = vllm_latency(bench, {"default": STEADY, "trtllm": scaled(0.95)})
    out = tmp_path / "ab.json"
    code, stdout, err = ab(capsys, "--arm", TRTLLM_ARM, "--out", str(out), "--", *cmd)
    assert code == 0, err
    assert "verdict: win" in stdout and "trtllm/default" in stdout and f"{BACKEND}=trtllm" in stdout
    assert "Profile     none (no plan arm)" in stdout
    record = load_record(out)
    assert list(record["arms"]) == ["default", "trtllm"] and record["verdict"] == "win"
    assert record["arms"]["trtllm"]["env"] == {BACKEND: "trtllm"}
    assert record["profile"] == {"path": None, "digest": None, "fingerprint": None}
    assert record["node"] == {"fingerprint": None, "checked_by": "not checked (no plan arm)"}
    (comparison,) = record["comparisons"]
    assert comparison["arm"] == "trtllm" and comparison["ratio"] == pytest.approx(0.95)
    assert comparison["pairs"] == 5 and comparison["ci"][1] < 1 / 1.02
    assert record["summary"]["trtllm"]["samples"] == scaled(0.95)[1:]
    assert [(r["arm"], r["round"]) for r in record["runs"][:4]] == [
        ("trtllm" if i % 2 else "default", None if i < 2 else 1) for i in range(4)
    ]
    seen = bench.seen()
    assert len(seen) == 12
    assert all((call["env"].get(BACKEND) == "trtllm") == (call["arm"] == "trtllm") for call in seen)
    assert {call["arm"] for call in seen} == {"default", "trtllm"}


def test_the_advices_command_with_a_profile_records_it_and_plans_nothing(bench, capsys, vllm_node) -> None:
    """``topo-gate ab --profile P --arm NAME:VAR=VALUE -- CMD``, as the advice prints it: the profile
    is named in the record (``report`` puts the record beside it), no plan arm is added, and no node
    is needed."""
    cmd = vllm_latency(bench, {"default": STEADY, "trtllm": scaled(1.0)})
    code, stdout, err = ab(
        capsys, "--profile", str(vllm_node.profile), "--arm", TRTLLM_ARM, "--json", "--", *cmd
    )
    assert code == 0, err
    record = json.loads(stdout)
    assert list(record["arms"]) == ["default", "trtllm"] and record["verdict"] == "no difference"
    assert record["profile"]["path"] == str(vllm_node.profile) and record["profile"]["digest"]
    assert record["node"]["checked_by"] == "not checked (no plan arm)"


def test_an_env_arm_beside_plan_and_nccl_runs_in_the_same_rounds(bench, capsys, sglang_node) -> None:
    """SGLang's plan and nccl arms differ in knobs the stand-in sees (ab_helpers.CASE_FOR); the env arm
    is told by its own variable, which neither sets."""
    markers, distinct = sglang_node.arm_markers()
    assert distinct
    bench.scenario(
        arms=[*markers, {"arm": "nvls", "env": {"NCCL_NVLS_ENABLE": "0"}}],
        values={"default": STEADY, "plan": scaled(1.1), "nvls": scaled(1.0), "nccl": scaled(0.9)},
        template=str(DATA / "sglang-one-batch.jsonl"),
        set=["median_decode_throughput"],
        result_flag="--result-filename",
    )
    cmd = [*bench.module("sglang.benchmark.one_batch"), "--model-path", "M", "--tp-size", "2"]
    code, stdout, err = ab(
        capsys,
        *sglang_node.args(),
        "--arms",
        "nccl,default,plan",
        "--arm",
        "nvls:NCCL_NVLS_ENABLE=0",
        "--order",
        "shuffle",
        "--json",
        "--",
        *cmd,
    )
    record = json.loads(stdout)
    assert list(record["arms"]) == ["default", "plan", "nvls", "nccl"]
    assert [(c["arm"], c["verdict"]) for c in record["comparisons"]] == [
        ("plan", "win"),
        ("nvls", "no difference"),
        ("nccl", "regression"),
    ]
    assert code == 0 and record["verdict"] == "win", err  # the exit code follows the plan
    rounds = [sorted(r["arm"] for r in record["runs"] if r["round"] == n) for n in range(1, 6)]
    assert rounds == [["default", "nccl", "nvls", "plan"]] * 5
    seen = bench.seen()
    assert {call["arm"] for call in seen} == {"default", "plan", "nvls", "nccl"}
    assert all((call["env"].get("NCCL_NVLS_ENABLE") == "0") == (call["arm"] == "nvls") for call in seen)
    plan_env = sglang_node.planned(cmd).env
    nvls_calls = [call for call in seen if call["arm"] == "nvls"]
    assert all(call["env"].get(k) != v for call in nvls_calls for k, v in plan_env.items())  # no plan there


def test_a_secret_in_an_arms_env_stays_out_of_the_record_and_the_terminal(bench, capsys, tmp_path) -> None:
    cmd = vllm_latency(bench, {"default": STEADY, "trtllm": scaled(1.0)})
    out = tmp_path / "ab.json"
    code, stdout, err = ab(capsys, "--arm", f"{TRTLLM_ARM},HF_TOKEN={SECRET}", "--out", str(out), "--", *cmd)
    assert code == 0, err
    assert SECRET not in out.read_text() and SECRET not in stdout and SECRET not in err
    assert load_record(out)["arms"]["trtllm"]["env"]["HF_TOKEN"] == "<redacted>"
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "HF_TOKEN=<redacted>" in shown and SECRET not in shown


def test_an_arm_setting_what_the_environment_has_is_identical_and_not_run(bench, capsys, monkeypatch) -> None:
    cmd = vllm_latency(bench, {"default": STEADY})
    monkeypatch.setenv(BACKEND, "trtllm")
    code, stdout, err = ab(capsys, "--arm", TRTLLM_ARM, "--json", "--", *cmd)
    assert code == 0, err
    record = json.loads(stdout)
    assert record["verdict"] == "identical" and record["runs"] == [] and bench.seen() == []
    assert "trtllm sets only what your environment already sets: it is not run" in err


def test_show_and_report_render_an_env_arms_record(bench, capsys, tmp_path) -> None:
    cmd = vllm_latency(bench, {"default": STEADY, "trtllm": scaled(1.05)})
    out = tmp_path / "ab.json"
    assert ab(capsys, "--arm", TRTLLM_ARM, "--out", str(out), "--", *cmd)[0] == 1  # a regression
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "trtllm/default" in shown and "regression" in shown and "no model (no plan arm)" in shown
    folder = tmp_path / "report"
    assert main(["report", str(out), "--out", str(folder), "--format", "md"]) == 0
    summary = (folder / "summary.md").read_text()
    assert "| `trtllm/default` |" in summary and "profile: `no profile (no plan arm)`" in summary


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--arm", "trtllm"], "no ':'"),
        (["--arm", "plan:A=1"], "built-in arm"),
        (["--arm", "x:A=1", "--arm", "x:B=2"], "given twice"),
        (["--arm", "x:TOPO_GATE_AB_RESULT=r.json"], "set or removed by topo-gate"),
        (["--arm", f"x:1BAD={SECRET}"], "is not VAR=VALUE"),
        (["--arms", "default,plan", "--arm", TRTLLM_ARM], "the plan arm needs --profile"),
        ([], "the plan arm needs --profile"),
        (["--arms", "default"], "--arms"),
    ],
)
def test_a_malformed_arm_is_one_line_exit_2_and_runs_nothing(bench, capsys, argv, message) -> None:
    cmd = vllm_latency(bench, {"default": STEADY})
    code, _, err = ab(capsys, *argv, "--", *cmd)
    assert code == 2
    assert err.startswith("topo-gate: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert SECRET not in err
    assert bench.seen() == []


def test_release_notes_speak_of_a_plan_only_where_a_plan_arm_runs() -> None:
    from topo_gate.ab.driver import Releases, release_notes
    from topo_gate.launchers.command.releases import Installed, resolve

    unread = Installed(problem="./bin/vllm runs on sh, not Python: a wrapper script")
    releases = Releases(resolve("vllm", unread, environ={}), unread)
    planned, alone = release_notes(releases, True), release_notes(releases, False)
    assert planned[0] == alone[0] and planned[0].startswith("release: vLLM ")
    assert len(alone) == 1 and planned[1].startswith("warning: the installed vLLM release could not be read")
