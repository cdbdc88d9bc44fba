"""``topo-gate exec`` replaces itself with the launcher (same PID), with the plan's flags and env added.

CMD and the environment are the user's own knobs: the plan is priced against what CMD runs without
topo-gate and never overrides a flag or variable CMD or the environment already sets. Any fallback
runs CMD unchanged, with the reason on stderr; ``--fallback nccl`` forces NCCL instead.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from knob_cases import BY_NAME
from priced_profiles import FINGERPRINT
from stand_in_launcher import launcher_venv

from topo_gate.launchers import sglang, vllm

pytestmark = pytest.mark.slow

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
# Stands in for a launcher: reports its argv, the env topo-gate sets, and its PID.
REPORTER = """import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "pid": os.getpid(),
                  "env": {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "SGLANG_", "TOPO_GATE_"))}}))
"""
#: The variables a plan may set: removed from the environment each test starts topo-gate with.
PLAN_ENV_PREFIXES = ("VLLM_", "SGLANG_", "TLLM_", "TOPO_GATE_")


@pytest.fixture
def reporter(tmp_path: Path) -> str:
    path = tmp_path / "reporter.py"
    path.write_text(REPORTER)
    return str(path)


@pytest.fixture
def case_profile(tmp_path: Path):
    """``case_profile(name) -> Path`` of the knob case's profile (knob_cases.py)."""

    def write(name: str) -> Path:
        return BY_NAME[name].write(tmp_path / f"{name}.yaml")

    return write


def clean_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(PLAN_ENV_PREFIXES)}
    return {**base, **extra}


def added(err: str) -> list[str]:
    """What exec says it added to CMD and its environment (the verified node's fingerprint aside)."""
    return [
        line.removeprefix("topo-gate: + ")
        for line in err.splitlines()
        if line.startswith("topo-gate: + ")
        and not line.startswith("topo-gate: + TOPO_GATE_NODE_FINGERPRINT=")
    ]


def topo_gate_exec(*argv: str, env: dict | None = None) -> tuple[subprocess.Popen, str, str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "topo_gate", "exec", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env() if env is None else env,
    )
    try:
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:  # past the guard, or interrupted: never left running
            child.kill()
            child.communicate()
    return child, out, err


def exec_case(
    name: str, case_profile, reporter: str, *exec_args: str, cmd=(), env=None, fingerprint=True, python=None
):
    """``topo-gate exec`` for the knob case's launcher and model on its profile, CMD the reporter run by
    ``python`` (default: this interpreter, where no launcher is installed: its release is unknown)."""
    case = BY_NAME[name]
    node = ("--node-fingerprint", FINGERPRINT) if fingerprint else ()
    return topo_gate_exec(
        "--profile", str(case_profile(name)), "--tp", str(case.tp), "--launcher", case.launcher,
        "--model", case.model, *node, *exec_args, "--", python or sys.executable, reporter, *cmd,
        env=clean_env(**case.user_env) if env is None else env,
    )  # fmt: skip


