"""``--budget`` before the trials: rounds to 15, transitions after the largest size only, then the
largest sizes, or refuse; every step recorded as dropped with its reason. Pure (the cost model)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topo_gate.probe import (
    MIN_ROUNDS,
    BudgetTooSmall,
    ProbeOptions,
    cpu_node,
    dropped_notes,
    fit_to_budget,
    plan_trials,
)
from topo_gate.probe.budget import total_seconds


def sessions_for(tmp_path, **overrides):
    options = ProbeOptions(out=tmp_path / "p.yaml", hidden=4096, device="cpu", tps=(2, 4), **overrides)
    sessions, _ = plan_trials(cpu_node(options.tps), options)
    return sessions


def plans(sessions):
    return [plan for session in sessions for plan in session.plans]


def test_a_probe_within_budget_is_untouched(tmp_path):
    sessions = sessions_for(tmp_path)
    fitted, dropped = fit_to_budget(sessions, total_seconds(sessions, "cpu") + 1, "cpu")
    assert fitted == sessions and dropped == []


def test_every_pattern_of_a_group_is_one_session(tmp_path):
    sessions = sessions_for(tmp_path)
    assert [(s.tp, s.patterns) for s in sessions] == [(2, ("allreduce", "allreduce_rmsnorm"))] + [
        (4, ("allreduce", "allreduce_rmsnorm"))
    ]


def test_largest_sizes_go_after_the_finer_transitions_and_each_drop_says_so(tmp_path):
    sessions = sessions_for(tmp_path)
    budget = total_seconds(sessions, "cpu") * 0.6
    fitted, dropped = fit_to_budget(sessions, budget, "cpu")
    assert total_seconds(fitted, "cpu") <= budget
    before, after = plans(sessions), plans(fitted)
    assert after[0].tokens == before[0].tokens[: len(after[0].tokens)]  # a prefix: the small sizes stay
    assert len(after[0].tokens) < len(before[0].tokens)
    assert {p.after_tokens for p in after} == {after[0].tokens[-1:]}  # transitions after the largest only
    whats = [(d.tp, d.pattern, d.what.split(" (")[0]) for d in dropped]
    for plan in before:
        assert (plan.tp, plan.pattern, "size transitions after sizes below the largest") in whats
        assert (plan.tp, plan.pattern, f"sizes above {after[0].tokens[-1]} tokens") in whats
    assert all(f"to fit the {budget:g} s budget" in d.reason for d in dropped)
    notes = dropped_notes(dropped)
    assert len(notes) == 2 and "NCCL there (unmeasured)" in notes[-1] and "TP4 allreduce_rmsnorm" in notes[-1]


def test_rounds_are_cut_to_15_before_anything_else_goes(tmp_path):
    sessions = sessions_for(tmp_path, rounds=40)
    budget = total_seconds(
        [replace(s, plans=tuple(replace(p, rounds=MIN_ROUNDS) for p in s.plans)) for s in sessions], "cpu"
    )
    fitted, dropped = fit_to_budget(sessions, budget + 0.01, "cpu")
    assert {p.rounds for p in plans(fitted)} == {MIN_ROUNDS}
    assert [p.tokens for p in plans(fitted)] == [p.tokens for p in plans(sessions)]
    assert [p.after_tokens for p in plans(fitted)] == [p.after_tokens for p in plans(sessions)]
    assert {d.what for d in dropped} == {f"rounds 40 -> {MIN_ROUNDS}"} and len(dropped) == 4
    assert dropped[0].to_dict() == {"tp": 2, "pattern": "allreduce", "what": "rounds 40 -> 15",
                                    "reason": dropped[0].reason}  # fmt: skip


def test_a_budget_below_the_smallest_useful_probe_is_refused(tmp_path):
    with pytest.raises(BudgetTooSmall, match="smallest useful probe"):
        fit_to_budget(sessions_for(tmp_path), 0.5, "cpu")


def test_tp1_is_skipped_with_a_reason(tmp_path):
    options = ProbeOptions(out=tmp_path / "p.yaml", hidden=4096, device="cpu", tps=(1, 2))
    sessions, skipped = plan_trials(cpu_node(options.tps), options)
    assert {s.tp for s in sessions} == {2}
    assert [s.tp for s in skipped] == [1] and "no all-reduce" in skipped[0].reason
