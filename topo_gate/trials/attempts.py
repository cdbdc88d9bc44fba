"""What the end of each attempt means for a session's patterns: the runner's failure rules. Stdlib only.

The runner (``runner.py``) starts an attempt for the patterns not yet done and hands its outcome
here: the patterns whose result files every rank wrote are measured (``PatternAttempts.finish``), and
a fault is settled by the rules in ``runner``'s docstring (``settle``): a backend is blamed in its
own pattern, a fault outside any backend is retried once (on a fresh port for a rendezvous that
could not bind) and then fails its pattern, or every pattern not done when it came before any
pattern began.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topo_gate.trials.cost import PHASES
from topo_gate.trials.plan import SessionPlan, TrialPlan
from topo_gate.trials.results import (
    BackendOutcome,
    PlanResult,
    fault_cell,
    graph_checks,
    merge_context,
    merge_rank_results,
    slowest_phases,
)

PORT_TRIES = 3
INFRA_RETRIES = 1


@dataclass(frozen=True)
class Fault:
    """Why an attempt was killed, and the pattern and backend (and size) in flight, if any."""

    status: str  # "failed" | "timeout"
    reason: str
    backend: str | None
    tokens: int | None
    #: The rendezvous could not bind or reach its port (a relaunch on a fresh port may succeed).
    port_failure: bool = False
    pattern: str | None = None


@dataclass
class PatternAttempts:
    """The runner's record of one pattern across the session's attempts."""

    plan: TrialPlan
    remaining: list[str]
    outcomes: dict[str, BackendOutcome] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    retries: list[str] = field(default_factory=list)
    context: list[dict[str, Any]] = field(default_factory=list)
    graph_checks: list[dict[str, Any]] = field(default_factory=list)
    phases_s: dict[str, float] = field(default_factory=dict)
    wall_s: float | None = None
    attempts: int = 0
    infra_retries: int = 0
    error: str | None = None
    done: bool = False

    def finish(self, rank_results: Sequence[Mapping[str, Any]]) -> None:
        backends, cells = merge_rank_results(self.plan, rank_results)
        self.outcomes.update(backends)
        self.results.extend(cells)
        self.context = merge_context(self.plan, rank_results)
        self.graph_checks = graph_checks(self.plan, rank_results)
        self.phases_s = slowest_phases(rank_results)
        self.wall_s = max(result["wall_s"] for result in rank_results)
        self.done = True

    def fail(self, reason: str) -> None:
        self.error = reason
        for name in self.remaining:
            self.outcomes[name] = BackendOutcome("failed", f"workers failed before it ran: {reason}")
        self.done = True

    def blame(self, fault: Fault) -> None:
        assert fault.backend is not None
        self.outcomes[fault.backend] = BackendOutcome(fault.status, fault.reason)
        if fault.tokens is not None:
            self.results.append(
                fault_cell(self.plan, fault.backend, fault.tokens, fault.status, fault.reason)
            )
        self.remaining.remove(fault.backend)
        self.done = not self.remaining


def settle(
    fault: Fault,
    attempt: int,
    patterns: Mapping[str, PatternAttempts],
    left: Sequence[PatternAttempts],
    session_retries: int,
    port_tries: int,
) -> int:
    """Apply the module docstring's rules to ``fault``; return the session-level retries spent."""
    state = patterns.get(fault.pattern) if fault.pattern is not None else None
    if state is not None and not state.done and fault.backend in state.remaining:
        state.blame(fault)
        return session_retries
    if fault.port_failure and port_tries < PORT_TRIES:
        for pending in left:
            pending.retries.append(f"attempt {attempt}: {fault.reason}; relaunched on a fresh port")
        return session_retries
    if state is not None and not state.done:  # outside any backend, within this pattern
        if not fault.port_failure and state.infra_retries < INFRA_RETRIES:
            state.infra_retries += 1
            state.retries.append(f"attempt {attempt}: {fault.reason}; relaunched once")
        else:
            state.fail(fault.reason)
        return session_retries
    if not fault.port_failure and session_retries < INFRA_RETRIES:
        for pending in left:
            pending.retries.append(f"attempt {attempt}: {fault.reason}; relaunched once")
        return session_retries + 1
    for pending in left:
        pending.fail(fault.reason)
    return session_retries


def add_phases(total: dict[str, float], phases: Mapping[str, float]) -> None:
    """Add ``phases`` into ``total``, keeping the worker's phase order (``cost.PHASES``)."""
    for phase, seconds in phases.items():
        total[phase] = round(total.get(phase, 0.0) + seconds, 3)
    order = {phase: index for index, phase in enumerate(PHASES)}
    ordered = sorted(total.items(), key=lambda item: order.get(item[0], len(order)))
    total.clear()
    total.update(ordered)


def plan_results(
    plan: SessionPlan,
    patterns: Mapping[str, PatternAttempts],
    dropped: Mapping[str, str],
    software: Mapping[str, Any],
    wall_s: float,
    phases: Mapping[str, float],
) -> list[PlanResult]:
    """One PlanResult per pattern the session measured or failed (a pattern dropped for the
    deadline has none). A session of one pattern: the run is the session (its wall and phases)."""
    shared = len(plan.plans) > 1
    record = {
        "id": f"tp{plan.tp}-{plan.group_class}-{'-'.join(map(str, plan.group))}",
        "patterns": list(plan.patterns),
        "wall_s": wall_s,
        "phases_s": dict(phases),
    }
    out = []
    for pattern, state in patterns.items():
        if pattern in dropped:
            continue
        order = {name: index for index, name in enumerate(state.plan.backends)}
        state.results.sort(key=lambda cell: (order[cell["backend"]], cell["tokens"]))
        out.append(
            PlanResult(
                state.plan,
                {name: state.outcomes[name] for name in state.plan.backends},
                state.results,
                attempts=state.attempts,
                error=state.error,
                software=dict(software),
                retries=state.retries,
                context=state.context,
                graph_checks=state.graph_checks,
                wall_s=state.wall_s if shared else wall_s,
                phases_s=state.phases_s if shared else dict(phases),
                session=record if shared else None,
            )
        )
    return out
