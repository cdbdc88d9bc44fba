"""What every planner shares: reading both patterns of a profile, the fail-closed plan, and the words.

Run through the real reader on sealed profiles (launcher_profiles.py); each test checks the value a
planner builds on, so that a planner cannot be handed a wrong ladder, capability or reason.
"""

from __future__ import annotations

import pytest
from launcher_profiles import FINGERPRINT, build_profile

from topo_gate.launchers.common import (
    NOT_REQUESTED,
    LaunchPlanParts,
    fallback_plan,
    follow_profile,
    mib,
    node_capability,
    read_profile,
)

LADDERS = {
    "allreduce": [[8 << 20, "trtllm_oneshot"], [None, "nccl"]],
    "allreduce_rmsnorm": [[4 << 20, "trtllm_fused_oneshot"], [None, "nccl"]],
}
FORCED = LaunchPlanParts(args=("--nccl",), env={"X": "0"}, notes=("forced",), config={"k": "v"})


def read(profile, **kwargs):
    return read_profile(profile, tp=2, gpus=None, strict=False, fingerprint=FINGERPRINT, **kwargs)


def test_both_ladders_and_the_trial_shape_are_read() -> None:
    reading = read(build_profile(LADDERS, hidden=7168, dtype="float32", sm="10.0"))
    assert reading.fallback_reason is None
    assert reading.ladders == {
        "allreduce": ((8 << 20, frozenset({"trtllm_oneshot"})), (None, frozenset())),
        "allreduce_rmsnorm": ((4 << 20, frozenset({"trtllm_fused_oneshot"})), (None, frozenset())),
    }
    assert (reading.hidden, reading.itemsize, reading.capability) == (7168, 4, (10, 0))


@pytest.mark.parametrize(("dtype", "itemsize"), [("bfloat16", 2), ("float16", 2), ("float32", 4)])
def test_itemsize_of_each_trial_dtype(dtype: str, itemsize: int) -> None:
    assert read(build_profile(LADDERS, dtype=dtype)).itemsize == itemsize


def test_a_pattern_left_out_is_nccl_everywhere_and_said_once() -> None:
    reading = read(build_profile(LADDERS), patterns=("allreduce",))
    assert reading.ladders["allreduce_rmsnorm"] == NOT_REQUESTED == ((None, frozenset()),)
    assert reading.ladders["allreduce"][0] == (8 << 20, frozenset({"trtllm_oneshot"}))
    assert [w for w in reading.warnings if "not requested" in w] == [
        "allreduce_rmsnorm not requested (--pattern): every path serving it stays off"
    ]


@pytest.mark.parametrize(
    ("patterns", "reason"),
    [
        (("allreduce", "bogus"), "unknown pattern(s) ['bogus'] (known: allreduce, allreduce_rmsnorm)"),
        ((), "no pattern requested (known: allreduce, allreduce_rmsnorm)"),
    ],
)
def test_unknown_or_no_patterns_fall_back(patterns, reason: str) -> None:
    reading = read(build_profile(LADDERS), patterns=patterns)
    assert (reading.fallback_reason, reading.ladders) == (reason, {})


def test_a_fallback_names_the_pattern_and_keeps_the_warnings(tmp_path) -> None:
    only_fused = build_profile({"allreduce_rmsnorm": LADDERS["allreduce_rmsnorm"]})
    reading = read(only_fused)
    assert reading.fallback_reason.startswith("allreduce: the profile has no decision for TP 2, allreduce")
    assert reading.ladders == {}
    missing = read(tmp_path / "absent.yaml")
    assert missing.fallback_reason.startswith(f"allreduce: profile {tmp_path / 'absent.yaml'} unusable")


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


@pytest.mark.parametrize(
    ("nbytes", "words"),
    [(None, "unbounded"), (1 << 20, "1 MiB"), (3 << 19, "1.5 MiB"), ((1 << 20) - 1024, "1023 KiB"),
     (512 * 1024, "512 KiB"), (1536, "1.5 KiB"), (0, "0 KiB")],
)  # fmt: skip
def test_mib(nbytes, words: str) -> None:
    assert mib(nbytes) == words


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


def test_launcher_default_emits_nothing() -> None:
    plan = fallback_plan("vllm", "9.9", "why", fallback="launcher-default", forced=FORCED, warnings=("w",))
    assert (plan.args, dict(plan.env), dict(plan.config), plan.fallback) == ((), {}, {}, True)
    assert plan.notes == (
        "w",
        "fallback launcher-default: the launcher's own rules decide, unmeasured on this node",
    )


def test_following_a_profile_puts_the_readers_warnings_before_the_mapping_notes(monkeypatch) -> None:
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)

    def mapping(reading, tp):
        assert tp == 2 and reading.hidden == 4096
        return LaunchPlanParts(args=("--a",), env={"E": "1"}, notes=("mapped",), config={"c": 1})

    plan = follow_profile(
        "sglang", FORCED, mapping, build_profile(LADDERS), tp=2, gpus=None, strict=False,
        fallback="nccl", fingerprint=FINGERPRINT, patterns=("allreduce",),
    )  # fmt: skip
    assert (plan.fallback, plan.reason, plan.launcher_version_pinned) == (
        False,
        "following the profile",
        "0.5.23",
    )
    assert (plan.args, dict(plan.env), dict(plan.config)) == (("--a",), {"E": "1"}, {"c": 1})
    assert plan.notes == (
        "allreduce_rmsnorm not requested (--pattern): every path serving it stays off",
        "no --model/--hidden: token limits converted with the profile's hidden size 4096; a wider served "
        "model sends larger messages at the same token counts",
        "mapped",
    )
    assert plan.to_dict()["notes"] == list(plan.notes) and plan.to_dict()["version"] == "0.5.23"


def test_a_bad_fallback_mode_is_refused_before_anything_is_read() -> None:
    with pytest.raises(ValueError, match="fallback must be one of nccl, launcher-default, not 'auto'"):
        follow_profile(
            "vllm", FORCED, lambda r, t: FORCED, "absent.yaml", tp=2, gpus=None, strict=False,
            fallback="auto", fingerprint=None, patterns=("allreduce",),
        )  # fmt: skip


def test_only_the_fused_pattern_requested_still_reads_it() -> None:
    reading = read(build_profile(LADDERS), patterns=("allreduce_rmsnorm",))
    assert reading.ladders["allreduce"] == NOT_REQUESTED
    assert reading.ladders["allreduce_rmsnorm"][0] == (4 << 20, frozenset({"trtllm_fused_oneshot"}))


def test_plans_readings_and_parts_cannot_be_changed_after_the_fact() -> None:
    import dataclasses

    plan = fallback_plan("vllm", "9.9", "why", fallback="nccl", forced=FORCED)
    reading = read(build_profile(LADDERS))
    for frozen, field in ((plan, "reason"), (reading, "hidden"), (FORCED, "args")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, field, None)
