"""scripts/launcher_parsers.py's checks catch a plan the real launcher reads differently than meant.

Needs SGLang 0.5.23 and vLLM 0.33.0 (scripts/launcher_parsers.sh installs them and runs this file);
skipped where they are not installed. The script itself checks every real plan; this shows its checks
are not vacuous, with plans no planner emits, and that its corpus holds every kind of knob each
planner can emit (which needs no launcher installed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from knob_cases import CASES

from topo_gate.launchers import PLANNERS, LaunchPlan, sglang, trtllm, vllm

# Importing a real launcher sets variables of its own: put the environment back after each test.
pytestmark = [pytest.mark.usefixtures("restore_environment"), pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "launcher_parsers.py"


@pytest.fixture(scope="module")
def driver():
    spec = importlib.util.spec_from_file_location("launcher_parsers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan(launcher: str, args: tuple[str, ...] = (), env: dict | None = None) -> LaunchPlan:
    return LaunchPlan(launcher, "pinned", args, env or {}, ("test",), False, "test")


def test_vllm_check_accepts_what_vllm_reads_as_meant_and_rejects_the_rest(driver) -> None:
    pytest.importorskip("vllm.engine.arg_utils")
    vllm = driver.VllmParser()
    good = plan(
        "vllm",
        (
            "--disable-custom-all-reduce",
            "--compilation-config",
            '{"pass_config":{"fuse_allreduce_rms":true}}',
        ),
        {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0", "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
    )
    assert vllm.check(good, 4) == []
    # "true" is not what vLLM's bool(int(...)) reads; a flag with no recorded meaning is refused.
    assert vllm.check(plan("vllm", env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "true"}), 2)
    assert vllm.check(plan("vllm", ("--disable-nccl-for-dp-synchronization",)), 2) == [
        "--disable-nccl-for-dp-synchronization: no meaning recorded in VLLM_FLAGS"
    ]


def test_sglang_check_compares_the_parsed_field_with_the_meaning(driver, monkeypatch) -> None:
    pytest.importorskip("sglang.srt.server_args")
    sglang = driver.SglangParser()
    good = plan(
        "sglang", ("--flashinfer-allreduce-fusion-backend", "trtllm"), {"SGLANG_PCIE_IPC_MAX_NUMEL": "64"}
    )
    assert sglang.check(good, 2) == []
    # A wrong entry in the flag -> field table is caught by what SGLang's parser fills.
    monkeypatch.setitem(driver.SGLANG_FLAGS, "--disable-custom-all-reduce", ("enable_torch_symm_mem", True))
    assert sglang.check(plan("sglang", ("--disable-custom-all-reduce",)), 2) == [
        "ServerArgs enable_torch_symm_mem = False, the plan meant True"
    ]


def test_the_corpus_is_every_knob_case_and_the_forced_nccl_plans(driver) -> None:
    corpus = list(driver.plans())
    knobs = {
        (plan.launcher, plan.args, tuple(sorted(plan.env.items())), tuple(sorted(plan.config.items())))
        for _, _, plan in corpus
    }
    for case in CASES:
        wanted = (
            case.launcher,
            case.args,
            tuple(sorted(case.env.items())),
            tuple(sorted(case.config.items())),
        )
        assert wanted in knobs, f"{case.name}: its plan is missing from the corpus"
    assert all(plan.args or plan.env or plan.config for _, _, plan in corpus), "a plan without knobs"
    forced = {plan.launcher: plan for label, _, plan in corpus if label == "fallback nccl"}
    assert sorted(forced) == sorted(PLANNERS)
    for launcher, parts in (
        ("sglang", sglang.FORCE_NCCL),
        ("vllm", vllm.FORCE_NCCL),
        ("trtllm", trtllm.FORCE_NCCL),
    ):
        assert (forced[launcher].args, dict(forced[launcher].env)) == (parts.args, dict(parts.env))