def test_exec_replaces_the_process_with_the_plans_env(reporter, case_profile) -> None:
    # vLLM with the user's FlashInfer backend trtllm (in the environment) and --enforce-eager (in CMD):
    # the TRT-LLM kernels lose to NCCL here, so the plan switches FlashInfer (and symm-mem) off.
    child, out, err = exec_case(
        "vllm-flashinfer-off", case_profile, reporter, cmd=("--model", "m", "--enforce-eager")
    )
    assert child.returncode == 0, err
    seen = json.loads(out)
    assert seen["pid"] == child.pid  # exec, not a child process
    assert seen["argv"] == ["--model", "m", "--enforce-eager"]
    assert seen["env"]["VLLM_ALLREDUCE_USE_FLASHINFER"] == "0"
    assert seen["env"]["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    assert seen["env"]["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"  # the user's, untouched
    assert seen["env"]["TOPO_GATE_NODE_FINGERPRINT"] == FINGERPRINT
    assert "topo-gate: + VLLM_ALLREDUCE_USE_FLASHINFER=0" in err
    assert "topo-gate: plan: " in err and ": est. -" in err and "all-reduce time vs default" in err


def test_exec_adds_the_plans_flags(reporter, case_profile) -> None:
    child, out, err = exec_case("sglang-custom-off", case_profile, reporter, cmd=("--tp-size", "2"))
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == ["--tp-size", "2", "--disable-custom-all-reduce"]
    assert "topo-gate: + --disable-custom-all-reduce" in err and ": est. -" in err


def test_the_estimate_line_says_no_knobs_when_nothing_saves(reporter, case_profile) -> None:
    # Only 1024-token steps: SGLang's custom all-reduce (up to 512 tokens) never runs.
    workload = Path(case_profile("sglang-custom-off")).with_name("w.yaml")
    workload.write_text("steps: {1024: 1}\n")
    child, out, err = exec_case(
        "sglang-custom-off", case_profile, reporter, "--workload", str(workload), cmd=("--tp-size", "2")
    )
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == ["--tp-size", "2"]
    assert "topo-gate: no knobs: nothing measured beats the launcher's default" in err and "'w.yaml'" in err


@pytest.mark.parametrize(
    ("launcher", "spelled"),
    [
        ("sglang", "--disable-custom-all-reduce"),
        ("sglang", "--disable-custom-all"),  # argparse takes an unambiguous abbreviation
        ("vllm", "--disable-custom-all-reduce"),
        ("vllm", "--disable-custom-all"),
        ("vllm", "--disable_custom_all_reduce"),  # vLLM rewrites _ to - first
    ],
)
def test_a_flag_in_cmd_is_priced_as_the_default_and_never_overridden(
    reporter, case_profile, launcher: str, spelled: str
) -> None:
    # Custom all-reduce is slower than NCCL here; CMD turns it off itself (in any spelling the launcher
    # reads): the default already runs NCCL, so nothing is added and the estimate says so.
    child, out, err = exec_case(f"{launcher}-custom-off", case_profile, reporter, cmd=(spelled,))
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == [spelled]
    assert added(err) == [] and "yours wins" not in err
    assert "topo-gate: no knobs: nothing measured beats the launcher's default" in err


@pytest.mark.slow
def test_a_users_fusion_switch_is_kept_and_the_plan_prices_around_it(reporter, case_profile) -> None:
    # The plan here turns FlashInfer fusion on; CMD enforce-disables it: the plan leaves fusion alone.
    child, out, err = exec_case(
        "sglang-fusion-on", case_profile, reporter, cmd=("--enforce-disable-flashinfer-allreduce-fusion",)
    )
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == ["--enforce-disable-flashinfer-allreduce-fusion"]
    assert "yours wins" not in err
    child, out, err = exec_case("sglang-fusion-on", case_profile, reporter)  # the control: without it
    assert json.loads(out)["argv"] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]


