"""``topo-gate ab`` end to end: real processes of the stand-in benchmark, each launcher's real result
format, the verdicts, failing runs, and what reaches the record."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from ab_helpers import BUNDLED_FINGERPRINT, BUNDLED_PROFILE, CAPTURE, DATA, FINGERPRINT

from topo_gate.ab.arms import plan_arm
from topo_gate.ab.record import load_record
from topo_gate.cli import main
from topo_gate.launchers import PlanRequest
from topo_gate.launchers.command.forms import TRTLLM_OPTIONS
from topo_gate.profile import load_profile

pytestmark = pytest.mark.slow

# Per arm, the value of each call: the warm-up first, then rounds 1-5.
STEADY = [100.0, 100.0, 101.0, 102.0, 99.0, 100.0]


def faster(factor: float) -> list[float]:
    return [v * factor for v in STEADY]


def sglang_scenario(bench, node, **extra) -> list[str]:
    """The stand-in as SGLang's one-batch benchmark; ``node`` None: a plan without knobs (every call
    is the default's then)."""
    markers = node.arm_markers()[0] if node is not None else []
    bench.scenario(
        arms=markers,
        template=str(DATA / "sglang-one-batch.jsonl"),
        set=["median_decode_throughput"],
        result_flag="--result-filename",
        **extra,
    )
    return [
        *bench.module("sglang.benchmark.one_batch"),
        "--model-path",
        "M",
        "--tp-size",
        "2",
        "--batch-size",
        "8",
    ]


