"""``topo-gate exec`` plans for what CMD really runs: the launcher release CMD's own interpreter has
installed (a real venv with real distribution metadata, its console script on PATH) and the model CMD
serves (a preset, or a local folder's config.json), as the README's commands write them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from knob_cases import BY_NAME
from priced_profiles import FINGERPRINT
from stand_in_launcher import launcher_venv
from test_exec_cli import added, clean_env, topo_gate_exec

from topo_gate.launchers import knobs
from topo_gate.launchers.command.releases import modelled_words
from topo_gate.profile import load_profile

pytestmark = pytest.mark.slow

CASE = "vllm-flashinfer-off"  # vLLM at TP2, eager: the plan switches FlashInfer (and symm-mem) off
EAGER = "--enforce-eager"
MODELLED = {"vllm": "0.33.0", "flashinfer-python": "0.7.2.post1", "sglang": "0.5.23"}
#: The release an unmodelled one is named against, and every modelled one in words.
NEWEST = knobs.PINNED["vllm"]
LISTED = modelled_words("vllm")
PLAN_ENV = {"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    return BY_NAME[CASE].write(tmp_path / f"{CASE}.yaml")


def exec_vllm(
    tmp_path: Path, profile: Path, versions: dict[str, str], *exec_args: str, cmd=(), **env: str
) -> tuple[int, dict | None, str]:
    """``topo-gate exec ... -- vllm serve ...`` with ``vllm`` a console script of a venv holding
    ``versions``, first on CMD's PATH; (exit code, what the stand-in launcher saw, stderr)."""
    bin_folder = launcher_venv(tmp_path / "venv", versions)
    environ = clean_env(**BY_NAME[CASE].user_env, **env)
    environ["PATH"] = os.pathsep.join([str(bin_folder), environ.get("PATH", "")])
    argv = ("--profile", str(profile), "--node-fingerprint", FINGERPRINT, *exec_args)
    child, out, err = topo_gate_exec(
        *argv, "--", "vllm", "serve", *(cmd or ("M", "-tp", "2")), EAGER, env=environ
    )
    return child.returncode, json.loads(out) if out else None, err


def estimate(err: str) -> str:
    """exec's one-line price of the plan: per step, for the served model's layers and sizes."""
    (line,) = [
        line
        for line in err.splitlines()
        if line.startswith(("topo-gate: est. ", "topo-gate: no knobs", "topo-gate: plan: "))
    ]
    return line


def test_a_release_with_no_route_model_changes_nothing_and_says_both(tmp_path, profile) -> None:
    code, seen, err = exec_vllm(tmp_path, profile, {**MODELLED, "vllm": "0.35.0"}, "--model", "llama-3-70b")
    assert code == 0, err
    assert seen is not None and seen["argv"] == ["serve", "M", "-tp", "2", EAGER]
    assert not any(name.startswith("VLLM_ALLREDUCE") for name in seen["env"]) and added(err) == []
    (line,) = [line for line in err.splitlines() if "0.35.0" in line]  # one line says why
    assert line.startswith(f"topo-gate: vLLM {NEWEST} (installed: 0.35.0): FALLBACK vLLM 0.35.0 installed;")
    assert f"models vLLM {LISTED}: upgrade topo-gate" in line and "TOPO_GATE_ALLOW_RELEASE=0.35.0" in line


def test_strict_exits_7_without_running_cmd(tmp_path, profile) -> None:
    code, seen, err = exec_vllm(
        tmp_path, profile, {**MODELLED, "vllm": "0.35.0"}, "--model", "llama-3-70b", "--strict"
    )
    assert code == 7 and seen is None
    assert err.startswith("topo-gate: error: CMD not run: vLLM 0.35.0 installed;") and err.count("\n") == 1