def test_a_foreign_node_runs_cmd_unchanged_with_the_reason(reporter, case_profile) -> None:
    capture = CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json"
    args = ("--from", str(capture))
    child, out, err = exec_case(
        "sglang-custom-off", case_profile, reporter, *args, cmd=("--tp-size", "2"), fingerprint=False
    )
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == ["--tp-size", "2"]
    assert "FALLBACK" in err and "not the kind" in err and added(err) == []
    forced, out, err = exec_case(
        "sglang-custom-off", case_profile, reporter, *args, "--fallback", "nccl", cmd=("--tp-size", "2"),
        fingerprint=False,
    )  # fmt: skip
    assert forced.returncode == 0, err
    assert json.loads(out)["argv"] == ["--tp-size", "2", *sglang.FORCE_NCCL.args]
    assert json.loads(out)["env"]["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "0"


@pytest.fixture(scope="module")
def modelled_python(tmp_path_factory) -> str:
    """An interpreter with the modelled SGLang, vLLM and FlashInfer releases installed (metadata)."""
    versions = {"sglang": "0.5.23", "vllm": "0.33.0", "flashinfer-python": "0.7.2.post1"}
    return str(launcher_venv(tmp_path_factory.mktemp("modelled"), versions, scripts=()) / "python")


def test_a_foreign_node_under_strict_exits_1(reporter, case_profile, modelled_python) -> None:
    # The modelled release installed: --strict exits for the node, not for an unknown release (7).
    capture = CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json"
    child, out, err = exec_case(
        "sglang-custom-off", case_profile, reporter, "--from", str(capture), "--strict", cmd=("--tp-size", "2"),
        fingerprint=False, python=modelled_python,
    )  # fmt: skip
    assert child.returncode == 1 and out == "" and err.startswith("topo-gate: error:")


def _nvidia_driver_present() -> bool:
    """Whether NVML's library loads here: the fact the next test depends on, found without topo-gate."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(_nvidia_driver_present(), reason="an NVIDIA driver is present here")
def test_no_driver_still_starts_the_launcher_unchanged(reporter, case_profile) -> None:
    # NVML is read for real and is absent: the node cannot be verified, so the profile is not followed.
    child, out, err = exec_case(
        "vllm-custom-off", case_profile, reporter, cmd=("-tp", "2"), fingerprint=False
    )
    assert "no NVIDIA driver" in err and "FALLBACK" in err
    launched = json.loads(out)
    assert child.returncode == 0 and launched["argv"] == ["-tp", "2"]
    assert not any(name.startswith("VLLM_") for name in launched["env"])
    forced, out, err = exec_case(
        "vllm-custom-off", case_profile, reporter, "--fallback", "nccl", cmd=("-tp", "2"), fingerprint=False
    )
    launched = json.loads(out)
    assert forced.returncode == 0 and "--disable-custom-all-reduce" in launched["argv"]
    assert launched["env"]["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"  # vLLM 0.33.0 defaults it on
    strict, out, err = exec_case(
        "vllm-custom-off", case_profile, reporter, "--strict", cmd=("-tp", "2"), fingerprint=False
    )
    assert strict.returncode == 4 and out == ""


def test_trtllm_gets_an_options_file_merged_into_the_users(reporter, case_profile, tmp_path) -> None:
    user_options = tmp_path / "mine.yaml"
    user_options.write_text("max_batch_size: 8\n")
    child, out, err = exec_case(
        "trtllm-nccl", case_profile, reporter, cmd=("--extra_llm_api_options", str(user_options))
    )
    assert child.returncode == 0, err
    argv = json.loads(out)["argv"]
    merged = Path(argv[argv.index("--extra_llm_api_options") + 1])
    assert merged != user_options
    assert yaml.safe_load(merged.read_text()) == {"max_batch_size": 8, "allreduce_strategy": "NCCL"}
    assert user_options.read_text() == "max_batch_size: 8\n"


def test_trtllms_autotuned_default_is_left_alone(reporter, case_profile) -> None:
    # Without TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1, AUTO is tuned at warm-up: never measured, never replaced.
    child, out, err = exec_case("trtllm-nccl", case_profile, reporter, env=clean_env())
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == [] and added(err) == []
    assert "topo-gate: no knobs: " in err and "which is not measured" in err
    assert "the default's paths were not measured at any of the workload 'serving' sizes" in err
    assert "nothing changed" not in err


def test_undetectable_launcher_is_a_usage_error(reporter, case_profile) -> None:
    child, out, err = topo_gate_exec(
        "--profile", str(case_profile("vllm-custom-off")), "--tp", "2", "--node-fingerprint", FINGERPRINT,
        "--", sys.executable, reporter,
    )  # fmt: skip
    assert child.returncode == 2 and "pass --launcher" in err


def _exec_vllm(profile: Path, reporter: str, *exec_args: str, cmd: tuple[str, ...] = ()):
    return topo_gate_exec(
        "--profile", str(profile), "--launcher", "vllm", "--model", "llama-3.1-70b",
        "--node-fingerprint", FINGERPRINT, *exec_args, "--", sys.executable, reporter, *cmd,
    )  # fmt: skip


def test_tp_is_read_from_the_command_line(reporter, case_profile) -> None:
    child, out, err = _exec_vllm(case_profile("vllm-custom-off"), reporter, cmd=("-tp", "2"))
    assert child.returncode == 0, err
    assert "following the profile" in err and ": est. -" in err
    assert json.loads(out)["argv"] == ["-tp", "2", "--disable-custom-all-reduce"]


def test_tp_disagreeing_with_the_command_runs_it_unchanged(reporter, case_profile) -> None:
    profile = case_profile("vllm-custom-off")
    child, out, err = _exec_vllm(profile, reporter, "--tp", "2", cmd=("-tp", "4"))
    assert child.returncode == 0, err
    assert "FALLBACK" in err and "disagrees with the command's TP size 4" in err
    assert (
        json.loads(out)["argv"] == ["-tp", "4"]
        and "VLLM_ALLREDUCE_USE_FLASHINFER" not in json.loads(out)["env"]
    )
    child, out, err = _exec_vllm(profile, reporter, "--tp", "2", "--fallback", "nccl", cmd=("-tp", "4"))
    assert child.returncode == 0, err
    assert (
        json.loads(out)["env"]["VLLM_ALLREDUCE_USE_FLASHINFER"]
        == dict(vllm.FORCE_NCCL.env)["VLLM_ALLREDUCE_USE_FLASHINFER"]
    )


def test_tp_disagreement_under_strict_exits_before_the_launcher(reporter, case_profile) -> None:
    child, out, err = _exec_vllm(
        case_profile("vllm-custom-off"), reporter, "--tp", "2", "--strict", cmd=("--tensor-parallel-size=4",)
    )
    assert child.returncode == 1 and out == ""
    assert err.startswith("topo-gate: error:") and "disagrees" in err


def test_no_tp_anywhere_is_a_usage_error(reporter, case_profile) -> None:
    child, out, err = _exec_vllm(case_profile("vllm-custom-off"), reporter)
    assert child.returncode == 2 and out == ""
    assert "names no TP size" in err


def test_unknown_model_is_a_usage_error(reporter, case_profile) -> None:
    child, out, err = topo_gate_exec(
        "--profile", str(case_profile("vllm-custom-off")), "--launcher", "vllm", "--model", "no-such-model",
        "--node-fingerprint", FINGERPRINT, "--", sys.executable, reporter, "-tp", "2",
    )  # fmt: skip
    assert child.returncode == 2 and "no-such-model" in err


@pytest.mark.parametrize(("workload", "code"), [("chat", 2), ("/nonexistent/w.yaml", 3)])
def test_an_unusable_workload_exits_before_the_launcher(
    reporter, case_profile, workload: str, code: int
) -> None:
    child, out, err = _exec_vllm(
        case_profile("vllm-custom-off"), reporter, "--workload", workload, cmd=("-tp", "2")
    )
    assert child.returncode == code and out == "" and err.startswith("topo-gate: error: --workload:")


def _exec_trtllm(profile: Path, program: str, tmp_path: Path) -> tuple[subprocess.Popen, str, str]:
    # TMPDIR: where the TensorRT-LLM options file would go, so the test sees whatever is left behind.
    env = clean_env(TMPDIR=str(tmp_path / "tmp"), **BY_NAME["trtllm-nccl"].user_env)
    (tmp_path / "tmp").mkdir()
    args = ("--profile", str(profile), "--tp", "2", "--launcher", "trtllm", "--model", "llama-3.1-70b")
    return topo_gate_exec(*args, "--node-fingerprint", FINGERPRINT, "--", program, "serve", env=env)


def test_command_not_found_exits_127_and_leaves_nothing(case_profile, tmp_path) -> None:
    child, out, err = _exec_trtllm(case_profile("trtllm-nccl"), "no-such-launcher-anywhere", tmp_path)
    assert child.returncode == 127 and out == ""
    assert err == "topo-gate: error: cannot run 'no-such-launcher-anywhere': command not found\n"
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_file_without_the_execute_bit_exits_126(case_profile, tmp_path) -> None:
    program = tmp_path / "launcher"
    program.write_text("#!/bin/sh\necho never\n")
    program.chmod(0o644)
    child, out, err = _exec_trtllm(case_profile("trtllm-nccl"), str(program), tmp_path)
    assert child.returncode == 126 and out == ""
    assert err == f"topo-gate: error: cannot run '{program}': {program} is not an executable file\n"
    assert list((tmp_path / "tmp").iterdir()) == []


def test_an_executable_the_kernel_cannot_run_exits_126_and_its_options_file_is_removed(
    case_profile, tmp_path
) -> None:
    program = tmp_path / "launcher"
    program.write_bytes(b"\x00\x01 not a program the kernel knows\n")  # no #!, no ELF header
    program.chmod(0o755)
    child, out, err = _exec_trtllm(case_profile("trtllm-nccl"), str(program), tmp_path)
    assert child.returncode == 126 and out == ""
    assert f"topo-gate: + --extra_llm_api_options {tmp_path / 'tmp'}" in err
    assert err.splitlines()[-1] == f"topo-gate: error: cannot run '{program}': Exec format error"
    assert list((tmp_path / "tmp").iterdir()) == []  # the options file was written, then removed


@pytest.mark.parametrize(
    "spelled",
    [
        ("--tensor-parallel", "4"),
        ("--tensor_parallel_size", "4"),
        ("-tp=4",),
        ("--tensor_parallel_size=4",),
        ("--tensor-parallel-size=4",),
    ],
)
def test_a_tp4_launch_never_gets_the_tp2_plan(reporter, case_profile, spelled) -> None:
    # The command's TP size as vLLM reads it (abbreviated, underscored, =, both): 4, so --tp 2 disagrees.
    child, out, err = _exec_vllm(case_profile("vllm-custom-off"), reporter, "--tp", "2", cmd=spelled)
    assert child.returncode == 0, err
    assert "FALLBACK" in err and "disagrees with the command's TP size 4" in err
    assert json.loads(out)["argv"] == list(spelled)


#: The user's own fusion pass off, in the spellings vLLM reads: --name=value with _ or - in the name.
FUSION_OFF = '{"pass_config": {"fuse_allreduce_rms": false}}'


@pytest.mark.parametrize("dash", ["_", "-"], ids=["underscores", "dashes"])
def test_the_tp_size_and_compilation_config_in_name_equals_value_form_are_the_users(
    reporter, case_profile, dash: str
) -> None:
    """vLLM reads ``--tensor_parallel_size=2`` and ``--compilation_config={...}`` as their dashed
    spellings: exec plans for TP 2 without --tp, and prices the default with the user's fusion pass
    off, which is the plan here already: nothing added. Without the user's config the plan adds it."""
    tp, config = f"--tensor{dash}parallel{dash}size=2", f"--compilation{dash}config={FUSION_OFF}"
    case = BY_NAME["vllm-fusion-off"]
    args = ("--profile", str(case_profile(case.name)), "--launcher", "vllm", "--model", case.model)
    node = ("--node-fingerprint", FINGERPRINT)
    env = clean_env(**case.user_env)
    child, out, err = topo_gate_exec(*args, *node, "--", sys.executable, reporter, tp, config, env=env)
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == [tp, config] and added(err) == []
    assert "following the profile" in err and "no knobs: nothing measured beats the launcher's default" in err
    child, out, err = topo_gate_exec(*args, *node, "--", sys.executable, reporter, tp, env=env)
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == [tp, *case.args] and ": est. -" in err


def test_an_ambiguous_flag_in_cmd_is_a_usage_error(reporter, case_profile) -> None:
    child, out, err = _exec_vllm(case_profile("vllm-custom-off"), reporter, "--tp", "2", cmd=("--disable-c",))
    assert child.returncode == 2 and out == ""
    assert (
        err.startswith("topo-gate: error: vllm would refuse CMD: ambiguous option") and err.count("\n") == 1
    )


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_options_file_that_is_no_regular_file_exits_3(reporter, case_profile, tmp_path, kind) -> None:
    path = tmp_path / "options.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    child, out, err = exec_case(
        "trtllm-nccl", case_profile, reporter, cmd=("--extra_llm_api_options", str(path))
    )
    assert child.returncode == 3 and out == ""
    assert err == f"topo-gate: error: {path}: is not a regular file, not a TensorRT-LLM options file\n"


