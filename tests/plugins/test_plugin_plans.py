"""What the plugins plan and apply, on labelled stand-ins of the launchers' parsed configurations.

A plugin runs after the launcher parsed its command line: it reads the user's own all-reduce settings
back from that configuration (a field that differs from its default is the user's flag), asks the same
planner as ``topo-gate exec`` for the plan priced against the launcher's default with those settings
and the environment, applies it field by field where the user has not decided, and logs one line
with the plan's estimate. This venv has neither launcher, so the configuration objects are stand-ins
with the real field names and defaults of the pinned releases (only the fields the plugins read or
set), and the steps of ``follow_profile`` that need no launcher module are run here in its order:
``_served`` / ``user_args``, ``plan_in_launcher``, the apply step, ``record``. The real launchers run the whole
hook in tests/plugins/test_real_launchers.py (scripts/launcher_parsers.sh).

The stand-ins (``stand_ins.py``) cite the pinned sources for every field; ``LlamaEngineArgs``
adds ``create_model_config()``, the served model's ``ModelConfig`` (here: its hidden size, layer count
and architectures only).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from knob_cases import BY_NAME, KnobCase
from priced_profiles import FINGERPRINT
from stand_ins import (
    StandInCompilationConfig,
    StandInEngineArgs,
    StandInPassConfig,
    StandInServerArgs,
    field_defaults,
    release,
)

from topo_gate.launchers import sglang, vllm
from topo_gate.launchers.command.releases import installed_here
from topo_gate.plugins import (
    APPLIED_ENV,
    FALLBACK_ENV,
    PROFILE_ENV,
    Outcome,
    Served,
    apply_flags,
    export_env,
    plan_in_launcher,
    record,
    user_args,
)
from topo_gate.plugins import vllm as vllm_plugin
from topo_gate.profile.reader import FINGERPRINT_ENV

pytestmark = pytest.mark.slow


OTHER_NODE = "sha256:" + "cd" * 32
#: llama-3.1-70b, the knob cases' served model: what the launcher's model config says of it.
LLAMA = Served(tp=2, hidden=8192, layers=80, architecture="LlamaForCausalLM", user_args=())


@dataclass
class LlamaServerArgs(StandInServerArgs):
    """SGLang's ``ServerArgs`` as parsed for the knob cases' served model."""

    model_path: str = "/models/llama"


@dataclass
class LlamaEngineArgs(StandInEngineArgs):
    """vLLM's ``EngineArgs`` as parsed for the knob cases' served model, with its model config."""

    model: str = "/models/llama"

    def create_model_config(self) -> SimpleNamespace:
        return SimpleNamespace(
            get_hidden_size=lambda: LLAMA.hidden,
            hf_text_config=SimpleNamespace(num_hidden_layers=LLAMA.layers),
            architectures=[LLAMA.architecture],
        )


def sglang_defaults() -> dict[str, object]:
    return field_defaults(LlamaServerArgs)


@pytest.fixture(autouse=True)
def plugin_environment(monkeypatch: pytest.MonkeyPatch):
    """Every variable a plan or the plugins set starts unset, and is unset again after the test."""
    names = {name for case in BY_NAME.values() for name in (*case.env, *case.user_env)}
    names |= {*sglang.FORCE_NCCL.env, *vllm.FORCE_NCCL.env, APPLIED_ENV, FINGERPRINT_ENV, FALLBACK_ENV}
    for name in names:
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch
    # monkeypatch restores only what existed before; what the plugin set on top of nothing goes here.
    for name in names:
        os.environ.pop(name, None)


def follow(case: KnobCase, tmp_path: Path, monkeypatch, *, node: str = FINGERPRINT) -> str:
    """The case's profile as TOPO_GATE_PROFILE, the node verified as ``node``, the user's env set."""
    path = str(case.write(tmp_path / f"{case.name}.yaml"))
    monkeypatch.setenv(PROFILE_ENV, path)
    monkeypatch.setenv(FINGERPRINT_ENV, node)
    for name, value in case.user_env.items():
        monkeypatch.setenv(name, value)
    return path


def sglang_step(server_args: LlamaServerArgs, profile: str, capsys) -> tuple[object, str]:
    """The SGLang hook's steps on a stand-in: read the user's flags, plan, apply, log."""
    served = dataclasses.replace(
        LLAMA, tp=server_args.tp_size, user_args=user_args(server_args, "sglang", sglang_defaults())
    )
    plan, fingerprint = plan_in_launcher("sglang", served=lambda: served, profile=profile)
    unapplied, kept = apply_flags(server_args, "sglang", plan, sglang_defaults())
    assert unapplied == ()
    kept = (*kept, *export_env(plan.env, os.environ))
    record(Outcome("sglang", "sha256:test", plan, (), kept), fingerprint, os.environ)
    (line,) = capsys.readouterr().err.splitlines()
    return plan, line


def vllm_step(engine_args: LlamaEngineArgs, profile: str, capsys) -> tuple[object, str]:
    """The vLLM hook's steps on a stand-in: read the user's settings and the model, plan, apply, log."""
    served = vllm_plugin._served(engine_args)
    plan, fingerprint = plan_in_launcher("vllm", served=lambda: served, profile=profile)
    kept = vllm_plugin._apply(engine_args, plan)
    record(Outcome("vllm", "sha256:test", plan, (), kept), fingerprint, os.environ)
    (line,) = capsys.readouterr().err.splitlines()
    return plan, line


# -- a verified node: the plan exec would apply, applied, and its estimate logged ------------------------


def test_sglang_applies_the_plan_and_logs_its_estimate(tmp_path, plugin_environment, capsys) -> None:
    case = BY_NAME["sglang-custom-off"]
    profile = follow(case, tmp_path, plugin_environment)
    server_args = LlamaServerArgs(tp_size=2)
    plan, line = sglang_step(server_args, profile, capsys)
    assert plan == case.plan(
        profile,
        hidden=8192,
        layers=80,
        architecture="LlamaForCausalLM",
        user_env=os.environ,
        installed=installed_here(("sglang", "flashinfer")),
    )
    assert plan.args == ("--disable-custom-all-reduce",) and server_args.disable_custom_all_reduce is True
    assert line == (
        f"topo-gate: sglang plugin: {release('sglang')}: profile sha256:test: following the profile; applied "
        f"--disable-custom-all-reduce; {plan.estimate}"
    )
    assert ": est. -" in plan.estimate and "all-reduce time vs default" in line and "the workload" in line
    assert os.environ[FINGERPRINT_ENV] == FINGERPRINT
    assert os.environ[APPLIED_ENV].endswith("profile sha256:test: following the profile")


@pytest.mark.slow
def test_vllm_applies_the_plan_to_the_pass_config_and_logs_its_estimate(
    tmp_path, plugin_environment, capsys
) -> None:
    case = BY_NAME["vllm-fusion-size"]
    profile = follow(case, tmp_path, plugin_environment)
    parsed = StandInCompilationConfig()
    engine_args = LlamaEngineArgs(tensor_parallel_size=2, compilation_config=parsed)
    plan, line = vllm_step(engine_args, profile, capsys)
    assert (plan.args, dict(plan.env)) == (case.args, {})
    passes = engine_args.compilation_config.pass_config
    assert (passes.fuse_allreduce_rms, passes.fi_allreduce_fusion_max_size_mb) == (True, 0.21875)
    assert parsed.pass_config.fuse_allreduce_rms is None  # the parser's own object is not written into
    assert line.endswith(f"; {plan.estimate}") and "applied --compilation-config" in line


def test_vllm_exports_the_plans_env_next_to_the_users_own(tmp_path, plugin_environment, capsys) -> None:
    # The user's VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm and --enforce-eager route every all-reduce to
    # kernels slower than NCCL here: the plan turns FlashInfer (and symm-mem) off, the user's stays.
    case = BY_NAME["vllm-flashinfer-off"]
    profile = follow(case, tmp_path, plugin_environment)
    plan, line = vllm_step(LlamaEngineArgs(tensor_parallel_size=2, enforce_eager=True), profile, capsys)
    assert dict(plan.env) == dict(case.env)
    assert {name: os.environ[name] for name in case.env} == dict(case.env)
    assert os.environ["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"
    assert "applied VLLM_ALLREDUCE_USE_FLASHINFER=0 VLLM_ALLREDUCE_USE_SYMM_MEM=0" in line


# -- the user's own settings: read back, priced as the default, never touched ------------------------


def test_a_field_the_user_set_is_read_back_as_their_flag() -> None:
    server_args = LlamaServerArgs(
        tp_size=2, disable_custom_all_reduce=True, flashinfer_allreduce_fusion_backend="trtllm"
    )
    assert user_args(server_args, "sglang", sglang_defaults()) == (
        "--disable-custom-all-reduce",
        "--flashinfer-allreduce-fusion-backend",
        "trtllm",
    )
    engine_args = LlamaEngineArgs(
        tensor_parallel_size=2,
        disable_custom_all_reduce=True,
        compilation_config=StandInCompilationConfig(StandInPassConfig(fuse_allreduce_rms=False)),
    )
    served = vllm_plugin._served(engine_args)
    assert served.user_args == (
        "--disable-custom-all-reduce",
        "--compilation-config",
        '{"pass_config":{"fuse_allreduce_rms":false}}',
    )
    assert (served.tp, served.hidden, served.layers, served.architecture) == (2, 8192, 80, "LlamaForCausalLM")
    eager = vllm_plugin._served(
        LlamaEngineArgs(tensor_parallel_size=2, enforce_eager=True, optimization_level=1)
    )
    assert eager.user_args == ("--enforce-eager", "--optimization-level", "1")


@pytest.mark.slow
def test_vllm_a_users_eager_run_has_no_fusion_pass_to_plan(tmp_path, plugin_environment, capsys) -> None:
    # The fusion pass runs only when vLLM compiles: with the user's --enforce-eager the pass the plan
    # would switch on does nothing, so the plan is no knobs (and says so).
    profile = follow(BY_NAME["vllm-fusion-size"], tmp_path, plugin_environment)
    engine_args = LlamaEngineArgs(tensor_parallel_size=2, enforce_eager=True)
    plan, line = vllm_step(engine_args, profile, capsys)
    assert (plan.args, plan.fallback) == ((), False) and "no knobs" in line
    assert engine_args.compilation_config.pass_config.fuse_allreduce_rms is None


def test_sglang_a_users_switch_is_priced_as_the_default_and_left_alone(
    tmp_path, plugin_environment, capsys
) -> None:
    # The plan here is --disable-custom-all-reduce; the user has set it: nothing is left to change.
    profile = follow(BY_NAME["sglang-custom-off"], tmp_path, plugin_environment)
    server_args = LlamaServerArgs(tp_size=2, disable_custom_all_reduce=True)
    plan, line = sglang_step(server_args, profile, capsys)
    assert (plan.args, dict(plan.env), plan.fallback) == ((), {}, False)
    assert server_args.disable_custom_all_reduce is True
    assert "applied" not in line and "no knobs: nothing measured beats the launcher's default" in line


def test_sglang_a_users_fusion_backend_is_not_overridden(tmp_path, plugin_environment, capsys) -> None:
    # The plan here turns fusion on; the user enforce-disabled it: the plan leaves fusion alone.
    profile = follow(BY_NAME["sglang-fusion-on"], tmp_path, plugin_environment)
    server_args = LlamaServerArgs(tp_size=2, enforce_disable_flashinfer_allreduce_fusion=True)
    plan, line = sglang_step(server_args, profile, capsys)
    assert "--flashinfer-allreduce-fusion-backend" not in plan.args
    assert server_args.flashinfer_allreduce_fusion_backend is None
    assert server_args.enforce_disable_flashinfer_allreduce_fusion is True


def test_vllm_a_pass_the_user_configured_is_priced_as_theirs(tmp_path, plugin_environment, capsys) -> None:
    # The plan here turns the fusion pass on up to 224 KiB; the user switched the pass off.
    profile = follow(BY_NAME["vllm-fusion-size"], tmp_path, plugin_environment)
    compilation = StandInCompilationConfig(StandInPassConfig(fuse_allreduce_rms=False))
    engine_args = LlamaEngineArgs(tensor_parallel_size=2, compilation_config=compilation)
    plan, line = vllm_step(engine_args, profile, capsys)
    assert "--compilation-config" not in plan.args and not plan.fallback
    assert engine_args.compilation_config.pass_config.fuse_allreduce_rms is False
    assert engine_args.compilation_config.pass_config.fi_allreduce_fusion_max_size_mb is None
    assert "yours kept" not in line and "applied" not in line


# -- TOPO_GATE_FALLBACK: unset, nccl, a typo ----------------------------------------------------------


def test_on_a_foreign_node_the_plugin_changes_nothing_by_default(
    tmp_path, plugin_environment, capsys
) -> None:
    profile = follow(BY_NAME["sglang-custom-off"], tmp_path, plugin_environment, node=OTHER_NODE)
    server_args = LlamaServerArgs(tp_size=2)
    plan, line = sglang_step(server_args, profile, capsys)
    assert plan.fallback and (plan.args, dict(plan.env)) == ((), {})
    assert server_args == LlamaServerArgs(tp_size=2)
    assert line.startswith(
        f"topo-gate: sglang plugin: {release('sglang')}: profile sha256:test: nothing changed (allreduce: "
    )
    assert "fingerprint" in line and "applied" not in line


def test_on_a_foreign_node_fallback_nccl_forces_nccl(tmp_path, plugin_environment, capsys) -> None:
    profile = follow(BY_NAME["sglang-custom-off"], tmp_path, plugin_environment, node=OTHER_NODE)
    plugin_environment.setenv(FALLBACK_ENV, "nccl")
    server_args = LlamaServerArgs(tp_size=2)
    plan, line = sglang_step(server_args, profile, capsys)
    assert plan.fallback and plan.args == sglang.FORCE_NCCL.args
    assert server_args.disable_custom_all_reduce and server_args.enforce_disable_flashinfer_allreduce_fusion
    assert os.environ["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "0"
    assert line.startswith(
        f"topo-gate: sglang plugin: {release('sglang')}: profile sha256:test: NCCL forced (allreduce: "
    )
    assert "applied --disable-custom-all-reduce --enforce-disable-flashinfer-allreduce-fusion" in line


@pytest.mark.parametrize("node", [FINGERPRINT, OTHER_NODE], ids=["its node", "a foreign node"])
def test_a_misspelt_fallback_changes_nothing_and_the_line_says_why(
    tmp_path, plugin_environment, capsys, node: str
) -> None:
    # Not silently taken for either mode: not even a usable profile is followed until it is fixed.
    profile = follow(BY_NAME["vllm-custom-off"], tmp_path, plugin_environment, node=node)
    plugin_environment.setenv(FALLBACK_ENV, "ncl")
    engine_args = LlamaEngineArgs(tensor_parallel_size=2)
    plan, line = vllm_step(engine_args, profile, capsys)
    assert plan.fallback and (plan.args, dict(plan.env)) == ((), {})
    assert engine_args.disable_custom_all_reduce is False
    assert (
        "nothing changed (" in line and f"{FALLBACK_ENV}='ncl' is not one of launcher-default, nccl" in line
    )


def test_the_fallback_mode_reads_the_variable_as_written() -> None:
    from topo_gate.plugins import fallback_mode

    assert fallback_mode({}) == ("launcher-default", None)
    assert fallback_mode({FALLBACK_ENV: ""}) == ("launcher-default", None)
    assert fallback_mode({FALLBACK_ENV: " nccl "}) == ("nccl", None)
    assert fallback_mode({FALLBACK_ENV: "launcher-default"}) == ("launcher-default", None)
    mode, problem = fallback_mode({FALLBACK_ENV: "NCCL"})
    assert (
        mode == "launcher-default"
        and problem == f"{FALLBACK_ENV}='NCCL' is not one of launcher-default, nccl"
    )


def test_the_plan_json_of_the_vllm_pass_is_what_the_plugin_writes(
    tmp_path, plugin_environment, capsys
) -> None:
    # The same --compilation-config the plan carries for exec is what lands in the pass config.
    profile = follow(BY_NAME["vllm-fusion-size"], tmp_path, plugin_environment)
    engine_args = LlamaEngineArgs(tensor_parallel_size=2)
    plan, _ = vllm_step(engine_args, profile, capsys)
    meant = json.loads(plan.args[plan.args.index("--compilation-config") + 1])["pass_config"]
    applied = dataclasses.asdict(engine_args.compilation_config.pass_config)
    assert applied == {**dataclasses.asdict(StandInPassConfig()), **meant}  # the other passes untouched
