"""``--budget``: the work sized to fit before trials start, and what was left out, in the evidence.

Before the trials, ``fit_to_budget`` shrinks the sessions until the planner's estimate
(``trials.cost``) fits, in this order, each step only while it is still over:

1. rounds down to MIN_ROUNDS (15, never fewer);
2. size transitions timed after the largest size only (not after the smaller ones of the grid):
   decide's charge stays measured, a planner's finer one is lost;
3. the largest message sizes, one at a time: they cost the most and matter least (prefill-sized
   messages, where NCCL usually wins anyway); an unmeasured size is NCCL, so shrinking never enables
   anything;
4. still over: ``BudgetTooSmall``.

While the trials run, the budget is a deadline: a session starts only while budget remains (the
first always does), and a worker group past it starts no further pattern (the first of an attempt
always runs). Everything left out, before or during the run, is a ``Dropped`` record (evidence
``budget.dropped``) and a note in the summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from topo_gate._units import human_bytes
from topo_gate.probe.options import MIN_ROUNDS, BudgetTooSmall
from topo_gate.trials.cost import estimate_seconds
from topo_gate.trials.plan import SessionPlan, TrialPlan, with_tokens

WHOLE_RUN = "the whole run, NCCL there (unmeasured)"


@dataclass(frozen=True)
class Dropped:
    """One thing left out of one run (TP size, pattern) to honour the budget."""

    tp: int
    pattern: str
    what: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "pattern": self.pattern, "what": self.what, "reason": self.reason}


def total_seconds(sessions: Sequence[SessionPlan], device: str) -> float:
    return sum(estimate_seconds(session, device) for session in sessions)


def fit_to_budget(
    sessions: Sequence[SessionPlan], budget_s: float | None, device: str
) -> tuple[list[SessionPlan], list[Dropped]]:
    """The sessions shrunk to fit ``budget_s`` (module docstring), and what each step dropped."""
    sessions = list(sessions)
    if budget_s is None or not sessions:
        return sessions, []
    estimate = total_seconds(sessions, device)
    if estimate <= budget_s:
        return sessions, []
    reason = f"to fit the {budget_s:g} s budget (the planner's estimate was {estimate:.0f} s)"
    dropped: list[Dropped] = []

    def over() -> bool:
        return total_seconds(sessions, device) > budget_s

    if any(plan.rounds > MIN_ROUNDS for session in sessions for plan in session.plans):
        dropped += [
            Dropped(plan.tp, plan.pattern, f"rounds {plan.rounds} -> {MIN_ROUNDS}", reason)
            for plan in _plans(sessions)
            if plan.rounds > MIN_ROUNDS
        ]
        sessions = _each(sessions, lambda plan: replace(plan, rounds=min(plan.rounds, MIN_ROUNDS)))
    if over() and any(_finer_transitions(plan) for plan in _plans(sessions)):
        dropped += [
            Dropped(plan.tp, plan.pattern, "size transitions after sizes below the largest", reason)
            for plan in _plans(sessions)
            if _finer_transitions(plan)
        ]
        sessions = _each(sessions, lambda plan: replace(plan, after_tokens=plan.tokens[-1:]))
    ladders = {(plan.tp, plan.pattern): plan.tokens for plan in _plans(sessions)}
    while over() and all(len(plan.tokens) > 1 for plan in _plans(sessions)):
        sessions = _each(sessions, lambda plan: with_tokens(plan, plan.tokens[:-1]))
    if over():
        smallest = min(plan.tokens[0] for plan in _plans(sessions))
        raise BudgetTooSmall(
            f"the smallest useful probe ({MIN_ROUNDS} rounds, {smallest} token) needs about "
            f"{total_seconds(sessions, device):.0f} s, more than the {budget_s:g} s budget"
        )
    for plan in _plans(sessions):
        full = ladders[(plan.tp, plan.pattern)]
        if plan.tokens != full:
            kept = plan.tokens[-1]
            dropped.append(
                Dropped(
                    plan.tp,
                    plan.pattern,
                    f"sizes above {kept} tokens ({human_bytes(plan.nbytes(kept))}) up to {full[-1]}, "
                    "NCCL there (unmeasured)",
                    reason,
                )  # fmt: skip
            )
    return sessions, dropped


def duration_words(seconds: float) -> str:
    """``"8 s"``, ``"2.5 min"``, ``"1.2 h"``: an estimate in the unit a person reads it in."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def dropped_notes(dropped: Iterable[Dropped]) -> list[str]:
    """The summary's words for ``dropped``: one note per (what, reason), naming the runs."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for item in dropped:
        grouped.setdefault((item.what, item.reason), []).append(f"TP{item.tp} {item.pattern}")
    return [f"--budget: {what} for {', '.join(runs)}: {reason}" for (what, reason), runs in grouped.items()]


def _finer_transitions(plan: TrialPlan) -> bool:
    return bool(set(plan.after_tokens or ()) - {plan.tokens[-1]})


def _plans(sessions: Sequence[SessionPlan]) -> list[TrialPlan]:
    return [plan for session in sessions for plan in session.plans]


def _each(sessions: Sequence[SessionPlan], change: Any) -> list[SessionPlan]:
    return [replace(session, plans=tuple(change(plan) for plan in session.plans)) for session in sessions]
