"""``topo-gate exec`` replaces itself with the launcher (same PID), flags appended and env set."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from launcher_profiles import FINGERPRINT

WINNING = {
    "allreduce": [
        [67108864, "trtllm_oneshot", ["trtllm_oneshot_sglang", "trtllm_oneshot_vllm"]],
        [None, "nccl"],
    ],
    "allreduce_rmsnorm": [
        [67108864, "trtllm_fused_oneshot", ["trtllm_fused_oneshot_sglang", "trtllm_fused_oneshot_vllm"]],
        [None, "nccl"],
    ],
}
CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
# Stands in for a launcher: reports its argv, the env topo-gate sets, and its PID.
REPORTER = """import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "pid": os.getpid(),
                  "env": {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "SGLANG_", "TOPO_GATE_"))}}))
"""


@pytest.fixture
def reporter(tmp_path: Path) -> str:
    path = tmp_path / "reporter.py"
    path.write_text(REPORTER)
    return str(path)


def topo_gate_exec(*argv: str, env: dict | None = None) -> tuple[subprocess.Popen, str, str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "topo_gate", "exec", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    out, err = child.communicate(timeout=60)
    return child, out, err


def test_exec_replaces_the_process_with_flags_and_env(reporter, write_profile) -> None:
    child, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(WINNING)),
        "--tp",
        "2",
        "--launcher",
        "vllm",
        "--node-fingerprint",
        FINGERPRINT,
        "--",
        sys.executable,
        reporter,
        "--model",
        "m",
    )
    assert child.returncode == 0, err
    seen = json.loads(out)
    assert seen["pid"] == child.pid  # exec, not a child process
    assert seen["argv"][:2] == ["--model", "m"] and "--disable-custom-all-reduce" in seen["argv"]
    assert seen["env"]["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"
    assert seen["env"]["TOPO_GATE_NODE_FINGERPRINT"] == FINGERPRINT
    assert "topo-gate: + --disable-custom-all-reduce" in err


def test_user_flag_wins_with_warning(reporter, write_profile) -> None:
    fusion_wins = {
        **WINNING,
        "allreduce_rmsnorm": [
            [33554432, "trtllm_fused_oneshot", ["trtllm_fused_oneshot_sglang", "trtllm_fused_oneshot_vllm"]],
            [None, "nccl"],
        ],
    }
    child, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(fusion_wins)),
        "--tp",
        "2",
        "--launcher",
        "sglang",
        "--node-fingerprint",
        FINGERPRINT,
        "--",
        sys.executable,
        reporter,
        "--enforce-disable-flashinfer-allreduce-fusion",
    )
    assert child.returncode == 0, err
    assert "--flashinfer-allreduce-fusion-backend" not in json.loads(out)["argv"]
    assert "warning:" in err and "yours wins" in err


def test_foreign_node_from_capture_runs_with_nccl_forced(reporter, write_profile) -> None:
    capture = CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json"
    child, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(WINNING)),
        "--tp",
        "2",
        "--launcher",
        "sglang",
        "--from",
        str(capture),
        "--",
        sys.executable,
        reporter,
    )
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == [
        "--disable-custom-all-reduce",
        "--enforce-disable-flashinfer-allreduce-fusion",
    ]
    assert "FALLBACK" in err and "not the kind" in err


def test_foreign_node_under_strict_exits_1(reporter, write_profile) -> None:
    capture = CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json"
    child, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(WINNING)),
        "--tp",
        "2",
        "--launcher",
        "sglang",
        "--from",
        str(capture),
        "--strict",
        "--",
        sys.executable,
        reporter,
        "--tp-size",
        "2",
    )
    assert child.returncode == 1 and out == "" and err.startswith("topo-gate: error:")


def _nvidia_driver_present() -> bool:
    """Whether NVML's library loads here: the fact the next test depends on, found without topo-gate."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvidia_driver_present(), reason="an NVIDIA driver is present here")
def test_no_driver_still_starts_the_launcher_with_nccl(reporter, write_profile) -> None:
    # NVML is read for real and is absent: the node cannot be verified, so the profile is not followed.
    child, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(WINNING)),
        "--tp",
        "2",
        "--launcher",
        "vllm",
        "--",
        sys.executable,
        reporter,
    )
    assert "no NVIDIA driver" in err
    launched = json.loads(out)
    assert child.returncode == 0 and "--disable-custom-all-reduce" in launched["argv"]
    assert launched["env"]["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"  # vLLM 0.33.0 defaults it on
    strict, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(WINNING)),
        "--tp",
        "2",
        "--launcher",
        "vllm",
        "--strict",
        "--",
        sys.executable,
        reporter,
    )
    assert strict.returncode == 4 and out == ""