def test_strict_exits_7_when_the_release_cannot_be_read(tmp_path, profile) -> None:
    wrapper = tmp_path / "bin" / "vllm"
    wrapper.parent.mkdir()
    wrapper.write_text("#!/bin/sh\nexit 0\n")
    wrapper.chmod(0o755)
    environ = clean_env(PATH=os.pathsep.join([str(wrapper.parent), os.environ["PATH"]]))
    argv = (
        "--profile",
        str(profile),
        "--node-fingerprint",
        FINGERPRINT,
        "--model",
        "llama-3-70b",
        "--strict",
    )
    child, out, err = topo_gate_exec(*argv, "--", "vllm", "serve", "M", "-tp", "2", env=environ)
    assert child.returncode == 7 and out == ""
    assert "could not be read" in err and "runs on sh, not Python: a wrapper script" in err


def test_the_modelled_release_plans(tmp_path, profile) -> None:
    code, seen, err = exec_vllm(
        tmp_path, profile, {**MODELLED, "vllm": "0.33.0+cu129"}, "--model", "llama-3-70b"
    )
    assert code == 0, err
    assert seen is not None and PLAN_ENV.items() <= seen["env"].items()
    assert "topo-gate: vLLM 0.33.0: following the profile" in err and "warning" not in err


def test_the_override_plans_at_your_own_risk_with_a_warning(tmp_path, profile) -> None:
    code, seen, err = exec_vllm(
        tmp_path, profile, {**MODELLED, "vllm": "0.35.0"}, "--model", "llama-3-70b",
        TOPO_GATE_ALLOW_RELEASE="0.35.0",
    )  # fmt: skip
    assert code == 0, err
    assert seen is not None and PLAN_ENV.items() <= seen["env"].items()
    assert f"topo-gate: vLLM {NEWEST} (installed: 0.35.0): following the profile" in err
    assert (
        f"topo-gate: warning: TOPO_GATE_ALLOW_RELEASE: vLLM 0.35.0 planned with the {NEWEST} model at your own risk"
        in err
    )


def test_the_readmes_command_plans_the_model_it_serves(tmp_path, profile) -> None:
    # README: topo-gate exec --profile node.yaml --tp N -- vllm serve meta-llama/Llama-3.1-70B-Instruct -tp N
    cmd = ("meta-llama/Llama-3.1-70B-Instruct", "-tp", "2")
    code, from_cmd, err = exec_vllm(tmp_path / "a", profile, MODELLED, "--tp", "2", cmd=cmd)
    assert code == 0, err
    assert (
        "topo-gate: served model meta-llama/Llama-3.1-70B-Instruct (preset llama-3-70b), read from CMD" in err
    )
    assert "warning" not in err
    code, named, named_err = exec_vllm(
        tmp_path / "b", profile, MODELLED, "--tp", "2", "--model", "llama-3-70b", cmd=cmd
    )
    assert from_cmd is not None and named is not None
    assert (from_cmd["argv"], from_cmd["env"]) == (named["argv"], named["env"])
    assert estimate(err) == estimate(named_err) and "80 layers" in estimate(err)


def test_a_local_model_folder_is_planned_from_its_config_json(tmp_path, profile) -> None:
    folder = tmp_path / "llama-finetune"
    folder.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "num_hidden_layers": 80}
    (folder / "config.json").write_text(json.dumps(config))
    code, seen, err = exec_vllm(tmp_path / "a", profile, MODELLED, cmd=(str(folder), "-tp", "2"))
    assert code == 0, err
    assert f"({folder / 'config.json'}: hidden 8192, 80 layers, LlamaForCausalLM), read from CMD" in err
    _, named, named_err = exec_vllm(
        tmp_path / "b", profile, MODELLED, "--model", "llama-3-70b", cmd=(str(folder), "-tp", "2")
    )
    assert seen is not None and named is not None and seen["env"] == named["env"]
    assert estimate(err) == estimate(named_err) and "80 layers" in estimate(err)


def test_a_model_that_cannot_be_told_warns_and_plans_for_the_profiles_hidden_size(tmp_path, profile) -> None:
    code, seen, err = exec_vllm(tmp_path / "a", profile, MODELLED, cmd=("acme/house-model", "-tp", "2"))
    assert code == 0, err
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert warning == (
        "topo-gate: warning: the served model 'acme/house-model' is no preset and no local folder with a "
        "config.json: the launchers' token limits are converted with the profile's hidden size, and the plan "
        "can differ for the model you serve (pass --model NAME or --hidden N)"
    )
    hidden = str(load_profile(profile).trials.hidden)
    _, unnamed, unnamed_err = exec_vllm(
        tmp_path / "b", profile, MODELLED, "--hidden", hidden, cmd=("acme/house-model", "-tp", "2")
    )
    assert seen is not None and unnamed is not None and seen["env"] == unnamed["env"]
    assert estimate(err) == estimate(unnamed_err)


