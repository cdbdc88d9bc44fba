"""``probe --replay``, ``decide`` and ``check`` end to end, through the real CLI entry point.

Evidence comes from two places: ``data/cpu-gloo-tp2-tp4.evidence.json``, recorded by the real gloo
harness (``topo-gate probe --device cpu``), and the decision cases of ``tests/decide`` joined with a
recorded NVML capture, which is what GPU evidence carries under ``node.capture``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.profile import gate, load_profile
from topo_gate.topology.capture import load_capture
from topo_gate.topology.fingerprint import node_fingerprint
from topo_gate.topology.model import build_node

HERE = Path(__file__).parent
CPU_EVIDENCE = HERE / "data" / "cpu-gloo-tp2-tp4.evidence.json"
CAPTURES = HERE.parent / "fixtures" / "captures"
SEED_CASE = HERE.parent / "decide" / "cases" / "seed_lesson_pcie_tp2_wins_tp4_loses.json"
PCIE_CAPTURE = CAPTURES / "rtx-pro-6000-pcie-x8.synthetic.json"


@pytest.fixture
def pcie_evidence(tmp_path) -> Path:
    """The seed lesson's trials, recorded on the PCIe node of the capture fixture."""
    evidence = json.loads(SEED_CASE.read_text())["evidence"]
    evidence["node"]["capture"] = json.loads(PCIE_CAPTURE.read_text())
    # Each run's group under the class this node gives it (decide refuses a run the node contradicts).
    groups = build_node(load_capture(PCIE_CAPTURE)).to_hardware_dict()["tp_groups"]
    for run in evidence["runs"]:
        run["group_class"] = next(g["class"] for g in groups[str(run["tp"])] if g["gpus"] == run["group"])
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence))
    return path


def test_replay_rebuilds_the_node_from_the_embedded_capture(pcie_evidence, tmp_path, capsys):
    out = tmp_path / "profile.yaml"
    assert main(["probe", "--replay", str(pcie_evidence), "--out", str(out)]) == 0
    profile = load_profile(out)  # sealed and valid
    assert profile.node.fingerprint == node_fingerprint(build_node(load_capture(PCIE_CAPTURE)))
    assert profile.evidence.path == "evidence.json" and profile.evidence.digest.startswith("sha256:")
    by_tp = {entry.tp: [rule.backend for rule in entry.rules] for entry in profile.decisions}
    assert by_tp == {2: ["trtllm_oneshot", "nccl"], 4: ["nccl"]}  # the seed lesson, end to end
    assert "trtllm_oneshot" in capsys.readouterr().out  # the summary table