def test_trtllm_gets_an_options_file(reporter, write_profile, tmp_path) -> None:
    user_options = tmp_path / "mine.yaml"
    user_options.write_text("max_batch_size: 8\n")
    child, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(WINNING)),
        "--tp",
        "2",
        "--launcher",
        "trtllm",
        "--node-fingerprint",
        FINGERPRINT,
        "--",
        sys.executable,
        reporter,
        "--extra_llm_api_options",
        str(user_options),
    )
    assert child.returncode == 0, err
    argv = json.loads(out)["argv"]
    merged = Path(argv[argv.index("--extra_llm_api_options") + 1])
    assert merged != user_options
    assert yaml.safe_load(merged.read_text()) == {"max_batch_size": 8, "allreduce_strategy": "ONESHOT"}


def test_undetectable_launcher_is_a_usage_error(reporter, write_profile) -> None:
    child, out, err = topo_gate_exec(
        "--profile",
        str(write_profile(WINNING)),
        "--tp",
        "2",
        "--node-fingerprint",
        FINGERPRINT,
        "--",
        sys.executable,
        reporter,
    )
    assert child.returncode == 2 and "pass --launcher" in err


def _exec_vllm(profile: Path, reporter: str, *exec_args: str, cmd: tuple[str, ...] = ()):
    return topo_gate_exec(
        "--profile",
        str(profile),
        "--launcher",
        "vllm",
        "--node-fingerprint",
        FINGERPRINT,
        *exec_args,
        "--",
        sys.executable,
        reporter,
        *cmd,
    )


def test_tp_is_read_from_the_command_line(reporter, write_profile) -> None:
    child, out, err = _exec_vllm(write_profile(WINNING), reporter, cmd=("-tp", "2"))
    assert child.returncode == 0, err
    assert "following the profile" in err
    assert "size ranges on a measured winner" in err  # the one-line explain summary


def test_tp_disagreeing_with_the_command_forces_nccl(reporter, write_profile) -> None:
    child, out, err = _exec_vllm(write_profile(WINNING), reporter, "--tp", "2", cmd=("-tp", "4"))
    assert child.returncode == 0, err
    assert "FALLBACK" in err and "disagrees with the command's TP size 4" in err
    assert json.loads(out)["env"]["VLLM_ALLREDUCE_USE_FLASHINFER"] == "0"


def test_tp_disagreement_under_strict_exits_before_the_launcher(reporter, write_profile) -> None:
    child, out, err = _exec_vllm(
        write_profile(WINNING), reporter, "--tp", "2", "--strict", cmd=("--tensor-parallel-size=4",)
    )
    assert child.returncode == 1 and out == ""
    assert err.startswith("topo-gate: error:") and "disagrees" in err


def test_no_tp_anywhere_is_a_usage_error(reporter, write_profile) -> None:
    child, out, err = _exec_vllm(write_profile(WINNING), reporter)
    assert child.returncode == 2 and out == ""
    assert "names no TP size" in err


def test_unknown_model_is_a_usage_error(reporter, write_profile) -> None:
    child, out, err = _exec_vllm(
        write_profile(WINNING), reporter, "--model", "no-such-model", cmd=("-tp", "2")
    )
    assert child.returncode == 2 and "no-such-model" in err


def _exec_trtllm(profile: Path, program: str, tmp_path: Path) -> tuple[subprocess.Popen, str, str]:
    # TMPDIR: where the TensorRT-LLM options file would go, so the test sees whatever is left behind.
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    args = ("--profile", str(profile), "--tp", "2", "--launcher", "trtllm", "--node-fingerprint", FINGERPRINT)
    return topo_gate_exec(*args, "--", program, "serve", env=env)


def test_command_not_found_exits_127_and_leaves_nothing(write_profile, tmp_path) -> None:
    child, out, err = _exec_trtllm(write_profile(WINNING), "no-such-launcher-anywhere", tmp_path)
    assert child.returncode == 127 and out == ""
    assert err == "topo-gate: error: cannot run 'no-such-launcher-anywhere': command not found\n"
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_file_without_the_execute_bit_exits_126(write_profile, tmp_path) -> None:
    program = tmp_path / "launcher"
    program.write_text("#!/bin/sh\necho never\n")
    program.chmod(0o644)
    child, out, err = _exec_trtllm(write_profile(WINNING), str(program), tmp_path)
    assert child.returncode == 126 and out == ""
    assert err == f"topo-gate: error: cannot run '{program}': {program} is not an executable file\n"
    assert list((tmp_path / "tmp").iterdir()) == []


