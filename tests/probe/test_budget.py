"""``--budget``: shrink rounds, then the largest sizes, or refuse; never below 15 rounds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topo_gate.probe import MIN_ROUNDS, BudgetTooSmall, ProbeOptions, cpu_node, fit_to_budget, plan_trials
from topo_gate.trials.plan import estimate_seconds


def plans_for(tmp_path, **overrides):
    options = ProbeOptions(out=tmp_path / "p.yaml", hidden=4096, device="cpu", tps=(2, 4), **overrides)
    plans, _ = plan_trials(cpu_node(options.tps), options)
    return plans


def total(plans):
    return sum(estimate_seconds(plan, "cpu") for plan in plans)


def test_a_plan_within_budget_is_untouched(tmp_path):
    plans = plans_for(tmp_path)
    fitted, notes = fit_to_budget(plans, total(plans) + 1, "cpu")
    assert fitted == plans and notes == []


def test_largest_sizes_go_first_and_the_note_says_so(tmp_path):
    plans = plans_for(tmp_path)
    fitted, notes = fit_to_budget(plans, total(plans) * 0.6, "cpu")
    assert total(fitted) <= total(plans) * 0.6
    assert fitted[0].tokens == plans[0].tokens[: len(fitted[0].tokens)]  # a prefix: the small sizes stay
    assert len(fitted[0].tokens) < len(plans[0].tokens)
    assert "larger messages stay NCCL" in notes[-1]


def test_rounds_are_cut_to_15_before_sizes_go(tmp_path):
    plans = plans_for(tmp_path, rounds=40)
    budget = total([replace(p, rounds=MIN_ROUNDS) for p in plans]) + 1
    fitted, notes = fit_to_budget(plans, budget, "cpu")
    assert {p.rounds for p in fitted} == {MIN_ROUNDS}
    assert fitted[0].tokens == plans[0].tokens
    assert notes == [f"rounds cut from 40 to {MIN_ROUNDS} to fit the {budget:g} s budget"]


def test_a_budget_below_the_smallest_useful_probe_is_refused(tmp_path):
    with pytest.raises(BudgetTooSmall, match="smallest useful probe"):
        fit_to_budget(plans_for(tmp_path), 0.5, "cpu")


def test_tp1_is_skipped_with_a_reason(tmp_path):
    options = ProbeOptions(out=tmp_path / "p.yaml", hidden=4096, device="cpu", tps=(1, 2))
    plans, skipped = plan_trials(cpu_node(options.tps), options)
    assert {p.tp for p in plans} == {2}
    assert [s.tp for s in skipped] == [1] and "no all-reduce" in skipped[0].reason
