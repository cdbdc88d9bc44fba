"""The plugins apply a plan's flags to the launcher's parsed configuration, and say exactly what they applied.

A plugin runs after the launcher parsed its command line, so each flag of a plan becomes the field it
sets (``plugins/fields.py``). This venv has neither launcher, so the configuration objects are the
labelled stand-ins of ``stand_ins.py``: the real field names and defaults of the pinned releases.

The plans are built here (``LaunchPlan`` with known args and env), not read from a profile: what a
planner emits is its own tests' business; applying whatever it emits is this file's. The real
launchers run the same code in tests/plugins/test_real_launchers.py (scripts/launcher_parsers.sh).
SGLang's ``_apply`` reads the defaults through msgspec, which is not installed here: its flags are
applied here through ``apply_flags`` with the stand-in's defaults, which is what ``_apply`` hands it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import pytest
from stand_ins import (
    StandInCompilationConfig,
    StandInEngineArgs,
    StandInPassConfig,
    StandInServerArgs,
    field_defaults,
    release,
)

from topo_gate.launchers import LaunchPlan, knobs
from topo_gate.plugins import Outcome, apply_flags, export_env, record
from topo_gate.plugins import vllm as vllm_plugin

DIGEST = "sha256:" + "ab" * 32


# -- plans with known content --------------------------------------------------------------------------


def _plan(launcher: str, args: tuple[str, ...], env: dict[str, str], *, fallback: bool = False) -> LaunchPlan:
    version = knobs.PINNED[launcher]
    reason = "NCCL because the test says so" if fallback else "following profile h200-x2 for TP 2"
    return LaunchPlan(launcher, version, args, env, notes=(), fallback=fallback, reason=reason)


SGLANG_FAST = _plan(
    "sglang",
    (
        "--disable-custom-all-reduce",
        "--enable-torch-symm-mem",
        "--flashinfer-allreduce-fusion-backend",
        "trtllm",
    ),
    {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"},
)
SGLANG_NCCL = _plan(
    "sglang",
    ("--disable-custom-all-reduce", "--enforce-disable-flashinfer-allreduce-fusion"),
    {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"},
    fallback=True,
)
VLLM_FUSING = _plan(
    "vllm",
    ("--disable-custom-all-reduce", "--compilation-config", '{"pass_config":{"fuse_allreduce_rms":true}}'),
    {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0", "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
)
VLLM_NCCL = _plan(
    "vllm",
    ("--disable-custom-all-reduce", "--compilation-config", '{"pass_config":{"fuse_allreduce_rms":false}}'),
    {"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"},
    fallback=True,
)
PLAN_ENV = {name for plan in (SGLANG_FAST, SGLANG_NCCL, VLLM_FUSING, VLLM_NCCL) for name in plan.env}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch):
    # The plugins set the process environment; every variable they may set starts unset and is unset again
    # (monkeypatch restores only what existed before: what the plugin set on top of nothing goes here).
    names = (*PLAN_ENV, "TOPO_GATE_PLUGIN_APPLIED", "TOPO_GATE_NODE_FINGERPRINT")
    for name in names:
        monkeypatch.delenv(name, raising=False)
    yield
    for name in names:
        os.environ.pop(name, None)


def _sglang_apply(server_args: StandInServerArgs, plan: LaunchPlan) -> tuple[str, ...]:
    """What the SGLang plugin's ``_apply`` does, with the stand-in's defaults in place of msgspec's."""
    unapplied, kept = apply_flags(server_args, "sglang", plan, field_defaults(server_args))
    assert unapplied == ()
    return (*kept, *export_env(plan.env, os.environ))


# -- SGLang ------------------------------------------------------------------------------------------