def ab(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["ab", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_sglang_win_is_recorded_shown_and_sealed(bench, capsys, tmp_path, sglang_node) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": faster(1.1)})
    out = tmp_path / "ab.json"
    code, stdout, err = ab(capsys, *sglang_node.args(), "--out", str(out), "--", *cmd)
    assert code == 0, err
    assert "verdict: win" in stdout
    record = load_record(out)
    assert record["verdict"] == "win" and record["benchmark"] == "sglang-one-batch"
    assert record["result_via"] == "flag --result-filename"
    assert record["metric"] == {
        "name": "median_decode_throughput",
        "direction": "higher",
        "unit": "tok/s",
        "source": "file",
        "benchmark": "sglang-one-batch",
        "path": ["median_decode_throughput"],
    }
    (comparison,) = record["comparisons"]
    assert comparison["ratio"] == pytest.approx(1.1) and comparison["pairs"] == 5
    assert record["summary"]["default"]["samples"] == STEADY[1:]
    assert record["profile"] == {
        "path": str(sglang_node.profile),
        "digest": load_profile(sglang_node.profile).digest,
        "fingerprint": FINGERPRINT,
    }
    plan = sglang_node.planned(cmd)
    assert record["arms"]["plan"]["env"] == dict(plan.env) and record["arms"]["plan"]["args"] == list(
        plan.args
    )
    assert [(r["arm"], r["round"]) for r in record["runs"][:4]] == [
        ("default", None),
        ("plan", None),
        ("default", 1),
        ("plan", 1),
    ]
    seen = bench.seen()
    assert len(seen) == 12
    for call in seen:  # the plan's env reaches only the plan arm; every run writes to a fresh file
        assert all((call["env"].get(k) == v) == (call["arm"] == "plan") for k, v in plan.env.items())
        assert call["argv"][-2] == "--result-filename"
    assert len({call["argv"][-1] for call in seen}) == 12
    assert all(Path(r["stdout"]).parts[0] == "ab.runs" for r in record["runs"])


def test_show_displays_the_record_and_refuses_an_edited_one(bench, capsys, tmp_path, sglang_node) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": faster(1.1)})
    out = tmp_path / "ab.json"
    assert ab(capsys, *sglang_node.args(), "--json", "--out", str(out), "--", *cmd)[0] == 0
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "plan/default" in shown and "verdict: win" in shown and "SGLANG_PCIE_IPC_MAX_NUMEL" in shown
    assert main(["show", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == load_record(out)
    data = json.loads(out.read_text())
    data["summary"]["plan"]["median"] = 999.0
    out.write_text(json.dumps(data))
    assert main(["show", str(out)]) == 1
    assert "digest mismatch" in capsys.readouterr().err


def test_vllm_latency_regression_exits_1(bench, capsys, vllm_node) -> None:
    markers, _ = vllm_node.arm_markers()
    bench.scenario(
        arms=markers,
        values={"default": faster(0.01), "plan": faster(0.0105)},  # 5% more latency with the plan
        template=str(DATA / "vllm-latency.json"),
        set=["avg_latency"],
        result_flag="--output-json",
        stdout="Avg latency: {value} seconds",
    )
    cmd = [
        bench.program("vllm"),
        "bench",
        "latency",
        "--model",
        "M",
        "-tp",
        "2",
        "--output-json",
        "mine.json",
    ]
    code, stdout, err = ab(capsys, *vllm_node.args(), "--json", "--", *cmd)
    assert code == 1, err
    record = json.loads(stdout)
    assert record["verdict"] == "regression" and record["metric"]["direction"] == "lower"
    assert record["comparisons"][0]["ratio"] == pytest.approx(1.05)
    # ab's own path comes last, so the user's --output-json mine.json never receives a run's result
    assert all(call["argv"][-2:][0] == "--output-json" for call in bench.seen())
    assert not Path("mine.json").exists()


@pytest.mark.usefixtures("trtllm_user_env")
def test_trtllm_no_difference_reads_the_options_file_the_plan_wrote(bench, capsys, trtllm_node) -> None:
    markers, _ = trtllm_node.arm_markers()
    assert "config" in markers[0]  # TensorRT-LLM's knob lives in its options file
    bench.scenario(
        arms=markers,
        config_flag=TRTLLM_OPTIONS,
        values={"default": [100, 100, 102, 98, 101, 99], "plan": [100, 101, 99, 100, 102, 98]},
        template=str(DATA / "trtllm-throughput.json"),
        set=["performance", "system_output_throughput_tok_s"],
        result_flag="--report_json",
    )
    cmd = [bench.program("trtllm-bench"), "--model", "M", "throughput", "--tp", "2", "--dataset", "d.jsonl"]
    code, stdout, err = ab(capsys, *trtllm_node.args(), "--json", "--", *cmd)
    assert code == 0, err
    record = json.loads(stdout)
    assert record["verdict"] == "no difference" and record["tp"] == 2
    options = [
        call["argv"][call["argv"].index(TRTLLM_OPTIONS) + 1] for call in bench.seen() if call["arm"] == "plan"
    ]
    assert len(options) == 6
    assert not any(os.path.exists(path) for path in options)  # the options files are removed afterwards
    assert all(TRTLLM_OPTIONS not in call["argv"] for call in bench.seen() if call["arm"] == "default")


def test_a_failing_run_and_a_missing_metric_are_failed_runs_not_zeros(bench, capsys, sglang_node) -> None:
    cmd = sglang_scenario(
        bench,
        sglang_node,
        values={"default": STEADY, "plan": faster(1.1)},
        exit={"plan": {"2": 3}},  # round 2 of the plan exits 3
        omit={"default": [4]},  # round 4 of the default writes its result without the metric
    )
    code, stdout, err = ab(capsys, *sglang_node.args(), "--json", "--", *cmd)
    assert code == 0, err
    record = json.loads(stdout)
    runs = {(r["arm"], r["round"]): r for r in record["runs"]}
    failed, missing = runs[("plan", 2)], runs[("default", 4)]
    assert (failed["status"], failed["exit_code"], failed["value"]) == ("failed", 3, None)
    assert failed["tail"] == ["fake benchmark: plan call 2 fails with status 3"]
    assert missing["status"] == "no-metric" and "has no median_decode_throughput" in missing["reason"]
    assert record["summary"]["plan"]["failures"] == 1 and record["summary"]["default"]["failures"] == 1
    assert record["comparisons"][0]["pairs"] == 3 and record["verdict"] == "win"


def test_fewer_than_three_successful_runs_is_no_verdict(bench, capsys, tmp_path, sglang_node) -> None:
    cmd = sglang_scenario(
        bench,
        sglang_node,
        values={"default": STEADY, "plan": faster(1.1)},
        exit={"plan": {"1": 1, "2": 1, "3": 1}},
    )
    code, stdout, err = ab(capsys, *sglang_node.args(), "--out", str(tmp_path / "ab.json"), "--", *cmd)
    assert code == 1, err
    assert "verdict: no verdict" in stdout and "Runs that do not count" in stdout
    (comparison,) = load_record(tmp_path / "ab.json")["comparisons"]
    assert comparison["reason"] == "plan has 2 successful runs of 5 (a verdict needs 3)"


def test_three_arms_the_nccl_arm_and_no_plugin_in_any_arm(bench, capsys, monkeypatch, sglang_node) -> None:
    _, distinct = sglang_node.arm_markers()
    assert distinct
    cmd = sglang_scenario(
        bench, sglang_node, values={"default": STEADY, "plan": faster(1.1), "nccl": faster(0.97)}
    )
    monkeypatch.setenv("TOPO_GATE_PROFILE", str(sglang_node.profile))
    code, stdout, err = ab(capsys, *sglang_node.args(), "--arms", "nccl,plan,default", "--json", "--", *cmd)
    assert code == 0, err
    record = json.loads(stdout)
    assert list(record["arms"]) == ["default", "plan", "nccl"]
    assert [(c["arm"], c["verdict"]) for c in record["comparisons"]] == [
        ("plan", "win"),
        ("nccl", "regression"),
    ]
    assert {call["arm"] for call in bench.seen()} == {"default", "plan", "nccl"}
    assert all("TOPO_GATE_PROFILE" not in call["env"] for call in bench.seen())
    assert any("TOPO_GATE_PROFILE removed" in note for note in record["notes"])


def test_a_plan_the_command_already_has_is_identical_and_not_run(
    bench, capsys, monkeypatch, sglang_node
) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY})
    plan = sglang_node.planned(cmd)
    for key, value in plan.env.items():
        monkeypatch.setenv(key, value)
    code, stdout, err = ab(capsys, *sglang_node.args(), "--json", "--", *cmd, *plan.args)
    assert code == 0, err
    record = json.loads(stdout)
    assert record["verdict"] == "identical" and record["runs"] == []
    assert bench.seen() == []


def test_the_node_from_a_capture(bench, capsys) -> None:
    """The bundled profile is the capture's node; its plan adds no knob, so nothing runs, but a plan
    there is (on another node ab would exit 1: "the profile gives no plan here")."""
    cmd = sglang_scenario(bench, None, values={"default": STEADY})
    code, stdout, err = ab(
        capsys, "--profile", str(BUNDLED_PROFILE), "--from", str(CAPTURE), "--json", "--", *cmd
    )
    assert code == 0, err
    record = json.loads(stdout)
    assert record["node"] == {"fingerprint": BUNDLED_FINGERPRINT, "checked_by": "capture"}
    assert record["verdict"] == "identical"


def test_a_plan_without_knobs_says_so_and_runs_nothing(bench, capsys) -> None:
    """The bundled 2x H200 profile measured no launcher's default, so nothing measured beats one:
    the plan adds no knob, its arm is the default's command, and ab compares nothing."""
    cmd = sglang_scenario(bench, None, values={"default": STEADY})
    request = PlanRequest(
        str(BUNDLED_PROFILE), tp=2, fingerprint=BUNDLED_FINGERPRINT, user_args=tuple(cmd), user_env=os.environ
    )
    plan = plan_arm("sglang", request)
    assert (plan.args, dict(plan.env), dict(plan.config)) == ((), {}, {})
    argv = ["--profile", str(BUNDLED_PROFILE), "--node-fingerprint", BUNDLED_FINGERPRINT, "--json"]
    code, stdout, err = ab(capsys, *argv, "--", *cmd)
    assert code == 0, err
    record = json.loads(stdout)
    assert record["verdict"] == "identical" and record["runs"] == []
    assert record["arms"]["plan"]["same_as"] == "default"
    assert "no knobs: the launcher's default" in record["arms"]["plan"]["notes"]
    assert "plan adds nothing to CMD (no knobs: the launcher's default): it is not run" in err
    assert bench.seen() == []


def test_a_client_benchmark_runs_through_a_wrapper_that_reads_the_result_path(
    bench, capsys, vllm_node
) -> None:
    markers, _ = vllm_node.arm_markers()
    bench.scenario(
        arms=markers,
        values={"default": STEADY, "plan": faster(1.1)},
        template=str(DATA / "vllm-serve.json"),
        set=["output_throughput"],
    )
    wrapper = bench.program("serve_and_bench.sh")
    code, stdout, err = ab(
        capsys, *vllm_node.args(), "--bench", "vllm-serve", "--json", "--", wrapper, "M", "-tp", "2"
    )
    assert code == 0, err
    record = json.loads(stdout)
    assert record["result_via"] == "env TOPO_GATE_AB_RESULT" and record["verdict"] == "win"
    assert all("--result-filename" not in call["argv"] for call in bench.seen())


def test_regex_metric_on_stdout(bench, capsys, sglang_node) -> None:
    cmd = sglang_scenario(
        bench,
        sglang_node,
        values={"default": STEADY, "plan": faster(0.8)},
        stdout="Decode.  median throughput: {value} token/s",
    )
    regex = r"tps=median throughput: (?P<value>[0-9.]+)"
    code, stdout, err = ab(
        capsys, *sglang_node.args(), "--metric-regex", regex, "--higher-is-better", "--json", "--", *cmd
    )
    assert code == 1, err
    record = json.loads(stdout)
    assert record["metric"]["source"] == "stdout" and record["verdict"] == "regression"


def test_shuffled_order_is_recorded_and_reproducible(bench, capsys, sglang_node) -> None:
    from topo_gate.ab.schedule import schedule

    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": faster(1.1)})
    code, stdout, _ = ab(
        capsys, *sglang_node.args(), "--order", "shuffle", "--seed", "5", "--json", "--", *cmd
    )
    record = json.loads(stdout)
    expected = schedule(["default", "plan"], runs=5, order="shuffle", seed=5)
    assert [(r["arm"], r["round"]) for r in record["runs"]] == [(s.arm, s.round) for s in expected]
    assert record["method"]["order"] == "shuffle" and record["method"]["seed"] == 5 and code == 0


def test_secrets_in_the_command_stay_out_of_the_record(bench, capsys, tmp_path, sglang_node) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": faster(1.1)})
    out = tmp_path / "ab.json"
    code, _, err = ab(
        capsys, *sglang_node.args(), "--out", str(out), "--", *cmd, "--api-key", "hunter2secret"
    )
    assert code == 0, err
    assert "hunter2secret" not in out.read_text()
    assert load_record(out)["command"][-2:] == ["--api-key", "<redacted>"]


def test_camel_case_and_json_embedded_secrets_stay_out_of_the_record_and_the_terminal(
    bench, capsys, tmp_path, sglang_node
) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": faster(1.1)})
    out = tmp_path / "ab.json"
    secrets = ["--authToken", "S1secret", "--accessToken=S2secret"]
    config = ["--server-config", '{"hfToken": "S3secret", "apiKey": "S4secret", "maxTokens": 512}']
    code, shown_out, err = ab(capsys, *sglang_node.args(), "--out", str(out), "--", *cmd, *secrets, *config)
    assert code == 0, err
    for secret in ("S1secret", "S2secret", "S3secret", "S4secret"):
        assert secret not in out.read_text() and secret not in shown_out + err
    assert load_record(out)["command"][-5:] == [
        "--authToken",
        "<redacted>",
        "--accessToken=<redacted>",
        "--server-config",
        '{"hfToken": <redacted>, "apiKey": <redacted>, "maxTokens": 512}',
    ]


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["--bench", "vllm-latency", "--", "no-such-benchmark-here", "-tp", "2"], 127, "command not found"),
        (["--", "vllm", "bench", "serve", "-tp", "2"], 2, "is a client"),
        (["--", "./bench.sh", "-tp", "2"], 2, "cannot tell the launcher"),
        (["--launcher", "vllm", "--", "./bench.sh", "-tp", "2"], 2, "give --bench"),
        (["--bench", "vllm-latency", "--arms", "plan", "--", "x"], 2, "--arms"),
        (["--bench", "vllm-latency", "--metric", "tps", "--", "x"], 2, "choose from avg_latency"),
        (["--bench", "vllm-latency", "--higher-is-better", "--", "x"], 2, "go with --metric-regex"),
    ],
)
def test_bad_input_is_one_line_and_the_documented_code(
    bench, capsys, sglang_node, argv, code, message
) -> None:
    found, _, err = ab(capsys, *sglang_node.args(), *argv)
    assert found == code
    assert err.startswith("topo-gate: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert bench.seen() == []


def test_fewer_than_three_rounds_is_refused_before_anything_runs(bench, capsys, vllm_node) -> None:
    code, _, err = ab(
        capsys, *vllm_node.args(), "--bench", "vllm-latency", "--runs", "2", "--", "x", "-tp", "2"
    )
    assert code == 2 and "'--runs': 2 is not in the range 3<=x<=1000" in err


def test_a_command_that_is_not_executable_exits_126(bench, capsys, vllm_node) -> None:
    script = bench.root / "bench.sh"
    script.write_text("#!/bin/sh\n")
    code, _, err = ab(capsys, *vllm_node.args(), "--bench", "vllm-latency", "--", str(script), "-tp", "2")
    assert code == 126 and "not an executable file" in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--node-fingerprint", "sha256:" + "cd" * 32], "the profile gives no plan here"),
        (["--node-fingerprint", FINGERPRINT, "--tp", "4"], "disagrees with the command's TP size 2"),
    ],
)
def test_a_plan_that_cannot_be_made_exits_1_with_the_reason_and_runs_nothing(
    bench, capsys, sglang_node, extra, message
) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": STEADY})
    code, _, err = ab(capsys, "--profile", str(sglang_node.profile), *extra, "--", *cmd)
    assert code == 1 and message in err and err.startswith("topo-gate: error: ")
    assert bench.seen() == []


