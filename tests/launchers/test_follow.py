"""What every planner shares: reading both patterns of a profile with their price tables, the
fallback plans, and the notes a plan carries.

Run through the real reader on sealed profiles made the way a probe makes them (priced_profiles.py);
each test checks the value a planner builds on, so that a planner cannot be handed a wrong price
table, capability or reason.
"""

from __future__ import annotations

import dataclasses

import pytest
from priced_profiles import FINGERPRINT, TOKENS, priced_profile, scaled, times

from topo_gate.launchers.plan.choice import Candidate
from topo_gate.launchers.plan.flow import fallback_plan, node_capability, plan_from_profile, read_profile
from topo_gate.launchers.plan.request import LaunchPlanParts, PlanRequest
from topo_gate.launchers.routes import Knobs

NCCL = scaled(8.0, 0.01)
TABLES = {
    "allreduce": {"nccl": NCCL, "trtllm_oneshot": times(NCCL, 0.5)},
    "allreduce_rmsnorm": {"nccl": times(NCCL, 1.2), "trtllm_fused_oneshot": times(NCCL, 0.6)},
}
FORCED = LaunchPlanParts(args=("--nccl",), env={"X": "0"}, notes=("forced",), config={"k": "v"})


def read(profile, **kwargs):
    return read_profile(PlanRequest(profile, tp=2, fingerprint=FINGERPRINT, **kwargs))


def test_both_price_tables_and_the_trial_shape_are_read() -> None:
    facts = read(priced_profile(TABLES, hidden=5120, dtype="float32", sm="10.0"))
    assert facts.fallback_reason is None
    assert sorted(facts.tables) == ["allreduce", "allreduce_rmsnorm"]
    plain = facts.tables["allreduce"]
    assert plain.sizes[:3] == (5120 * 4, 2 * 5120 * 4, 4 * 5120 * 4)
    assert plain.latency("trtllm_oneshot", 0, "isolated").median == pytest.approx(4.0, rel=1e-3)
    assert facts.tables["allreduce_rmsnorm"].measured("trtllm_fused_oneshot", 0)
    assert (facts.hidden, facts.itemsize, facts.capability) == (5120, 4, (10, 0))
    assert facts.group_class == "nvswitch" and facts.fixed == frozenset()


@pytest.mark.parametrize(("dtype", "itemsize"), [("bfloat16", 2), ("float16", 2), ("float32", 4)])
def test_itemsize_of_each_trial_dtype(dtype: str, itemsize: int) -> None:
    assert read(priced_profile(TABLES, dtype=dtype)).itemsize == itemsize


def test_a_pattern_left_out_keeps_its_default_and_is_said_once() -> None:
    facts = read(priced_profile(TABLES), patterns=("allreduce",))
    assert facts.fixed == frozenset({"allreduce_rmsnorm"})
    assert sorted(facts.tables) == ["allreduce", "allreduce_rmsnorm"]  # priced, to leave it as it is
    assert [w for w in facts.warnings if "not requested" in w] == [
        "allreduce_rmsnorm not requested (--pattern): its paths stay as the launcher's default"
    ]


@pytest.mark.parametrize(
    ("patterns", "reason"),
    [
        (("allreduce", "bogus"), "unknown pattern(s) ['bogus'] (known: allreduce, allreduce_rmsnorm)"),
        ((), "no pattern requested (known: allreduce, allreduce_rmsnorm)"),
    ],
)
def test_unknown_or_no_patterns_fall_back(patterns, reason: str) -> None:
    facts = read(priced_profile(TABLES), patterns=patterns)
    assert (facts.fallback_reason, facts.tables) == (reason, {})


def test_a_fallback_names_the_pattern(tmp_path) -> None:
    only_fused = priced_profile({"allreduce_rmsnorm": TABLES["allreduce_rmsnorm"]})
    facts = read(only_fused)
    assert facts.fallback_reason.startswith("allreduce: the profile has no decision for TP 2, allreduce")
    assert facts.tables == {}
    missing = read(tmp_path / "absent.yaml")
    assert missing.fallback_reason.startswith(f"allreduce: profile {tmp_path / 'absent.yaml'} unusable")