def test_an_executable_the_kernel_cannot_run_exits_126_and_its_options_file_is_removed(
    write_profile, tmp_path
) -> None:
    program = tmp_path / "launcher"
    program.write_bytes(b"\x00\x01 not a program the kernel knows\n")  # no #!, no ELF header
    program.chmod(0o755)
    child, out, err = _exec_trtllm(write_profile(WINNING), str(program), tmp_path)
    assert child.returncode == 126 and out == ""
    assert f"topo-gate: + --extra_llm_api_options {tmp_path / 'tmp'}" in err
    assert err.splitlines()[-1] == f"topo-gate: error: cannot run '{program}': Exec format error"
    assert list((tmp_path / "tmp").iterdir()) == []  # the options file was written, then removed


@pytest.mark.parametrize("spelled", [("--tensor-parallel", "4"), ("--tensor_parallel_size", "4"), ("-tp=4",)])
def test_a_tp4_launch_never_gets_the_tp2_plan(reporter, write_profile, spelled) -> None:
    # The command's TP size as vLLM reads it (abbreviated, underscored, =): 4, so --tp 2 disagrees.
    child, out, err = _exec_vllm(write_profile(WINNING), reporter, "--tp", "2", cmd=spelled)
    assert child.returncode == 0, err
    assert "FALLBACK" in err and "disagrees with the command's TP size 4" in err


def test_an_ambiguous_flag_in_cmd_is_a_usage_error(reporter, write_profile) -> None:
    child, out, err = _exec_vllm(write_profile(WINNING), reporter, "--tp", "2", cmd=("--disable-c",))
    assert child.returncode == 2 and out == ""
    assert (
        err.startswith("topo-gate: error: vllm would refuse CMD: ambiguous option") and err.count("\n") == 1
    )


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_options_file_that_is_no_regular_file_exits_3(reporter, write_profile, tmp_path, kind) -> None:
    path = tmp_path / "options.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    child, out, err = topo_gate_exec(
        "--profile", str(write_profile(WINNING)), "--tp", "2", "--launcher", "trtllm",
        "--node-fingerprint", FINGERPRINT, "--", sys.executable, reporter,
        "--extra_llm_api_options", str(path),
    )  # fmt: skip
    assert child.returncode == 3 and out == ""
    assert err == f"topo-gate: error: {path}: is not a regular file, not a TensorRT-LLM options file\n"


def test_trtllm_config_alias_is_the_options_file_replaced_in_place(reporter, write_profile, tmp_path) -> None:
    user_options = tmp_path / "mine.yaml"
    user_options.write_text("allreduce_strategy: NCCL\n")
    child, out, err = topo_gate_exec(
        "--profile", str(write_profile(WINNING)), "--tp", "2", "--launcher", "trtllm",
        "--node-fingerprint", FINGERPRINT, "--", sys.executable, reporter, f"--config={user_options}",
    )  # fmt: skip
    assert child.returncode == 0, err
    argv = json.loads(out)["argv"]
    assert "--extra_llm_api_options" not in argv and len(argv) == 1 and argv[0].startswith("--config=")
    written = Path(argv[0].partition("=")[2])
    assert yaml.safe_load(written.read_text()) == {"allreduce_strategy": "NCCL"}  # the user's choice
    assert "yours wins" in err


def test_an_odd_capability_in_a_sealed_profile_still_starts_cmd_on_the_fallback(reporter, tmp_path) -> None:
    from topo_gate.profile.digest import compute_digest

    data = yaml.safe_load((Path(__file__).parents[2] / "profiles/examples/synthetic-h200x2.yaml").read_text())
    for gpu in data["node"]["hardware"]["gpus"]:
        gpu["sm"] = "\u00b2.0"  # str.isdigit() says yes, int() says no
    data["digest"] = compute_digest(data)
    profile = tmp_path / "odd.yaml"
    profile.write_text(yaml.safe_dump(data, allow_unicode=True))
    fingerprint = data["node"]["fingerprint"]
    child, out, err = topo_gate_exec(
        "--profile", str(profile), "--tp", "2", "--launcher", "vllm", "--node-fingerprint", fingerprint,
        "--", sys.executable, reporter,
    )  # fmt: skip
    assert child.returncode == 0, err
    assert json.loads(out)["pid"] == child.pid  # CMD ran, in place of topo-gate
    assert "FALLBACK" in err and "hardware.gpus[0].sm" in err and "internal error" not in err