def test_a_strategy_in_the_users_options_file_is_theirs(reporter, case_profile, tmp_path) -> None:
    # The user's own allreduce_strategy (here through trtllm-serve's --config alias) is priced as the
    # default and kept: no options file is written over it.
    user_options = tmp_path / "mine.yaml"
    user_options.write_text("allreduce_strategy: ONESHOT\n")
    child, out, err = exec_case("trtllm-nccl", case_profile, reporter, cmd=(f"--config={user_options}",))
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == [f"--config={user_options}"]
    assert added(err) == [] and "no knobs" in err


def test_a_planned_options_file_replaces_the_config_alias_in_place(reporter, case_profile, tmp_path) -> None:
    user_options = tmp_path / "mine.yaml"
    user_options.write_text("max_batch_size: 8\n")
    child, out, err = exec_case("trtllm-nccl", case_profile, reporter, cmd=(f"--config={user_options}",))
    assert child.returncode == 0, err
    argv = json.loads(out)["argv"]
    assert "--extra_llm_api_options" not in argv and len(argv) == 1 and argv[0].startswith("--config=")
    written = Path(argv[0].partition("=")[2])
    assert written != user_options
    assert yaml.safe_load(written.read_text()) == {"max_batch_size": 8, "allreduce_strategy": "NCCL"}


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