def test_a_profile_without_a_price_table_is_a_fallback_that_says_how_to_get_one() -> None:
    # Schema v1.2 had decisions and no measurements: the launcher's default cannot be priced.
    old = dataclasses.replace(
        priced_profile(TABLES), schema="topo-gate/profile/v1.2", measurements=()
    ).with_digest()
    facts = read(old)
    assert facts.tables == {}
    assert facts.fallback_reason == (
        "allreduce: the profile has no measurement table for TP 2 (nvswitch) (schema "
        "topo-gate/profile/v1.2; re-derive it with `topo-gate decide EVIDENCE`): the launcher's "
        "default cannot be priced"
    )


@pytest.mark.parametrize(
    ("gpus", "capability"),
    [
        ([{"sm": "9.0"}, {"sm": "9.0"}], (9, 0)),
        ([{"sm": "12.1"}], (12, 1)),
        ([{"sm": "9.0"}, {"sm": "8.9"}], None),  # GPUs disagree
        ([{"sm": "9.0"}, {"sm": None}], None),
        ([{"sm": "9.0"}, {}], None),
        ([{"sm": "9"}], None),
        ([{"sm": "9.x"}], None),
        ([{"sm": "x.0"}], None),
        (["9.0"], None),
        ([], None),
    ],
)
def test_node_capability(gpus, capability) -> None:
    assert node_capability({"gpus": gpus}) == capability


def test_no_gpu_list_is_no_capability() -> None:
    assert node_capability({}) is None and node_capability({"gpus": None}) is None


def test_the_forced_plan_carries_the_warnings_first_and_everything_forced() -> None:
    plan = fallback_plan("vllm", "9.9", "why", fallback="nccl", forced=FORCED, warnings=("w",))
    assert (plan.launcher, plan.launcher_version_pinned, plan.reason, plan.fallback) == (
        "vllm",
        "9.9",
        "why",
        True,
    )
    assert (plan.args, dict(plan.env), dict(plan.config), plan.notes) == (
        ("--nccl",),
        {"X": "0"},
        {"k": "v"},
        ("w", "forced"),
    )


def test_the_default_fallback_changes_nothing_and_says_how_to_force_nccl() -> None:
    plan = fallback_plan("vllm", "9.9", "why", fallback="launcher-default", forced=FORCED, warnings=("w",))
    assert (plan.args, dict(plan.env), dict(plan.config), plan.fallback, plan.reason) == (
        (),
        {},
        {},
        True,
        "why",
    )
    assert plan.notes == (
        "w",
        "nothing changed: the launcher runs its own defaults (--fallback nccl forces NCCL instead)",
    )
    assert plan.estimate == "" and plan.choice is None


def _offer(knobs: Knobs, note: str):
    """A planner's candidates: this one knob set."""

    def candidates(facts, tp, user):
        assert tp == 2 and facts.hidden == 7168 and facts.tables
        return [Candidate(knobs, (note,))]

    return candidates


def test_following_a_profile_puts_the_readers_warnings_before_the_plans_notes(monkeypatch) -> None:
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)
    # SGLang on SM 9.0 TP2, no model: the fused pattern left out; the offered knob set changes nothing
    # measurable (PCIe IPC sits behind custom all-reduce v2, which takes every size it could): no knobs.
    request = PlanRequest(
        priced_profile(TABLES), tp=2, fallback="nccl", fingerprint=FINGERPRINT, patterns=("allreduce",)
    )
    plan = plan_from_profile(
        "sglang", FORCED, _offer(Knobs(args=("--disable-custom-all-reduce",)), "off"), request
    )
    assert (plan.fallback, plan.reason, plan.launcher_version_pinned) == (
        False,
        "following the profile",
        "0.5.23",
    )
    assert (plan.args, dict(plan.env), dict(plan.config)) == ((), {}, {})
    assert plan.notes == (
        "allreduce_rmsnorm not requested (--pattern): its paths stay as the launcher's default",
        "no --model/--hidden: token limits converted with the profile's hidden size 7168; a wider served "
        "model sends larger messages at the same token counts",
        "architecture unknown (no --model): sizes where the launcher routes by architecture are left "
        "to its default",
        "layers unknown (no --model): a step priced as 32 layers",
        "no knobs: the launcher's default",
    )
    assert plan.to_dict()["notes"] == list(plan.notes) and plan.to_dict()["version"] == "0.5.23"
    assert plan.to_dict()["estimate"] == plan.estimate != ""


