"""``topo-gate recommend``: formats, the version it targets, fail-closed output, exit codes."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml
from launcher_profiles import FINGERPRINT

from topo_gate.cli import main

WINNING = {
    "allreduce": [
        [16777216, "trtllm_oneshot", ["trtllm_oneshot_sglang", "trtllm_oneshot_vllm"]],
        [None, "nccl"],
    ],
    "allreduce_rmsnorm": [
        [16777216, "trtllm_fused_oneshot", ["trtllm_fused_oneshot_sglang", "trtllm_fused_oneshot_vllm"]],
        [None, "nccl"],
    ],
}


@pytest.fixture(autouse=True)
def verified_node(monkeypatch):
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", FINGERPRINT)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["recommend", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_args_format_is_one_shell_line(capsys, write_profile) -> None:
    code, out, err = run(capsys, str(write_profile(WINNING)), "--tp", "2", "--launcher", "vllm")
    assert code == 0
    words = shlex.split(out)
    assert words[0] == "--disable-custom-all-reduce" and words[1] == "--compilation-config"
    assert json.loads(words[2])["pass_config"]["fi_allreduce_fusion_max_size_mb"] == 16.0
    assert "vllm 0.33.0" in err


def test_env_format(capsys, write_profile) -> None:
    code, out, _ = run(
        capsys, str(write_profile(WINNING)), "--tp", "2", "--launcher", "vllm", "--format", "env"
    )
    assert code == 0 and "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm" in out.splitlines()


def test_json_has_everything(capsys, write_profile) -> None:
    code, out, _ = run(capsys, str(write_profile(WINNING)), "--tp", "2", "--launcher", "sglang", "--json")
    data = json.loads(out)
    assert code == 0 and set(data) >= {"args", "env", "notes", "launcher", "version", "fallback", "reason"}
    assert data["version"] == "0.5.23" and data["fallback"] is False


def test_trtllm_yaml_is_the_options_file(capsys, write_profile) -> None:
    # One-shot won up to TensorRT-LLM's 64 MiB routing limit: ONESHOT covers exactly that range.
    winning_to_limit = {
        pattern: [[64 << 20, *rungs[0][1:]], *rungs[1:]] for pattern, rungs in WINNING.items()
    }
    code, out, _ = run(
        capsys, str(write_profile(winning_to_limit)), "--tp", "2", "--launcher", "trtllm", "--format", "yaml"
    )
    assert code == 0 and yaml.safe_load(out) == {"allreduce_strategy": "ONESHOT"}
    assert "TensorRT-LLM git-f6a156b" in out


def test_missing_profile_forces_nccl_with_reason(capsys, tmp_path) -> None:
    code, out, err = run(capsys, str(tmp_path / "nope.yaml"), "--tp", "2", "--launcher", "sglang")
    assert code == 0
    assert shlex.split(out) == [
        "--disable-custom-all-reduce",
        "--enforce-disable-flashinfer-allreduce-fusion",
    ]
    assert "FALLBACK" in err and "no such file" in err


def test_strict_fallback_exits_1(capsys, write_profile) -> None:
    code, out, err = run(capsys, str(write_profile(WINNING)), "--tp", "4", "--launcher", "vllm", "--strict")
    assert code == 1 and out == "" and err.count("\n") == 1 and "not in the profile" in err


def test_unknown_launcher_is_a_usage_error(capsys, write_profile) -> None:
    code, _, err = run(capsys, str(write_profile(WINNING)), "--tp", "2", "--launcher", "tgi")
    assert code == 2 and "Traceback" not in err


@pytest.mark.parametrize(
    ("pattern", "fusion_on"), [("all", True), ("allreduce_rmsnorm", True), ("allreduce", False)]
)
def test_pattern_limits_which_decisions_are_followed(capsys, write_profile, pattern, fusion_on) -> None:
    code, out, _ = run(
        capsys, str(write_profile(WINNING)), "--tp", "2", "--launcher", "vllm", "--pattern", pattern, "--json"
    )
    data = json.loads(out)
    config = json.loads(data["args"][data["args"].index("--compilation-config") + 1])
    assert code == 0 and config["pass_config"]["fuse_allreduce_rms"] is fusion_on
    left_out = {"all": None, "allreduce": "allreduce_rmsnorm", "allreduce_rmsnorm": "allreduce"}[pattern]
    assert any(f"{left_out} not requested" in note for note in data["notes"]) is (left_out is not None)


def test_trtllm_strategy_serves_both_patterns_so_leaving_one_out_keeps_nccl(capsys, write_profile) -> None:
    # One allreduce_strategy drives the plain and the fused all-reduce: unmeasured for one, NCCL for both.
    code, out, _ = run(
        capsys, str(write_profile(WINNING)), "--tp", "2", "--launcher", "trtllm", "--pattern", "allreduce",
        "--format", "yaml",
    )  # fmt: skip
    assert code == 0 and yaml.safe_load(out) == {"allreduce_strategy": "NCCL"}


def test_unknown_pattern_in_the_api_fails_closed(write_profile) -> None:
    from topo_gate.launchers import vllm_plan

    plan = vllm_plan(write_profile(WINNING), tp=2, fingerprint=FINGERPRINT, patterns=("allgather",))
    assert plan.fallback and "unknown pattern" in plan.reason
    assert "--disable-custom-all-reduce" in plan.args