def test_sglang_every_flag_of_the_plan_sets_its_field(capsys: pytest.CaptureFixture[str]) -> None:
    server_args = StandInServerArgs(model_path="/models/llama", tp_size=2)
    kept = _sglang_apply(server_args, SGLANG_FAST)
    assert kept == ()
    assert server_args.disable_custom_all_reduce is True
    assert server_args.enable_torch_symm_mem is True
    assert server_args.flashinfer_allreduce_fusion_backend == "trtllm"
    # what the plan does not mention stays as parsed
    assert server_args.enforce_disable_flashinfer_allreduce_fusion is False
    assert (server_args.model_path, server_args.tp_size) == ("/models/llama", 2)
    assert os.environ["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "0"
    record(Outcome("sglang", DIGEST, SGLANG_FAST, (), kept), None, os.environ)
    assert capsys.readouterr().err == (
        f"topo-gate: sglang plugin: {release('sglang')}: profile {DIGEST}: following profile h200-x2 for TP 2; applied "
        "--disable-custom-all-reduce --enable-torch-symm-mem --flashinfer-allreduce-fusion-backend trtllm "
        "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=0\n"
    )


def test_sglang_the_nccl_plan_turns_every_path_off(capsys: pytest.CaptureFixture[str]) -> None:
    server_args = StandInServerArgs(model_path="/models/llama", tp_size=2)
    kept = _sglang_apply(server_args, SGLANG_NCCL)
    assert server_args.disable_custom_all_reduce is True
    assert server_args.enforce_disable_flashinfer_allreduce_fusion is True
    assert (
        server_args.enable_torch_symm_mem is False and server_args.flashinfer_allreduce_fusion_backend is None
    )
    record(Outcome("sglang", DIGEST, SGLANG_NCCL, (), kept), None, os.environ)
    assert capsys.readouterr().err == (
        f"topo-gate: sglang plugin: {release('sglang')}: profile {DIGEST}: NCCL forced (NCCL because the test says so); applied "
        "--disable-custom-all-reduce --enforce-disable-flashinfer-allreduce-fusion "
        "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=0\n"
    )


def test_sglang_a_value_the_user_set_is_kept_and_not_claimed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server_args = StandInServerArgs(
        model_path="/models/llama", tp_size=2, flashinfer_allreduce_fusion_backend="mnnvl"
    )
    monkeypatch.setenv("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "1")
    kept = _sglang_apply(server_args, SGLANG_FAST)
    assert server_args.flashinfer_allreduce_fusion_backend == "mnnvl"  # the user's
    assert os.environ["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "1"  # the user's
    assert server_args.disable_custom_all_reduce is True and server_args.enable_torch_symm_mem is True
    record(Outcome("sglang", DIGEST, SGLANG_FAST, (), kept), None, os.environ)
    assert capsys.readouterr().err == (
        f"topo-gate: sglang plugin: {release('sglang')}: profile {DIGEST}: following profile h200-x2 for TP 2; applied "
        "--disable-custom-all-reduce --enable-torch-symm-mem; "
        "yours kept: flashinfer_allreduce_fusion_backend=mnnvl, SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1\n"
    )


def test_sglang_a_user_value_equal_to_the_plan_is_no_conflict() -> None:
    server_args = StandInServerArgs(model_path="/models/llama", disable_custom_all_reduce=True)
    assert _sglang_apply(server_args, SGLANG_NCCL) == ()
    assert server_args.disable_custom_all_reduce is True
    assert server_args.enforce_disable_flashinfer_allreduce_fusion is True


def test_sglang_a_user_string_equal_to_the_plan_is_no_conflict() -> None:
    # The parser builds its own string object for the user's value: equal, not the same object.
    users = "".join(["trt", "llm"])
    server_args = StandInServerArgs(model_path="/models/llama", flashinfer_allreduce_fusion_backend=users)
    assert _sglang_apply(server_args, SGLANG_FAST) == ()
    assert server_args.flashinfer_allreduce_fusion_backend == "trtllm"


def test_sglang_a_flag_with_no_field_is_reported_not_applied() -> None:
    # A plan flag this ServerArgs has no field for (an older or newer release) is named, never dropped silently.
    @dataclass
    class OlderServerArgs:
        model_path: str
        disable_custom_all_reduce: bool = False

    server_args = OlderServerArgs(model_path="/models/llama")
    unapplied, kept = apply_flags(server_args, "sglang", SGLANG_FAST, field_defaults(server_args))
    assert unapplied == ("--enable-torch-symm-mem", "--flashinfer-allreduce-fusion-backend")
    assert kept == () and server_args.disable_custom_all_reduce is True


# -- vLLM: the plugin's own _apply (dataclasses, as vLLM's are) -------------------------------------------


def test_vllm_every_flag_of_the_plan_sets_its_field(capsys: pytest.CaptureFixture[str]) -> None:
    parsed = StandInCompilationConfig()
    engine_args = StandInEngineArgs(tensor_parallel_size=2, compilation_config=parsed)
    kept = vllm_plugin._apply(engine_args, VLLM_FUSING)
    assert kept == ()
    assert engine_args.disable_custom_all_reduce is True
    assert engine_args.compilation_config.pass_config.fuse_allreduce_rms is True
    # the other passes keep their defaults, and the parser's own object is not written into
    untouched = {k: v for k, v in dataclasses.asdict(engine_args.compilation_config.pass_config).items()}
    assert untouched == {**dataclasses.asdict(StandInPassConfig()), "fuse_allreduce_rms": True}
    assert parsed.pass_config.fuse_allreduce_rms is None
    assert {name: os.environ[name] for name in VLLM_FUSING.env} == dict(VLLM_FUSING.env)
    record(Outcome("vllm", DIGEST, VLLM_FUSING, (), kept), None, os.environ)
    assert capsys.readouterr().err == (
        f"topo-gate: vllm plugin: {release('vllm')}: profile {DIGEST}: following profile h200-x2 for TP 2; applied "
        '--disable-custom-all-reduce --compilation-config {"pass_config":{"fuse_allreduce_rms":true}} '
        "VLLM_ALLREDUCE_USE_SYMM_MEM=0 VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm\n"
    )


def test_vllm_the_nccl_plan_turns_fusion_and_custom_all_reduce_off(
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine_args = StandInEngineArgs(tensor_parallel_size=4)
    kept = vllm_plugin._apply(engine_args, VLLM_NCCL)
    assert engine_args.disable_custom_all_reduce is True
    assert engine_args.compilation_config.pass_config.fuse_allreduce_rms is False
    assert (
        os.environ["VLLM_ALLREDUCE_USE_FLASHINFER"] == "0"
        and os.environ["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    )
    record(Outcome("vllm", DIGEST, VLLM_NCCL, (), kept), None, os.environ)
    line = capsys.readouterr().err
    assert line.startswith(
        f"topo-gate: vllm plugin: {release('vllm')}: profile {DIGEST}: NCCL forced (NCCL because the test says so); "
    )
    assert line.endswith(
        'applied --disable-custom-all-reduce --compilation-config {"pass_config":{"fuse_allreduce_rms":false}} '
        "VLLM_ALLREDUCE_USE_FLASHINFER=0 VLLM_ALLREDUCE_USE_SYMM_MEM=0\n"
    )
    assert os.environ["TOPO_GATE_PLUGIN_APPLIED"].endswith(
        "profile " + DIGEST + ": NCCL forced (NCCL because the test says so)"
    )


def test_vllm_a_value_the_user_set_is_kept_and_not_claimed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine_args = StandInEngineArgs(tensor_parallel_size=2, disable_custom_all_reduce=False)
    monkeypatch.setenv("VLLM_ALLREDUCE_USE_SYMM_MEM", "1")
    kept = vllm_plugin._apply(engine_args, VLLM_FUSING)
    assert os.environ["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "1"  # the user's
    assert os.environ["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"
    assert engine_args.disable_custom_all_reduce is True
    record(Outcome("vllm", DIGEST, VLLM_FUSING, (), kept), None, os.environ)
    assert capsys.readouterr().err == (
        f"topo-gate: vllm plugin: {release('vllm')}: profile {DIGEST}: following profile h200-x2 for TP 2; applied "
        '--disable-custom-all-reduce --compilation-config {"pass_config":{"fuse_allreduce_rms":true}} '
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm; yours kept: VLLM_ALLREDUCE_USE_SYMM_MEM=1\n"
    )


def test_vllm_a_pass_the_user_configured_is_kept() -> None:
    compilation = StandInCompilationConfig(StandInPassConfig(fuse_allreduce_rms=False, eliminate_noops=False))
    engine_args = StandInEngineArgs(tensor_parallel_size=2, compilation_config=compilation)
    kept = vllm_plugin._apply(engine_args, VLLM_FUSING)
    assert engine_args.compilation_config.pass_config.fuse_allreduce_rms is False  # the user's
    assert engine_args.compilation_config.pass_config.eliminate_noops is False
    assert engine_args.disable_custom_all_reduce is True
    assert kept == ("pass_config.fuse_allreduce_rms=False",)


def test_vllm_a_pass_the_user_turned_on_stays_on_under_the_nccl_plan() -> None:
    compilation = StandInCompilationConfig(StandInPassConfig(fuse_allreduce_rms=True))
    engine_args = StandInEngineArgs(tensor_parallel_size=2, compilation_config=compilation)
    kept = vllm_plugin._apply(engine_args, VLLM_NCCL)
    assert engine_args.compilation_config.pass_config.fuse_allreduce_rms is True  # the user's
    assert kept == ("pass_config.fuse_allreduce_rms=True",)


# -- order and equality edges: whatever the plan's order, every flag gets its turn -----------------------


def test_sglang_a_flag_the_user_set_does_not_stop_the_flags_after_it() -> None:
    # The user's fusion backend is kept; the plan's next flag is still applied.
    plan = _plan(
        "sglang", ("--flashinfer-allreduce-fusion-backend", "trtllm", "--disable-custom-all-reduce"), {}
    )
    server_args = StandInServerArgs(model_path="/models/llama", flashinfer_allreduce_fusion_backend="mnnvl")
    assert _sglang_apply(server_args, plan) == ("flashinfer_allreduce_fusion_backend=mnnvl",)
    assert server_args.flashinfer_allreduce_fusion_backend == "mnnvl"  # the user's
    assert server_args.disable_custom_all_reduce is True


def test_vllm_flags_after_the_compilation_config_are_applied_too() -> None:
    # --compilation-config is applied key by key by the vLLM plugin itself; a flag after it in the plan
    # is still set on EngineArgs.
    plan = _plan(
        "vllm",
        (
            "--compilation-config",
            '{"pass_config":{"fuse_allreduce_rms":false}}',
            "--disable-custom-all-reduce",
        ),
        {},
    )
    engine_args = StandInEngineArgs(tensor_parallel_size=2)
    assert vllm_plugin._apply(engine_args, plan) == ()
    assert engine_args.disable_custom_all_reduce is True
    assert engine_args.compilation_config.pass_config.fuse_allreduce_rms is False


@pytest.mark.parametrize(
    ("users", "kept"),
    [
        # "mnnvl" sorts before the plan's "trtllm": the user's value wins whichever way they compare
        ("mnnvl", ("VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl",)),
        # the user's own "trtllm" (a string of its own, read from the environment) is no conflict
        ("trtllm", ()),
    ],
)
def test_vllm_the_users_env_wins_and_only_a_different_value_is_reported_kept(
    users: str, kept: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_FLASHINFER_ALLREDUCE_BACKEND", users)
    engine_args = StandInEngineArgs(tensor_parallel_size=2)
    assert vllm_plugin._apply(engine_args, VLLM_FUSING) == kept
    assert os.environ["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == users
    assert os.environ["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"  # the plan's, where the user set nothing


def test_vllm_a_pass_size_the_user_set_equal_to_the_plans_is_no_conflict() -> None:
    # The user's 512.5 MiB and the plan's (parsed from its JSON) are equal floats, not the same object.
    plan = _plan(
        "vllm", ("--compilation-config", '{"pass_config":{"fi_allreduce_fusion_max_size_mb":512.5}}'), {}
    )
    compilation = StandInCompilationConfig(StandInPassConfig(fi_allreduce_fusion_max_size_mb=512.5))
    engine_args = StandInEngineArgs(tensor_parallel_size=2, compilation_config=compilation)
    assert vllm_plugin._apply(engine_args, plan) == ()
    assert engine_args.compilation_config.pass_config.fi_allreduce_fusion_max_size_mb == 512.5