def test_an_unreadable_capture_exits_3(bench, capsys, tmp_path, sglang_node) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": STEADY})
    (tmp_path / "bad.json").write_text("{")
    code, _, err = ab(
        capsys, "--profile", str(sglang_node.profile), "--from", str(tmp_path / "bad.json"), "--", *cmd
    )
    assert code == 3 and "no plan without the node" in err


def test_an_out_that_cannot_be_written_exits_8_before_any_run(bench, capsys, tmp_path, sglang_node) -> None:
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": STEADY})
    code, _, err = ab(capsys, *sglang_node.args(), "--out", str(tmp_path / "missing" / "ab.json"), "--", *cmd)
    assert code == 8 and "does not exist" in err
    assert bench.seen() == []


def test_the_plan_arm_is_the_exec_plan(bench, capsys, sglang_node) -> None:
    """What the plan arm runs is what ``topo-gate exec`` runs: the same argv and launcher env."""
    import subprocess

    reporter = bench.root / "reporter.py"
    reporter.write_text(
        "import json, os, sys\nprint(json.dumps({'argv': sys.argv[1:], 'env': {k: v for k, v in os.environ.items()"
        " if k.startswith(('SGLANG_', 'TOPO_GATE_NODE'))}}))\n"
    )
    cmd = sglang_scenario(bench, sglang_node, values={"default": STEADY, "plan": faster(1.1)})
    exec_cmd = [sys.executable, str(reporter), *cmd[3:]]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "topo_gate",
            "exec",
            *sglang_node.args(),
            "--launcher",
            "sglang",
            "--",
            *exec_cmd,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    by_exec = json.loads(done.stdout)
    assert ab(capsys, *sglang_node.args(), "--json", "--", *cmd)[0] == 0
    plan_call = next(call for call in bench.seen() if call["arm"] == "plan")
    assert plan_call["argv"][:-2] == by_exec["argv"]  # ab appends only its result flag
    ours = {k: v for k, v in plan_call["env"].items() if k.startswith(("SGLANG_", "TOPO_GATE_NODE"))}
    assert ours == by_exec["env"]


