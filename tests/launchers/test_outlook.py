"""What each launcher will do with a profile (``launchers.outlook``), on the bundled evidence: the real
2x H200 profile, whose launcher defaults are mostly untimed there, and the synthetic PCIe profile,
where no launcher has a measured path faster than its default (the fused kernels are refused on
SM 12.0, as a real trial refuses them); a plan with knobs comes from a knob case's node. Each outlook
must say what ``recommend`` says for the same request."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from knob_cases import BY_NAME

from topo_gate.launchers import PLANNERS, PlanRequest
from topo_gate.launchers.knobs import PINNED
from topo_gate.launchers.outlook import CPU_HARNESS, NO_TP_ALL_REDUCE, outlooks, shapes
from topo_gate.models import UnknownModel
from topo_gate.profile.io import load_profile

pytestmark = pytest.mark.slow  # plans every launcher at every TP size, some twice

REPO = Path(__file__).resolve().parents[2]
H200 = load_profile(REPO / "profiles/h200-x2/h7168-run1.yaml")
PCIE = load_profile(REPO / "profiles/examples/synthetic-rtxpro6000-pcie-x4.yaml")
H200_X1 = load_profile(REPO / "profiles/h200-x1/tp1-2.yaml")


def _entry(found, launcher: str, tp: int = 2):
    (entry,) = [e for e in found.entries if e.launcher == launcher and e.tp == tp]
    return entry


def test_each_preset_of_the_profiles_hidden_size_is_planned_and_same_shapes_share_a_heading() -> None:
    labels = [shape.label for shape in shapes(H200)]
    assert labels == ["deepseek-v3 (also deepseek-r1, kimi-k2)", "deepseek-v3.2"]
    found = outlooks(H200)
    # No launcher routes DeepSeek-V3.2 apart from V3 on this profile: one heading for all four.
    assert {e.shape.label for e in found.entries} == {
        "deepseek-v3 (also deepseek-r1, kimi-k2, deepseek-v3.2)"
    }
    assert [e.launcher for e in found.entries] == ["sglang", "vllm", "trtllm"]


def test_vllms_untimed_mnnvl_default_names_the_cause_the_action_and_the_plan_once_it_is_taken() -> None:
    vllm = _entry(outlooks(H200, model="llama-3-70b"), "vllm")
    cause, beyond = vllm.causes
    assert beyond.why == "beyond the largest measured size" and beyond.tokens == (8192, 8192)
    assert cause.runs == f"vLLM {PINNED['vllm']} runs mnnvl_fused_vllm here by default"
    assert "NVLink multicast" in cause.why and cause.action.startswith(
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm"
    )
    assert vllm.setting == "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm"
    # The same as recommend with that env: the default is then timed, and the plan priced in full.
    request = PlanRequest(
        H200,
        tp=2,
        model="llama-3-70b",
        fingerprint=H200.node.fingerprint,
        user_env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
    )
    plan = PLANNERS["vllm"](request)
    assert vllm.with_setting is not None and vllm.with_setting.estimate == plan.estimate
    spans = [(s.path, s.status) for s in vllm.defaults]
    assert spans[0] == ("mnnvl_fused_vllm", "not measured")


def test_sglangs_untimed_v2_default_is_planned_again_on_the_legacy_kernel() -> None:
    sglang = _entry(outlooks(H200, model="llama-3-70b"), "sglang")
    assert [c.runs for c in sglang.causes][0].startswith("SGLang 0.5.23 runs custom_v2_sglang")
    assert sglang.setting == "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0"
    assert sglang.with_setting is not None and sglang.with_setting.estimate.startswith("no knobs")
    # The plain and fused paths untimed for one reason are one cause, not two.
    assert len({(c.why, c.action) for c in sglang.causes}) == len(sglang.causes)


def test_trtllms_autotuned_default_is_one_cause_for_both_patterns() -> None:
    trtllm = _entry(outlooks(H200), "trtllm")
    (cause,) = [c for c in trtllm.causes if "AutoTuner" in c.why]
    assert (
        cause.runs
        == "TensorRT-LLM git-f6a156b runs trtllm_autotuned and trtllm_autotuned_fused here by default"
    )
    assert trtllm.setting == "TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1"


def test_a_plan_with_knobs_carries_its_estimated_saving_per_step() -> None:
    case = BY_NAME["sglang-custom-off"]
    sglang = _entry(outlooks(case.profile(), model=case.model), "sglang")
    assert sglang.outcome.knobs == "--disable-custom-all-reduce"
    assert sglang.outcome.estimate.startswith("plan: --disable-custom-all-reduce: ")
    assert ": est. -" in sglang.outcome.estimate
    assert (
        "all-reduce time vs default" in sglang.outcome.estimate and "us per step" in sglang.outcome.estimate
    )


def test_the_sm120_example_plans_no_fusion_its_trials_would_refuse() -> None:
    for tp in (2, 4):
        vllm = _entry(outlooks(PCIE, model="qwen3-32b"), "vllm", tp=tp)
        assert vllm.outcome.knobs == ""
        assert vllm.outcome.estimate.startswith("no knobs")


def test_default_spans_fold_the_same_path_and_status_and_say_tokens_with_bytes() -> None:
    sglang = _entry(outlooks(H200, model="deepseek-v3"), "sglang")
    allreduce = [s.words for s in sglang.defaults if s.pattern == "allreduce"]
    assert allreduce == [
        "trtllm_oneshot_sglang at 1-2048 tokens (up to 28 MiB, measured)",
        "nccl at 2049-8192 tokens (up to 112 MiB, measured)",
        "nccl from 8193 tokens (beyond the largest measured size)",
    ]


def test_tp_1_and_skipped_tp_sizes_are_notes_not_plans() -> None:
    found = outlooks(H200_X1)
    assert found.entries == ()
    assert found.notes == (
        f"TP 1: {NO_TP_ALL_REDUCE}",
        "TP 2: not measured (node has 1 usable GPU): the launchers run their own defaults",
    )


def test_a_cpu_harness_profile_has_nothing_to_plan() -> None:
    hardware = {**H200.node.hardware, "device": "cpu"}
    cpu = replace(H200, node=replace(H200.node, hardware=hardware))
    assert outlooks(cpu).entries == () and outlooks(cpu).notes == (CPU_HARNESS,)


def test_an_unknown_model_is_refused() -> None:
    with pytest.raises(UnknownModel):
        outlooks(H200, model="no-such-model")


def test_a_tampered_profile_is_a_fallback_with_its_reason() -> None:
    tampered = replace(H200, digest="sha256:" + "0" * 64)
    entry = _entry(outlooks(tampered, model="deepseek-v3"), "vllm")
    assert entry.outcome.fallback is not None and entry.defaults == ()
    assert entry.outcome.words.startswith("fallback, nothing changed: ")