def test_replayed_profile_matches_its_own_node_and_no_other(pcie_evidence, tmp_path, capsys):
    out = tmp_path / "profile.yaml"
    main(["probe", "--replay", str(pcie_evidence), "--out", str(out)])
    capsys.readouterr()
    assert main(["check", str(out), "--from", str(PCIE_CAPTURE)]) == 0
    assert main(["check", str(out), "--from", str(CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "node does not match the profile: interconnect nvswitch != " in error


def test_check_json_names_the_differences(pcie_evidence, tmp_path, capsys):
    out = tmp_path / "profile.yaml"
    main(["probe", "--replay", str(pcie_evidence), "--out", str(out)])
    capsys.readouterr()
    other = CAPTURES / "l40s-no-p2p-x4.synthetic.json"
    assert main(["check", str(out), "--from", str(other), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["match"] is False and report["hardware"]["differences"]
    assert set(report) == {"match", "hardware", "drift", "reason"}


def test_software_drift_warns_and_fails_only_under_strict(pcie_evidence, tmp_path, capsys):
    evidence = json.loads(pcie_evidence.read_text())
    evidence["node"]["software"] = {"torch": "0.0.1"}  # surely not what is installed here
    pcie_evidence.write_text(json.dumps(evidence))
    out = tmp_path / "profile.yaml"
    main(["probe", "--replay", str(pcie_evidence), "--out", str(out)])
    capsys.readouterr()
    assert main(["check", str(out), "--from", str(PCIE_CAPTURE)]) == 0
    assert "software drift: torch 0.0.1 -> " in capsys.readouterr().err
    assert main(["check", str(out), "--from", str(PCIE_CAPTURE), "--strict"]) == 7


def test_cpu_evidence_replays_into_a_cpu_labelled_profile(tmp_path, capsys):
    out = tmp_path / "cpu.yaml"
    assert main(["probe", "--replay", str(CPU_EVIDENCE), "--out", str(out)]) == 0
    profile = load_profile(out)
    assert profile.node.hardware["device"] == "cpu"
    assert {entry.group_class for entry in profile.decisions} == {"cpu-gloo"}
    assert "CPU harness" in capsys.readouterr().out
    assert main(["check", str(out)]) == 0  # this machine's CPU is what it describes
    # ...and it can never pass for a GPU node: neither for check nor for the launcher's reader.
    assert main(["check", str(out), "--from", str(PCIE_CAPTURE)]) == 1
    assert "device cuda != cpu" in capsys.readouterr().err
    gpu = node_fingerprint(build_node(load_capture(PCIE_CAPTURE)))
    decision = gate(out, tp=2, fingerprint=gpu)
    assert decision.backend == "nccl" and "fingerprint" in decision.reason


def test_decide_is_pure_and_writes_only_with_out(tmp_path, capsys):
    assert main(["decide", str(CPU_EVIDENCE), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["decide", str(CPU_EVIDENCE), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    first.pop("created"), second.pop("created"), first.pop("digest"), second.pop("digest")
    assert first == second and list(tmp_path.iterdir()) == []
    out = tmp_path / "p.yaml"
    assert main(["decide", str(CPU_EVIDENCE), "--margin", "0.5", "--out", str(out)]) == 0
    assert load_profile(out).trials.method["margin"] == 0.5


@pytest.mark.parametrize("command", [["decide"], ["probe", "--replay"]])
def test_unreadable_evidence_exits_3_in_one_line(command, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main([*command, str(bad), "--out", str(tmp_path / "p.yaml")]) == 3
    assert capsys.readouterr().err.count("\n") == 1


def test_check_of_a_missing_profile_exits_3(tmp_path, capsys):
    assert main(["check", str(tmp_path / "none.yaml")]) == 3


def test_unknown_model_is_a_usage_error(capsys):
    assert main(["probe", "--model", "llama3-70"]) == 2
    assert "did you mean llama-3-70b" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA driver")
def test_probe_without_a_driver_says_how_to_replay(capsys):
    assert main(["probe", "--model", "llama-3-8b"]) == 4
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no NVIDIA GPU/driver found" in error and "--replay" in error


@pytest.mark.slow
@pytest.mark.slow
def test_cpu_probe_runs_the_real_gloo_harness_end_to_end(tmp_path, capsys):
    out, evidence = tmp_path / "cpu.yaml", tmp_path / "evidence.json"
    args = [
        "probe",
        "--device",
        "cpu",
        "--tp",
        "2",
        "--hidden",
        "256",
        "--max-tokens",
        "8",
        "--patterns",
        "allreduce",
        "--out",
        str(out),
        "--evidence",
        str(evidence),
        "--json",
    ]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    profile = load_profile(out)
    assert result["profile_path"] == str(out) and evidence.exists()
    (entry,) = profile.decisions
    assert (entry.tp, entry.group_class, entry.rules[-1].backend) == (2, "cpu-gloo", "nccl")


@pytest.mark.slow
def test_a_plan_that_fails_twice_writes_no_profile_and_a_replay_records_it_failed(
    tmp_path, capsys, monkeypatch
):
    from topo_gate.probe import PlanFailed, ProbeOptions, probe

    monkeypatch.setenv("TOPO_GATE_ALLOW_FAULT_INJECTION", "1")
    out, evidence = tmp_path / "cpu.yaml", tmp_path / "evidence.json"
    options = ProbeOptions(
        out=out, hidden=32, tps=(2,), device="cpu", evidence_out=evidence, max_tokens=2,
        faults={"allreduce_rmsnorm": {"_startup": "infra"}},
    )  # fmt: skip
    with pytest.raises(PlanFailed, match="TP2 cpu-gloo allreduce_rmsnorm: .*injected start-up failure"):
        probe(options)
    assert evidence.exists() and not out.exists()
    # What --allow-partial writes: the failed plan recorded as failed, named in the summary.
    assert main(["probe", "--replay", str(evidence), "--out", str(out)]) == 0
    assert "FAILED plan: TP2 cpu-gloo allreduce_rmsnorm" in capsys.readouterr().out
    failed = {entry.pattern: entry.failed for entry in load_profile(out).decisions}
    assert failed["allreduce"] is None and "injected start-up failure" in failed["allreduce_rmsnorm"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--device", "cpu", "--tp", "2", "--hidden", "64"], "--from has no effect with --device cpu"),
        (["--replay", str(CPU_EVIDENCE)], "--from has no effect with --replay"),
    ],
)
def test_an_option_that_would_be_ignored_is_a_usage_error(extra, message, tmp_path, capsys):
    bad_capture = tmp_path / "not-a-capture.json"
    bad_capture.write_text("{")
    out = tmp_path / "p.yaml"
    assert main(["probe", *extra, "--from", str(bad_capture), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and not out.exists()


@pytest.mark.slow
def test_a_pattern_the_budget_left_no_time_for_is_dropped_and_the_measured_one_kept(tmp_path):
    """Mid-session: the clock says the budget ran out while the first pattern ran (whatever this
    machine's speed), so the workers start no second pattern; it is recorded as dropped, with the
    reason, in the evidence and the summary, and is NCCL (no entry)."""
    from topo_gate.probe import ProbeOptions, probe

    out, evidence = tmp_path / "p.yaml", tmp_path / "evidence.json"
    options = ProbeOptions(
        out=out, hidden=64, device="cpu", tps=(2,), max_tokens=1, budget_s=10_000.0, evidence_out=evidence
    )
    ticks = iter([0.0, 20_000.0])  # the start; then, as the session starts: past the budget
    result = probe(options, clock=lambda: next(ticks))
    (entry,) = result.profile.decisions
    assert entry.pattern == "allreduce"
    recorded = json.loads(evidence.read_text())
    assert recorded["format"] == "topo-gate/evidence/v1.3"
    assert [run["pattern"] for run in recorded["runs"]] == ["allreduce"]
    reason = "the 10000 s budget was spent before it started"
    assert recorded["budget"] == {
        "seconds": 10_000.0,
        "dropped": [{"tp": 2, "pattern": "allreduce_rmsnorm", "what": "the whole run, NCCL there (unmeasured)",
                     "reason": reason}],
    }  # fmt: skip
    assert any(n.startswith("--budget: the whole run") and "TP2 allreduce_rmsnorm" in n for n in result.notes)


@pytest.mark.slow
def test_a_session_the_budget_left_no_time_for_is_not_started(tmp_path):
    """Between sessions: the first always runs; when the clock says the budget is spent, the next
    group's workers never start, and each of its patterns is recorded as dropped."""
    from topo_gate.probe import ProbeOptions, probe

    evidence = tmp_path / "evidence.json"
    options = ProbeOptions(
        out=tmp_path / "p.yaml", hidden=64, device="cpu", tps=(2, 4), patterns=("allreduce",), max_tokens=1,
        budget_s=10_000.0, evidence_out=evidence,
    )  # fmt: skip
    ticks = iter([0.0, 0.0, 20_000.0])  # start; the first session's deadline; before the second
    result = probe(options, clock=lambda: next(ticks))
    assert [(e.tp, e.pattern) for e in result.profile.decisions] == [(2, "allreduce")]
    dropped = json.loads(evidence.read_text())["budget"]["dropped"]
    assert [(d["tp"], d["pattern"]) for d in dropped] == [(4, "allreduce")]
    assert any("TP4 allreduce" in note for note in result.notes)


@pytest.mark.slow  # plans every launcher at each TP size of the replayed profile
def test_the_summarys_outlook_plans_for_the_model_given(pcie_evidence, tmp_path, capsys):
    # The profile measured hidden 7168 (DeepSeek-V3's); --model names another served model, and the
    # outlook (JSON and terminal alike) must plan for it, not for the profile's presets.
    assert main(["probe", "--replay", str(pcie_evidence), "--out", str(tmp_path / "p"), "--json"]) == 0
    unnamed = json.loads(capsys.readouterr().out)["launchers"]["entries"]
    assert unnamed and {entry["shape"]["hidden"] for entry in unnamed} == {7168}
    assert (
        main(
            [
                "probe",
                "--replay",
                str(pcie_evidence),
                "--out",
                str(tmp_path / "q"),
                "--model",
                "qwen3-32b",
                "--json",
            ]
        )
        == 0
    )
    named = json.loads(capsys.readouterr().out)["launchers"]["entries"]
    assert named and {(entry["shape"]["model"], entry["shape"]["hidden"]) for entry in named} == {
        ("qwen3-32b", 5120)
    }
    assert (
        main(["probe", "--replay", str(pcie_evidence), "--out", str(tmp_path / "r"), "--model", "qwen3-32b"])
        == 0
    )
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "qwen3-32b: hidden 5120" in text
        and "hidden 7168" not in text.partition("What your launchers will do")[2]
    )
