"""The trials of a probe: one worker session per (TP size, GPU group), in order, inside the budget.

Each session runs through ``trials.runner.run_trial_session``; this module adds what the probe as a whole
needs: the budget as a deadline (a session starts only while budget remains, the first always
does, and each session's workers get the wall-clock deadline for their later patterns), and
progress in the planner's estimated seconds, overall and per worker phase.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from topo_gate.probe.budget import WHOLE_RUN, Dropped
from topo_gate.probe.node import NodeFacts
from topo_gate.probe.options import OVERRUN, PhaseProgress, ProbeOptions, ProbeProgress
from topo_gate.trials.cost import COST_MODELS, PHASES, estimate_phases, plan_phases
from topo_gate.trials.plan import SessionPlan
from topo_gate.trials.protocol import Beat
from topo_gate.trials.results import PlanResult
from topo_gate.trials.runner import Progress, run_trial_session

#: Heartbeat phase -> the worker phase (PHASES) whose time it is. Before the first beat: importing.
_PHASE_OF_BEAT = {
    "start": "rendezvous", "begin": "admit", "admit": "admit", "setup": "setup", "check": "check",
    "prepare": "capture", "measure": "measure", "transition": "transition", "context": "context",
    "recheck": "recheck", "close": "close", "done": "close",
}  # fmt: skip


@dataclass(frozen=True)
class Deadline:
    """The budget as the probe's clock sees it (``until``: None without a budget)."""

    clock: Callable[[], float]
    until: float | None
    budget_s: float | None

    def spent(self) -> bool:
        return self.until is not None and self.clock() >= self.until

    def wall_clock(self) -> float | None:
        """The same instant on ``time.time()``, which the workers read."""
        return None if self.until is None else time.time() + (self.until - self.clock())


@dataclass
class SessionsRun:
    results: list[PlanResult] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    phases: tuple[PhaseProgress, ...] = ()  # wall seconds per worker phase against the estimates


def run_sessions(
    sessions: Sequence[SessionPlan],
    facts: NodeFacts,
    options: ProbeOptions,
    *,
    startup_timeout_s: float,
    deadline: Deadline,
    on_progress: Callable[[ProbeProgress], None] | None,
) -> SessionsRun:
    """Every session in order (module docstring); what was measured, and what the budget left out."""
    run = SessionsRun()
    estimates = [estimate_phases(session, options.device) for session in sessions]
    totals = [sum(phases.values()) for phases in estimates]
    progress = _PhaseTimes(deadline.clock, [sum(e[p] for e in estimates) for p in PHASES])
    pace = Pace(deadline.clock)
    with tempfile.TemporaryDirectory(prefix="topo-gate-probe-") as workdir:
        for index, session in enumerate(sessions):
            if index and deadline.spent():
                run.dropped += [
                    Dropped(session.tp, pattern, WHOLE_RUN, _spent_words(deadline))
                    for pattern in session.patterns
                ]
                continue
            done_before, label = sum(totals[:index]), session.label()
            if on_progress is not None:
                on_progress(ProbeProgress(
                    index + 1, len(sessions), label, done_before, sum(totals), "starting", "import",
                    progress.at("import"),
                ))  # fmt: skip

            def relay(
                event: Progress, index: int = index, done_before: float = done_before, label: str = label
            ) -> None:
                if on_progress is None:
                    return
                beat, fault = event.beat, event.fault
                detail = (
                    fault.reason if fault is not None else (beat.where() if beat is not None else "starting")
                )
                if beat is not None and beat.pattern is not None and fault is None:
                    detail = f"{beat.pattern}: {detail}"
                phase = _PHASE_OF_BEAT.get(beat.phase, "import") if beat is not None else "import"
                done = done_before + _done_in_session(sessions[index], estimates[index], beat, options.device)
                on_progress(ProbeProgress(
                    index + 1, len(sessions), label, done, sum(totals), detail, phase, progress.at(phase),
                    pace.at(phase, done, beat.pattern if beat is not None else None),
                ))  # fmt: skip

            result = run_trial_session(
                SessionPlan(session.plans, deadline.wall_clock()),
                device=options.device,
                cuda_devices=_cuda_devices(facts, session.group) if options.device == "cuda" else (),
                timeout_s=options.step_timeout_s,
                workdir=Path(workdir) / f"session-{index + 1}",
                on_progress=relay,
                startup_timeout_s=startup_timeout_s,
            )
            run.results += result.runs
            # The workers' own words (the deadline had passed) say the same as the budget's.
            run.dropped += [
                Dropped(session.tp, pattern, WHOLE_RUN, _spent_words(deadline)) for pattern in result.dropped
            ]
            if on_progress is not None:
                on_progress(ProbeProgress(
                    index + 1, len(sessions), label, done_before + totals[index], sum(totals), "done", "close",
                    progress.at("close"), pace.at("close", done_before + totals[index]),
                ))  # fmt: skip
    run.phases = progress.totals()
    return run