def test_sglang_python_dash_m_reads_the_release_from_that_python(tmp_path) -> None:
    # README: topo-gate exec --profile node.yaml --tp 4 -- python -m sglang.launch_server --model-path M --tp 4
    profile = BY_NAME["sglang-custom-off"].write(tmp_path / "sglang.yaml")
    bin_folder = launcher_venv(
        tmp_path / "venv", {**MODELLED, "sglang": "0.5.24"}, scripts=(), modules=("sglang.launch_server",)
    )
    argv = ("--profile", str(profile), "--node-fingerprint", FINGERPRINT, "--tp", "2")
    cmd = (str(bin_folder / "python"), "-m", "sglang.launch_server", "--model-path", "M", "--tp", "2")
    child, out, err = topo_gate_exec(*argv, "--", *cmd)
    assert child.returncode == 0, err
    assert json.loads(out)["argv"] == ["--model-path", "M", "--tp", "2"]  # unchanged
    assert "topo-gate: SGLang 0.5.23 (installed: 0.5.24): FALLBACK SGLang 0.5.24 installed;" in err
    # The model M cannot be told, but nothing was planned: no warning about it.
    assert "warning" not in err


def test_trtllm_serve_readme_command(tmp_path) -> None:
    # README: topo-gate exec --profile node.yaml --tp 8 -- trtllm-serve M --tp_size 8 (here TP2)
    profile = BY_NAME["trtllm-twoshot"].write(tmp_path / "trtllm.yaml")
    bin_folder = launcher_venv(tmp_path / "venv", {}, scripts=("trtllm-serve",))
    environ = clean_env(**BY_NAME["trtllm-twoshot"].user_env)
    environ["PATH"] = os.pathsep.join([str(bin_folder), environ["PATH"]])
    argv = ("--profile", str(profile), "--node-fingerprint", FINGERPRINT, "--tp", "2")
    child, out, err = topo_gate_exec(
        *argv, "--", "trtllm-serve", "Qwen/Qwen3-32B", "--tp_size", "2", env=environ
    )
    assert child.returncode == 0, err
    assert "topo-gate: served model Qwen/Qwen3-32B (preset qwen3-32b), read from CMD" in err
    # No tensorrt_llm in that interpreter: planned with the modelled release, with a warning.
    assert "warning: TensorRT-LLM is not installed in the interpreter of" in err
    assert json.loads(out)["argv"][:3] == ["Qwen/Qwen3-32B", "--tp_size", "2"]


def test_a_flag_the_modelled_parser_does_not_know_names_both_releases(tmp_path, profile) -> None:
    versions = {**MODELLED, "vllm": "0.35.0"}
    _, seen, err = exec_vllm(
        tmp_path, profile, versions, "--model", "llama-3-70b", cmd=("M", "-tp", "2", "--new-flag")
    )
    assert seen is not None and seen["argv"] == ["serve", "M", "-tp", "2", "--new-flag", EAGER]
    assert (
        f"topo-gate: warning: vLLM {NEWEST} does not recognize --new-flag: that release refuses the command; "
        "the installed vLLM 0.35.0 may know it"
    ) in err


def test_cmd_is_read_with_the_option_table_of_the_release_installed(tmp_path, profile) -> None:
    # --enable-extensible-kv-cache is new in vLLM 0.34.0: 0.33.0's parser refuses it, 0.34.0's reads it.
    cmd = ("M", "-tp", "2", "--enable-extensible-kv-cache")
    for version, refused in (("0.33.0", True), ("0.34.0", False)):
        _, seen, err = exec_vllm(
            tmp_path / version, profile, {**MODELLED, "vllm": version}, "--model", "llama-3-70b", cmd=cmd
        )
        assert seen is not None
        assert ("does not recognize --enable-extensible-kv-cache" in err) is refused, (version, err)
