"""The plugins inside the real SGLang 0.5.23 and vLLM 0.33.0 (installed without their dependencies by
scripts/launcher_parsers.sh; skipped where they are not installed).

Each launcher runs in a fresh interpreter, as a launcher process would: plugins load once per process.
The served model is a local Hugging Face config directory, so nothing is fetched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from topo_gate.launchers import PLANNERS, sglang, vllm
from topo_gate.plugins import APPLIED_ENV, PROFILE_ENV
from topo_gate.profile import load_profile
from topo_gate.profile.reader import FINGERPRINT_ENV

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "h200-x2" / "h7168-run1.yaml"
FINGERPRINT = load_profile(PROFILE).node.fingerprint
# vLLM's route-checked plan on the H200 profile keeps every fast path off (what NCCL forcing does too),
# so the vLLM test follows a profile whose plan turns fusion on (labelled synthetic in the file).
FUSING_PROFILE = ROOT / "profiles" / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml"
FUSING_FINGERPRINT = load_profile(FUSING_PROFILE).node.fingerprint
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


def launch(code: str, scenarios: list[dict], profile: Path = PROFILE) -> tuple[list[dict], list[str]]:
    """Run ``code`` in one fresh interpreter, a launcher process: the plugins load once per process.

    ``code`` defines ``scenario(user_args) -> dict``; each scenario starts from the same environment
    plus its own ``env`` (so what one applied does not leak into the next). Returns one result per
    scenario and the stderr lines of each.
    """
    base = {k: v for k, v in os.environ.items() if k not in (PROFILE_ENV, APPLIED_ENV, FINGERPRINT_ENV)}
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


def test_sglang_hook_applies_the_plan_to_a_real_server_args(served_model: Path) -> None:
    pytest.importorskip("sglang.srt.server_args")
    # The node verified (as exec or the launching process exports it); then an unverified node (no
    # NVML here, no fingerprint) where the user asked for torch symm-mem.
    verified = {"env": {FINGERPRINT_ENV: FINGERPRINT}, "user_args": []}
    unverified = {"env": {}, "user_args": ["--enable-torch-symm-mem"]}
    # SGLang's own placeholder record (model "dummy") launches nothing: left alone.
    placeholder = {"env": {FINGERPRINT_ENV: FINGERPRINT}, "user_args": ["--model-path", "dummy"]}
    (followed, forced, untouched), (followed_err, forced_err, untouched_err) = launch(
        f"MODEL = {str(served_model)!r}\n" + SGLANG_SERVER, [verified, unverified, placeholder]
    )
    plan = PLANNERS["sglang"](str(PROFILE), tp=2, fingerprint=FINGERPRINT, hidden=7168)
    # The control: the profile's plan turns something on that the NCCL-forcing plan keeps off.
    assert not plan.fallback and dict(plan.env) != dict(sglang.FORCE_NCCL.env)
    args = list(plan.args)
    backend_flag = "--flashinfer-allreduce-fusion-backend"
    assert followed["fields"] == {
        "disable_custom_all_reduce": "--disable-custom-all-reduce" in args,
        "enforce_disable_flashinfer_allreduce_fusion": "--enforce-disable-flashinfer-allreduce-fusion"
        in args,
        "flashinfer_allreduce_fusion_backend": args[args.index(backend_flag) + 1]
        if backend_flag in args
        else None,
        "enable_torch_symm_mem": "--enable-torch-symm-mem" in args,
    }
    assert followed["envs"] == {
        "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": plan.env.get("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", "1")
        == "1",
        "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": plan.env["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "1",
        "SGLANG_PCIE_IPC_MAX_NUMEL": int(plan.env.get("SGLANG_PCIE_IPC_MAX_NUMEL", "0")),
    }
    (line,) = plugin_lines(followed_err, "sglang")
    assert f"profile {load_profile(PROFILE).digest}: following the profile" in line

    assert dict(sglang.FORCE_NCCL.env) == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}
    assert forced == {
        "fields": {
            "disable_custom_all_reduce": True,
            "enforce_disable_flashinfer_allreduce_fusion": True,
            "flashinfer_allreduce_fusion_backend": None,
            "enable_torch_symm_mem": True,  # the user's, kept
        },
        "envs": {
            "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": True,  # SGLang's default: the NCCL plan sets no v2 knob
            "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": False,
            "SGLANG_PCIE_IPC_MAX_NUMEL": 0,
        },
    }
    (line,) = plugin_lines(forced_err, "sglang")
    assert "NCCL forced" in line

    assert untouched["fields"]["disable_custom_all_reduce"] is False
    assert untouched["fields"]["flashinfer_allreduce_fusion_backend"] is None
    assert untouched["envs"]["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] is False
    assert plugin_lines(untouched_err, "sglang") == []


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


def test_vllm_engine_config_and_envs_follow_the_plan(served_model: Path) -> None:
    pytest.importorskip("vllm.engine.arg_utils")
    verified = {"env": {FINGERPRINT_ENV: FUSING_FINGERPRINT}, "user_args": []}
    unverified = {"env": {}, "user_args": []}
    unset = {"env": {PROFILE_ENV: ""}, "user_args": []}
    (followed, forced, alone), errs = launch(
        f"MODEL = {str(served_model)!r}\n" + VLLM_SERVER, [verified, unverified, unset], FUSING_PROFILE
    )
    plan = PLANNERS["vllm"](str(FUSING_PROFILE), tp=2, fingerprint=FUSING_FINGERPRINT, hidden=7168)
    pass_config = json.loads(plan.args[plan.args.index("--compilation-config") + 1])["pass_config"]
    assert not plan.fallback and pass_config["fuse_allreduce_rms"] is True  # the control
    assert followed == {
        "tp": 2,
        "disable_custom_all_reduce": "--disable-custom-all-reduce" in plan.args,
        "fuse_allreduce_rms": True,
        "fi_allreduce_fusion_max_size_mb": pass_config["fi_allreduce_fusion_max_size_mb"],
        "envs": {
            "VLLM_ALLREDUCE_USE_FLASHINFER": plan.env["VLLM_ALLREDUCE_USE_FLASHINFER"] == "1",
            "VLLM_ALLREDUCE_USE_SYMM_MEM": plan.env["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "1",
            "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
            "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": False,
        },
    }
    (line,) = plugin_lines(errs[0], "vllm")
    assert f"profile {load_profile(FUSING_PROFILE).digest}: following the profile" in line

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
    (line,) = plugin_lines(errs[1], "vllm")
    assert "NCCL forced" in line

    # TOPO_GATE_PROFILE emptied: vLLM's own defaults, and no line.
    assert alone["disable_custom_all_reduce"] is False
    assert alone["envs"]["VLLM_ALLREDUCE_USE_SYMM_MEM"] is True
    assert plugin_lines(errs[2], "vllm") == []
