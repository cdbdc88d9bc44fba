"""The plugins inside the real SGLang 0.5.23 and vLLM 0.33.0 (installed without their dependencies by
scripts/launcher_parsers.sh; skipped where they are not installed).

Each launcher runs in a fresh interpreter, as a launcher process would: plugins load once per process.
The served model is a local Hugging Face config directory, so nothing is fetched. The profiles are
the knob cases' (tests/launchers/knob_cases.py): nodes whose plans carry knobs, priced against each
launcher's default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
from knob_cases import BY_NAME
from priced_profiles import FINGERPRINT

from topo_gate.launchers import PLANNERS, PlanRequest, sglang, vllm
from topo_gate.plugins import FALLBACK_ENV, PROFILE_ENV
from topo_gate.profile import load_profile
from topo_gate.profile.reader import FINGERPRINT_ENV

# Importing a real launcher sets variables of its own: put the environment back after each test.
pytestmark = pytest.mark.usefixtures("restore_environment")

ROOT = Path(__file__).resolve().parents[2]
#: Variables a plan, the plugins or the user's launcher settings may set: never inherited by a launch.
LAUNCH_ENV_PREFIXES = ("SGLANG_", "VLLM_", "TLLM_", "TOPO_GATE_")
SERVED_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 7168,
    "intermediate_size": 14336,
    "num_attention_heads": 56,
    "num_key_value_heads": 8,
    "num_hidden_layers": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


@pytest.fixture
def served_model(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(SERVED_CONFIG))
    return tmp_path


def launch(
    code: str, scenarios: list[dict], profile: Path, *, metadata_first: Path | None = None
) -> tuple[list[dict], list[str]]:
    """Run ``code`` in one fresh interpreter, a launcher process: the plugins load once per process.

    ``code`` defines ``scenario(user_args) -> dict``; each scenario starts from the same environment
    plus its own ``env`` (so what one applied does not leak into the next). Returns one result per
    scenario and the stderr lines of each. ``metadata_first``: a folder put first on the path, whose
    distribution metadata then stands for what is installed.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_ENV_PREFIXES)}
    if metadata_first is not None:
        base["PYTHONPATH"] = os.pathsep.join(filter(None, (str(metadata_first), base.get("PYTHONPATH"))))
    driver = (
        code
        + "\nimport json, os, sys\nstart = dict(os.environ)\nresults = []\n"
        + "for case in json.loads(sys.argv[1]):\n"
        + "    os.environ.clear(); os.environ.update(start); os.environ.update(case['env'])\n"
        + "    print('--- scenario', file=sys.stderr, flush=True)\n"
        + "    results.append(scenario(case['user_args']))\n"
        + "print(json.dumps(results))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", driver, json.dumps(scenarios)],
        # The profile is set from the start: both launchers load plugins before any scenario runs.
        env={**base, "VLLM_TARGET_DEVICE": "cpu", PROFILE_ENV: str(profile)},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stderr = done.stderr.split("--- scenario\n")[1:]
    return json.loads(done.stdout.strip().splitlines()[-1]), [part.splitlines() for part in stderr]


def plugin_lines(stderr: list[str], launcher: str) -> list[str]:
    return [line for line in stderr if line.startswith(f"topo-gate: {launcher} plugin:")]