#: What a benchmark prints before it crashes, and what the sealed record keeps of it.
CREDENTIAL_LINES = {
    "connecting to https://bot:pa/ss@w0rd@hub:8000 with --api-key s3cretKEY1": (
        "connecting to https://<redacted>@hub:8000 with --api-key <redacted>"
    ),
    "header Authorization: token ghsTOKEN2value HF_TOKEN=hfvalue3": (
        "header Authorization: token <redacted> HF_TOKEN=<redacted>"
    ),
    "HF_TOKEN=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789": "HF_TOKEN=<redacted>",
    "requests.get: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.cGF5bG9hZA.c2lnbmF0dXJl": (
        "requests.get: Authorization: Bearer <redacted>"
    ),
    "401 for token hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210": "401 for token <redacted>",
}
SECRETS = ("s3cretKEY1", "pa/ss", "w0rd", "ghsTOKEN2value", "hfvalue3", "hf_aBcDeF", "eyJhbGci", "hf_ZyXw")

#: A failed run (non-zero exit, with the stand-in's own last line) and a run that exits 0 but writes
#: no metric: both keep the tail of their output in the record.
FAILURES = {
    "exits 3": (
        {"exit": {"plan": {"2": 3}}},
        "failed",
        ["fake benchmark: plan call 2 fails with status 3"],
    ),
    "no metric": ({"omit": {"plan": [2]}}, "no-metric", []),
}


@pytest.mark.parametrize(("failure", "status", "last"), FAILURES.values(), ids=FAILURES)
def test_a_failed_runs_output_tail_is_kept_redacted_in_the_record(
    bench, capsys, tmp_path, sglang_node, failure, status, last
) -> None:
    """A benchmark that crashes after printing a credential must not share it in the sealed record; a
    passing run keeps no tail at all, and its metric as measured."""
    cmd = sglang_scenario(
        bench,
        sglang_node,
        values={"default": STEADY, "plan": faster(1.1)},
        stderr=list(CREDENTIAL_LINES),
        **failure,
    )
    out = tmp_path / "ab.json"
    code, _, err = ab(capsys, *sglang_node.args(), "--out", str(out), "--", *cmd)
    assert code == 0, err
    text = out.read_text()
    for secret in SECRETS:
        assert secret not in text
    runs = {(r["arm"], r["round"]): r for r in load_record(out)["runs"]}
    assert runs[("plan", 2)]["status"] == status
    assert runs[("plan", 2)]["tail"] == [*CREDENTIAL_LINES.values(), *last]
    passed = runs[("plan", 1)]
    assert (passed["status"], passed["tail"], passed["value"]) == ("ok", [], faster(1.1)[1])