def _trtllm(factor: float):
    """TensorRT-LLM's plan for qwen3-32b with the autotuner off (AUTO follows its table to the one-shot
    kernels) where those kernels take ``factor`` x NCCL's time, up to 8192 tokens (past the 64 MiB
    AUTO sends to them); NCCL everywhere is the one knob set offered."""
    ladder = (*TOKENS, 8192)
    nccl = scaled(8.0, 0.01, ladder)
    tables = {
        "allreduce": {"nccl": nccl, "trtllm_oneshot": times(nccl, factor)},
        "allreduce_rmsnorm": {"nccl": times(nccl, 1.2), "trtllm_fused_oneshot": times(nccl, factor)},
    }
    request = PlanRequest(
        priced_profile(tables, tokens=ladder), tp=2, fallback="nccl", fingerprint=FINGERPRINT,
        model="qwen3-32b", user_env={"TLLM_DISABLE_ALLREDUCE_AUTOTUNE": "1"},
    )  # fmt: skip
    return plan_from_profile(
        "trtllm", FORCED, _offer(Knobs(config={"allreduce_strategy": "NCCL"}), "nccl"), request
    )


def test_a_knob_set_slower_than_the_default_is_not_the_plan() -> None:
    plan = _trtllm(0.5)
    assert dict(plan.config) == {} and plan.notes[-1] == "no knobs: the launcher's default"
    assert (
        "allreduce_strategy" in str(plan.choice.rejected[0][0].knobs)
        and "slower at" in plan.choice.rejected[0][1]
    )


def test_a_knob_set_that_saves_is_the_plan_with_its_notes() -> None:
    plan = _trtllm(2.0)
    assert (plan.args, dict(plan.env), dict(plan.config)) == ((), {}, {"allreduce_strategy": "NCCL"})
    assert plan.notes[-1] == "nccl" and plan.estimate.startswith("plan: ") and ": est. -" in plan.estimate


def test_a_bad_fallback_mode_is_refused_before_anything_is_read() -> None:
    with pytest.raises(ValueError, match="fallback must be one of launcher-default, nccl, not 'auto'"):
        plan_from_profile(
            "vllm", FORCED, _offer(Knobs(), "x"), PlanRequest("absent.yaml", tp=2, fallback="auto")
        )


def test_plans_readings_and_parts_cannot_be_changed_after_the_fact() -> None:
    plan = fallback_plan("vllm", "9.9", "why", fallback="nccl", forced=FORCED)
    facts = read(priced_profile(TABLES))
    for frozen, field in ((plan, "reason"), (facts, "hidden"), (FORCED, "args")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, field, None)


@pytest.mark.parametrize(
    "unknown",
    [
        "no --model/--hidden: token limits converted with the profile's hidden size",
        "architecture unknown (no --model)",
        "layers unknown (no --model)",
    ],
)
def test_a_named_model_supplies_its_hidden_size_architecture_and_layers(unknown: str) -> None:
    # --model qwen3-32b is a preset (hidden 5120, 64 layers, Qwen3ForCausalLM): the plan must not
    # warn that any of the three is unknown, as it does without a model.
    request = PlanRequest(
        priced_profile(TABLES), tp=2, fallback="nccl", fingerprint=FINGERPRINT, model="qwen3-32b", user_env={}
    )
    plan = plan_from_profile("vllm", FORCED, _offer(Knobs(), "x"), request)
    assert plan.fallback is False
    assert not [note for note in plan.notes if note.startswith(unknown)], plan.notes


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "bogus"}, "unknown VLLM_FLASHINFER_ALLREDUCE_BACKEND 'bogus'"),
        (
            {"VLLM_ALLREDUCE_USE_SYMM_MEM": "yes"},
            "VLLM_ALLREDUCE_USE_SYMM_MEM='yes': vLLM reads it as bool(int",
        ),
    ],
)
def test_the_users_own_env_that_cannot_be_modelled_is_a_fallback_that_says_so(env: dict, why: str) -> None:
    # The launcher's default cannot be priced when the user's own env cannot be routed: the plan is a
    # fallback (here NCCL forced) naming the env var, never a crash of the planner.
    request = PlanRequest(
        priced_profile(TABLES),
        tp=2,
        fallback="nccl",
        fingerprint=FINGERPRINT,
        model="qwen3-32b",
        user_env=env,
    )
    plan = plan_from_profile("vllm", FORCED, _offer(Knobs(), "x"), request)
    assert plan.fallback is True
    assert plan.reason.startswith(f"your own flags or env cannot be modelled: {why}")
    assert (plan.args, dict(plan.env), plan.notes) == (("--nccl",), {"X": "0"}, ("forced",))