@pytest.mark.parametrize(
    ("group", "module", "allowlist"),
    [
        ("vllm.general_plugins", "vllm.plugins", "VLLM_PLUGINS"),
        ("sglang.srt.plugins", "sglang.srt.plugins", "SGLANG_PLUGINS"),
    ],
)
def test_each_launcher_discovers_the_plugin_and_its_allowlist_turns_it_off(
    group: str, module: str, allowlist: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Discovery only loads the entry point (imports topo_gate.plugins.*); nothing runs or is patched.
    load_plugins_by_group = pytest.importorskip(module).load_plugins_by_group
    monkeypatch.delenv(allowlist, raising=False)
    found = load_plugins_by_group(group)
    plugin = found["topo_gate"]
    plugin = plugin[0] if isinstance(plugin, tuple) else plugin  # SGLang: (function, distribution)
    assert plugin is import_module(f"topo_gate.plugins.{group.split('.')[0]}").register
    monkeypatch.setenv(allowlist, "some_other_plugin")
    assert "topo_gate" not in load_plugins_by_group(group)


SGLANG_SERVER = """
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.environ import envs

def scenario(user_args):
    args = prepare_server_args(["--model-path", MODEL, "--tp-size", "2", *user_args])
    try:
        args.resolve_once()
    except Exception:
        pass  # resolving needs the model's weights and a GPU; the hook ran before it
    fields = ("disable_custom_all_reduce", "enforce_disable_flashinfer_allreduce_fusion",
              "flashinfer_allreduce_fusion_backend", "enable_torch_symm_mem")
    read = ("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "SGLANG_PCIE_IPC_MAX_NUMEL")
    return {"fields": {f: getattr(args, f) for f in fields}, "envs": {n: getattr(envs, n).get() for n in read}}
"""


#: The served model of SERVED_CONFIG, as the plugins read it from the launcher's model config.
SERVED = {"hidden": 7168, "layers": 2, "architecture": "LlamaForCausalLM"}


def expected_plan(name: str, profile: Path, **user):
    """The plan ``topo-gate exec`` would apply for the knob case on its node, for SERVED_CONFIG."""
    case = BY_NAME[name]
    request = PlanRequest(
        str(profile), tp=2, fingerprint=FINGERPRINT, **SERVED, user_env=dict(case.user_env), **user
    )
    plan = PLANNERS[case.launcher](request)
    assert not plan.fallback and (plan.args or plan.env), "the control: the plan has knobs"
    return plan


def test_sglang_hook_applies_the_plan_to_a_real_server_args(served_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("sglang.srt.server_args")
    fusing = BY_NAME["sglang-fusion-on"].write(tmp_path / "fusing.yaml")  # a flag with a value
    pcie = BY_NAME["sglang-pcie-ipc"].write(tmp_path / "pcie.yaml")  # a flag and env
    node = {FINGERPRINT_ENV: FINGERPRINT}
    scenarios = [
        {"env": node, "user_args": []},
        {"env": {**node, PROFILE_ENV: str(pcie)}, "user_args": []},
        # The user's own --disable-custom-all-reduce: priced as the default; PCIe IPC still pays.
        {"env": {**node, PROFILE_ENV: str(pcie)}, "user_args": ["--disable-custom-all-reduce"]},
        # An unverified node (no NVML here, no fingerprint) where the user asked for torch symm-mem:
        # nothing changed; then the same under TOPO_GATE_FALLBACK=nccl; then a misspelt mode.
        {"env": {}, "user_args": ["--enable-torch-symm-mem"]},
        {"env": {FALLBACK_ENV: "nccl"}, "user_args": ["--enable-torch-symm-mem"]},
        {"env": {**node, FALLBACK_ENV: "ncl"}, "user_args": []},
        # SGLang's own placeholder record (model "dummy") launches nothing: left alone.
        {"env": node, "user_args": ["--model-path", "dummy"]},
    ]
    results, errs = launch(f"MODEL = {str(served_model)!r}\n" + SGLANG_SERVER, scenarios, fusing)
    followed, with_env, users_own, unverified, forced, misspelt, untouched = results

    fusion_plan = expected_plan("sglang-fusion-on", fusing)
    assert fusion_plan.args == ("--flashinfer-allreduce-fusion-backend", "trtllm")
    assert followed == {
        "fields": {**DEFAULT_FIELDS, "flashinfer_allreduce_fusion_backend": "trtllm"},
        "envs": DEFAULT_ENVS,
    }
    (line,) = plugin_lines(errs[0], "sglang")
    assert f"profile {load_profile(fusing).digest}: following the profile" in line
    assert "applied --flashinfer-allreduce-fusion-backend trtllm" in line and fusion_plan.estimate in line

    pcie_plan = expected_plan("sglang-pcie-ipc", pcie)
    assert with_env == {
        "fields": {**DEFAULT_FIELDS, "disable_custom_all_reduce": True},
        "envs": {**DEFAULT_ENVS, "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": True,
                 "SGLANG_PCIE_IPC_MAX_NUMEL": int(pcie_plan.env["SGLANG_PCIE_IPC_MAX_NUMEL"])},
    }  # fmt: skip
    assert users_own == with_env  # the same launch; the custom all-reduce switch is the user's
    (line,) = plugin_lines(errs[2], "sglang")
    assert "--disable-custom-all-reduce" not in line.partition("applied ")[2].split(";")[0]

    assert unverified == {"fields": {**DEFAULT_FIELDS, "enable_torch_symm_mem": True}, "envs": DEFAULT_ENVS}
    (line,) = plugin_lines(errs[3], "sglang")
    assert "nothing changed (node not checked" in line
    assert dict(sglang.FORCE_NCCL.env) == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}
    assert forced == {
        "fields": {
            "disable_custom_all_reduce": True,
            "enforce_disable_flashinfer_allreduce_fusion": True,
            "flashinfer_allreduce_fusion_backend": None,
            "enable_torch_symm_mem": True,  # the user's, kept
        },
        "envs": DEFAULT_ENVS,  # PCIe IPC: off by default, set off
    }
    (line,) = plugin_lines(errs[4], "sglang")
    assert "NCCL forced (node not checked" in line
    assert misspelt == {"fields": DEFAULT_FIELDS, "envs": DEFAULT_ENVS}
    (line,) = plugin_lines(errs[5], "sglang")
    assert "nothing changed (" in line and f"{FALLBACK_ENV}='ncl' is not one of" in line

    assert untouched == {"fields": DEFAULT_FIELDS, "envs": DEFAULT_ENVS}
    assert plugin_lines(errs[6], "sglang") == []


#: SGLang 0.5.23's own defaults of what SGLANG_SERVER reads.
DEFAULT_FIELDS = {
    "disable_custom_all_reduce": False,
    "enforce_disable_flashinfer_allreduce_fusion": False,
    "flashinfer_allreduce_fusion_backend": None,
    "enable_torch_symm_mem": False,
}
DEFAULT_ENVS = {
    "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": True,
    "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": False,
    "SGLANG_PCIE_IPC_MAX_NUMEL": 0,
}


VLLM_SERVER = """
import vllm.envs as envs
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())  # loads the general plugins, as `vllm serve`

def scenario(user_args):
    engine_args = EngineArgs.from_cli_args(parser.parse_args(["--model", MODEL, "-tp", "2", *user_args]))
    config = engine_args.create_engine_config()
    passes = config.compilation_config.pass_config
    read = ("VLLM_ALLREDUCE_USE_FLASHINFER", "VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
            "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC")
    return {"tp": config.parallel_config.tensor_parallel_size,
            # EngineArgs, not the built config: vLLM's CPU platform turns custom all-reduce off by itself.
            "disable_custom_all_reduce": engine_args.disable_custom_all_reduce,
            "fuse_allreduce_rms": passes.fuse_allreduce_rms,
            "fi_allreduce_fusion_max_size_mb": passes.fi_allreduce_fusion_max_size_mb,
            "envs": {n: getattr(envs, n) for n in read}}
"""


def test_vllm_engine_config_and_envs_follow_the_plan(served_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm.engine.arg_utils")
    fusing = BY_NAME["vllm-fusion-size"].write(tmp_path / "fusing.yaml")
    slow_flashinfer = BY_NAME["vllm-flashinfer-off"].write(tmp_path / "slow-flashinfer.yaml")
    node = {FINGERPRINT_ENV: FINGERPRINT}
    scenarios = [
        {"env": node, "user_args": []},
        # The user's FlashInfer backend trtllm and --enforce-eager: their kernels lose to NCCL here.
        {"env": {**node, PROFILE_ENV: str(slow_flashinfer), **BY_NAME["vllm-flashinfer-off"].user_env},
         "user_args": ["--enforce-eager"]},
        {"env": {}, "user_args": []},
        {"env": {FALLBACK_ENV: "nccl"}, "user_args": []},
        {"env": {PROFILE_ENV: ""}, "user_args": []},
    ]  # fmt: skip
    (followed, flashinfer_off, unverified, forced, alone), errs = launch(
        f"MODEL = {str(served_model)!r}\n" + VLLM_SERVER, scenarios, fusing
    )
    plan = expected_plan("vllm-fusion-size", fusing)
    pass_config = json.loads(plan.args[plan.args.index("--compilation-config") + 1])["pass_config"]
    assert pass_config == {"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": 0.21875}
    assert followed == {
        "tp": 2,
        "disable_custom_all_reduce": False,
        "fuse_allreduce_rms": True,
        "fi_allreduce_fusion_max_size_mb": 0.21875,
        "envs": VLLM_DEFAULT_ENVS,
    }
    (line,) = plugin_lines(errs[0], "vllm")
    assert f"profile {load_profile(fusing).digest}: following the profile" in line and plan.estimate in line

    off = expected_plan("vllm-flashinfer-off", slow_flashinfer, user_args=("--enforce-eager",))
    assert dict(off.env) == {"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}
    assert flashinfer_off["envs"] == {
        **VLLM_DEFAULT_ENVS,
        "VLLM_ALLREDUCE_USE_FLASHINFER": False,
        "VLLM_ALLREDUCE_USE_SYMM_MEM": False,
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",  # the user's
    }
    (line,) = plugin_lines(errs[1], "vllm")
    assert "applied VLLM_ALLREDUCE_USE_FLASHINFER=0 VLLM_ALLREDUCE_USE_SYMM_MEM=0" in line

    assert {k: unverified[k] for k in ("disable_custom_all_reduce", "envs")} == {
        "disable_custom_all_reduce": False,
        "envs": VLLM_DEFAULT_ENVS,
    }
    (line,) = plugin_lines(errs[2], "vllm")
    assert "nothing changed (node not checked" in line

    assert dict(vllm.FORCE_NCCL.env) == {
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
        "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "0",
        "VLLM_ALLREDUCE_USE_FLASHINFER": "0",
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
    }
    assert forced["disable_custom_all_reduce"] is True and forced["fuse_allreduce_rms"] is False
    assert forced["envs"] == {
        "VLLM_ALLREDUCE_USE_FLASHINFER": False,
        "VLLM_ALLREDUCE_USE_SYMM_MEM": False,
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
        "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": False,
    }
    (line,) = plugin_lines(errs[3], "vllm")
    assert "NCCL forced" in line

    # TOPO_GATE_PROFILE emptied: vLLM's own defaults, and no line.
    assert alone["disable_custom_all_reduce"] is False and alone["envs"] == VLLM_DEFAULT_ENVS
    assert plugin_lines(errs[4], "vllm") == []


#: vLLM 0.33.0's own defaults of the variables VLLM_SERVER reads.
VLLM_DEFAULT_ENVS = {
    "VLLM_ALLREDUCE_USE_FLASHINFER": True,
    "VLLM_ALLREDUCE_USE_SYMM_MEM": True,
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "auto",
    "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": False,
}


#: What the vLLM plugin set on ``EngineArgs`` (its hook runs before ``VllmConfig`` is built). vLLM 0.34.0's
#: CPU platform refuses to build a ``VllmConfig`` without triton-cpu (``platforms/cpu.py:242``), which no
#: registry here serves: the hook has done its work by then, so the fields are read from ``EngineArgs``.
VLLM_HOOK = """
import vllm.envs as envs
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())  # loads the general plugins, as `vllm serve`

def scenario(user_args):
    engine_args = EngineArgs.from_cli_args(parser.parse_args(["--model", MODEL, "-tp", "2", *user_args]))
    try:
        engine_args.create_engine_config()
    except RuntimeError as error:
        if "requires Triton" not in str(error):
            raise
    passes = engine_args.compilation_config.pass_config
    return {"fuse_allreduce_rms": passes.fuse_allreduce_rms,
            "fi_allreduce_fusion_max_size_mb": passes.fi_allreduce_fusion_max_size_mb,
            "envs": {n: getattr(envs, n) for n in ("VLLM_ALLREDUCE_USE_FLASHINFER", "VLLM_ALLREDUCE_USE_SYMM_MEM",
                                                  "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
                                                  "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC")}}
"""


def stand_in_distribution(folder: Path, name: str, version: str) -> Path:
    """A ``<name>-<version>.dist-info`` in ``folder``: what the metadata of an installed release says."""
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    return folder


def test_the_vllm_plugin_plans_for_the_installed_release(served_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm.engine.arg_utils")
    from importlib.metadata import version

    from topo_gate.launchers import knobs

    installed = version("vllm")
    assert installed in knobs.releases_of("vllm"), f"vLLM {installed} here has no route model"
    fusing = BY_NAME["vllm-fusion-size"].write(tmp_path / "fusing.yaml")
    node = {FINGERPRINT_ENV: FINGERPRINT}
    (followed,), errs = launch(
        f"MODEL = {str(served_model)!r}\n" + VLLM_HOOK, [{"env": node, "user_args": []}], fusing
    )
    (line,) = plugin_lines(errs[0], "vllm")
    assert line.startswith(f"topo-gate: vllm plugin: vLLM {installed}: profile ")
    assert "following the profile" in line and followed["fuse_allreduce_rms"] is True


def test_the_vllm_plugin_changes_nothing_for_a_release_it_does_not_model(
    served_model: Path, tmp_path: Path
) -> None:
    pytest.importorskip("vllm.engine.arg_utils")
    from topo_gate.launchers import knobs

    fusing = BY_NAME["vllm-fusion-size"].write(tmp_path / "fusing.yaml")
    node = {FINGERPRINT_ENV: FINGERPRINT}
    scenarios = [
        {"env": node, "user_args": []},
        {"env": {**node, "TOPO_GATE_ALLOW_RELEASE": "0.35.0"}, "user_args": []},
    ]
    (refused, allowed), errs = launch(
        f"MODEL = {str(served_model)!r}\n" + VLLM_HOOK,
        scenarios,
        fusing,
        metadata_first=stand_in_distribution(tmp_path / "stand-in", "vllm", "0.35.0"),
    )
    newest = knobs.PINNED["vllm"]
    # EngineArgs as parsed, where the plan would set both.
    assert (refused["fuse_allreduce_rms"], refused["fi_allreduce_fusion_max_size_mb"]) == (None, None)
    assert refused["envs"] == VLLM_DEFAULT_ENVS
    (line,) = plugin_lines(errs[0], "vllm")
    assert line.startswith(f"topo-gate: vllm plugin: vLLM {newest} (installed: 0.35.0): profile ")
    assert "nothing changed (vLLM 0.35.0 installed; topo-gate " in line
    assert f"TOPO_GATE_ALLOW_RELEASE=0.35.0 to plan with the {newest} model at your own risk" in line
    assert allowed["fuse_allreduce_rms"] is True
    (line,) = plugin_lines(errs[1], "vllm")
    assert "following the profile" in line