class Pace:
    """The planner's estimate re-fitted from the rounds already measured: wall seconds per estimated
    second of work since the first heartbeat of a timed round of the pattern in flight. Start-up
    (imports, rendezvous) is a one-off the cost model prices well and is left out; the timed rounds
    are what a loaded or slower machine stretches (a CPU probe on 2 shared cores: 20-30x the idle
    machine's estimate), and not alike for every pattern: the fused pattern's rounds stretch more than
    the plain one's (a fit from the plain rounds read 4.5x low once both ran), so a new pattern starts
    a new fit."""

    MIN_WALL_S = 1.0  # less than this after the anchor says nothing yet

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._anchor: tuple[float, float, str | None] | None = None
        self._last: float | None = None

    def at(self, phase: str, done_s: float, pattern: str | None = None) -> float | None:
        """The pace now (the last fit while the new pattern's is too young to say), or None while
        nothing was timed long enough to say."""
        now = self._clock()
        if phase == "measure" and (self._anchor is None or pattern != self._anchor[2]):
            self._anchor = (now, done_s, pattern)
            return self._last
        if self._anchor is None:
            return None
        since, done_then, _ = self._anchor
        if done_s <= done_then or now - since < self.MIN_WALL_S:
            return self._last
        self._last = (now - since) / (done_s - done_then)
        return self._last


def overrun_notes(phases: Sequence[PhaseProgress]) -> list[str]:
    """One note naming the phases that took more than OVERRUN times the planner's estimate."""
    over = [phase for phase in phases if phase.overrun]
    if not over:
        return []
    listed = ", ".join(f"{p.name} {p.done_s:.1f} s (estimate {p.estimate_s:.1f} s)" for p in over)
    return [
        f"past {OVERRUN:g}x the planner's estimate: {listed} -- a loaded or slower machine; "
        "--budget stops the work at its deadline"
    ]


def _done_in_session(session: SessionPlan, phases: dict[str, float], beat: Beat | None, device: str) -> float:
    """Estimated seconds of ``session`` done at ``beat``: its start-up, the patterns before the one in
    flight, and that one's share by its heartbeat's step count (a worker counts steps per pattern)."""
    start = phases["import"] + phases["rendezvous"] + phases["setup"]
    if beat is None or beat.pattern is None:
        closing = beat is not None and beat.phase in ("close", "done")
        return sum(phases.values()) - phases["close"] if closing else 0.0
    cost = COST_MODELS[device]
    done = start
    for plan in session.plans:
        own = sum(plan_phases(plan, cost).values())
        if plan.pattern == beat.pattern:
            return done + own * (min(beat.step / beat.steps, 1.0) if beat.steps else 0.0)
        done += own
    return done


class _PhaseTimes:
    """Wall seconds per phase, charged to the phase the latest heartbeat named, on ``clock``."""

    def __init__(self, clock: Callable[[], float], estimates: Sequence[float]) -> None:
        self._clock = clock
        self._estimates = estimates
        self._spent = dict.fromkeys(PHASES, 0.0)
        self._current: str | None = None
        self._since = 0.0

    def at(self, phase: str) -> tuple[PhaseProgress, ...]:
        now = self._clock()
        if self._current is not None:
            self._spent[self._current] += now - self._since
        self._current, self._since = phase, now
        return self.totals()

    def totals(self) -> tuple[PhaseProgress, ...]:
        """The seconds charged so far (up to the latest heartbeat), without reading the clock."""
        return tuple(
            PhaseProgress(name, self._spent[name], est)
            for name, est in zip(PHASES, self._estimates, strict=True)
        )


def _spent_words(deadline: Deadline) -> str:
    return f"the {deadline.budget_s:g} s budget was spent before it started"


def _cuda_devices(facts: NodeFacts, group: Sequence[int]) -> list[str]:
    # UUIDs select the same GPUs whatever CUDA_VISIBLE_DEVICES the user's shell has; NVML indices are
    # PCI bus order, which is what the runner's CUDA_DEVICE_ORDER=PCI_BUS_ID numbers, as a fallback.
    return [facts.uuids.get(index) or str(index) for index in group]
