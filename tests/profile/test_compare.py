"""diff_decisions: size ranges that changed backend between two profiles."""

from __future__ import annotations

from topo_gate.profile import Profile
from topo_gate.profile.compare import BackendChange, diff_decisions

MiB = 1024 * 1024


def _profile(example_data: dict, rules_by_pattern: dict[str, list[dict]]) -> Profile:
    decisions = [
        {"tp": 2, "group": [0, 1], "group_class": "nvswitch", "pattern": pattern, "rules": rules}
        for pattern, rules in rules_by_pattern.items()
    ]
    return Profile.from_dict({**example_data, "decisions": decisions})


def _rule(max_bytes, backend="nccl"):
    measured = {"speedup": 2.0, "ci": [1.9, 2.1]} if backend != "nccl" else {}
    return {"max_bytes": max_bytes, "backend": backend, **measured}


def test_identical_profiles_have_no_changes(example_data):
    profile = Profile.from_dict(example_data)
    assert diff_decisions(profile, profile) == []


def test_a_moved_threshold_is_the_range_between_the_thresholds(example_data):
    before = _profile(example_data, {"allreduce": [_rule(8 * MiB, "trtllm_oneshot"), _rule(None)]})
    after = _profile(example_data, {"allreduce": [_rule(2 * MiB, "trtllm_oneshot"), _rule(None)]})
    assert diff_decisions(before, after) == [
        BackendChange(2, "allreduce", "nvswitch", 2 * MiB, 8 * MiB, "trtllm_oneshot", "nccl")
    ]


def test_neighbouring_pieces_with_the_same_change_merge(example_data):
    before = _profile(example_data, {"allreduce": [_rule(MiB), _rule(4 * MiB), _rule(None)]})
    after = _profile(example_data, {"allreduce": [_rule(2 * MiB, "symm_mem_oneshot"), _rule(None)]})
    assert diff_decisions(before, after) == [
        BackendChange(2, "allreduce", "nvswitch", 0, 2 * MiB, "nccl", "symm_mem_oneshot")
    ]


def test_a_decision_only_one_side_has_is_nccl_on_the_other(example_data):
    before = _profile(example_data, {"allreduce": [_rule(MiB, "trtllm_oneshot"), _rule(None)]})
    after = _profile(
        example_data,
        {
            "allreduce": [_rule(MiB, "trtllm_oneshot"), _rule(None)],
            "allreduce_rmsnorm": [_rule(MiB, "trtllm_fused_oneshot"), _rule(None)],
        },
    )
    assert diff_decisions(before, after) == [
        BackendChange(
            2,
            "allreduce_rmsnorm",
            "nvswitch",
            0,
            MiB,
            "nccl",
            "trtllm_fused_oneshot",
            "no decision in the first profile",
        )
    ]
    assert diff_decisions(after, before)[0].note == "no decision in the second profile"
