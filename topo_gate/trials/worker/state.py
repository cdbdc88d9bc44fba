"""What the phases of one pattern share on this rank: its plan and backends, the calls that passed
their check, the captured graphs, and the records (``Cell``) they fill in.

The worker loop (``loop.py``) runs the phases in order; the later ones (``transitions.py``,
``context.py``, ``recheck.py``) each take this state and add to it, and the helpers here are what
more than one phase needs: heartbeats, a backend's call at a size (with its injected fault), the
ranks' votes, and the group medians, with decide's transition charge where asked.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from topo_gate.evidence.bar import STEP_CALLS, transition_cost_us
from topo_gate.trials.backends.base import Backend, BackendContext, TrialBuffers
from topo_gate.trials.plan import TrialPlan
from topo_gate.trials.protocol import Heartbeat
from topo_gate.trials.worker import admission, checks, faults
from topo_gate.trials.worker.pool import BackendPool


@dataclass
class Cell:
    """This rank's record of one (backend, size)."""

    backend: str
    tokens: int
    status: str = "ok"
    reason: str | None = None
    max_abs_err: float | None = None
    per_call_us: list[float] = field(default_factory=list)
    skew_us: list[float | None] = field(default_factory=list)
    #: Per larger size (tokens, ascending), the per-call latency of replays that ran right after its
    #: calls (Lamport-style backends): ``{"tokens": L, "per_call_us": [...]}``.
    after: list[dict[str, Any]] = field(default_factory=list)
    #: Stopped after ``loop.EARLY_ROUNDS`` as a clear loser: it cannot be chosen at this size.
    stopped_early: bool = False


def charge_us(cell: Cell, graph_calls: int) -> float:
    """Decide's rule 5 on this rank's samples (``evidence.bar``): the extra time of one replay right
    after the largest size over a steady one, spread over STEP_CALLS calls (0 when not measured or
    not slower)."""
    after = cell.after[-1]["per_call_us"] if cell.after else []
    if not after or not cell.per_call_us:
        return 0.0
    return transition_cost_us(cell.per_call_us, after, graph_calls) / STEP_CALLS


class PhaseClock:
    """Seconds spent in each phase of a worker's life, for the evidence (``phases_s``): what a sweep's
    wall time is made of -- start-up and setup versus the measurement itself."""

    def __init__(self, started: float) -> None:
        self._last = started
        self.phases: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = round(self.phases.get(phase, 0.0) + now - self._last, 3)
        self._last = now


class RankPattern:
    """One plan (one pattern) on this rank, within a session that owns the backends (``pool``)."""

    def __init__(
        self, plan: TrialPlan, ctx: BackendContext, pool: BackendPool, heartbeat: Heartbeat, clock: PhaseClock
    ) -> None:
        self.plan = plan
        self.ctx = ctx
        self.pool = pool
        self.heartbeat = heartbeat
        self.clock = clock
        self.statuses: dict[str, dict[str, str | None]] = {}
        self.cells: list[Cell] = []
        self.context: list[dict[str, Any]] = []
        self.graph_checks: list[dict[str, Any]] = []
        self.backends: dict[str, Backend] = {}
        self.buffers: dict[int, TrialBuffers] = {}
        self.passed: dict[tuple[str, int], Any] = {}
        self.measurables: dict[tuple[str, int], Any] = {}
        #: Per backend, a graph of transitions.PREDECESSOR_CALLS calls of its largest timed size: what
        #: the transitions and the rechecks replay right before a smaller size.
        self.predecessors: dict[str, Any] = {}
        self.timer: Any = None
        self.wall_s = 0.0

    def beat(
        self, phase: str, backend: str | None, tokens: int | None = None, round: int | None = None
    ) -> None:
        self.heartbeat.step += phase in ("check", "prepare", "measure", "recheck")
        self.heartbeat.beat(phase, backend, tokens, round)

    def is_default_path(self, name: str) -> bool:
        return name in self.plan.context_backends

    def call(self, name: str, tokens: int, buffers: TrialBuffers) -> Any:
        call = self.backends[name].prepare(tokens, buffers)
        if name in self.plan.faults:
            call = faults.inject(
                self.plan.faults[name], call, self.ctx.rank, buffers, backend=name, tokens=tokens
            )
        return call

    def vote(self, verdict: checks.Verdict) -> tuple[float | None, tuple[int, checks.Verdict] | None]:
        """Every rank's verdict: (max error over ranks, None if any NaN; the first wrong rank's)."""
        verdicts = [checks.Verdict.from_json(v) for v in admission.gather(verdict.to_json(), self.ctx)]
        errors = [v.max_abs_err for v in verdicts if v.max_abs_err is not None]
        max_err = max(errors) if len(errors) == len(verdicts) else None
        wrong = [(rank, v) for rank, v in enumerate(verdicts) if not v.ok]
        return max_err, (wrong[0] if wrong else None)

    def agreed_size_reason(self, name: str, tokens: int) -> str | None:
        """Admission of ``name`` at ``tokens``, voted."""
        local = self.backends[name].size_unavailable(tokens)
        return admission.agreed_reason(admission.gather(local, self.ctx))

    def mark_wrong(self, name: str, tokens: int, reason: str) -> None:
        if self.statuses[name]["status"] == "ok":
            self.statuses[name] = {"status": "wrong", "reason": f"at {tokens} tokens: {reason}"}

    def cell(self, name: str, tokens: int) -> Cell:
        return next(cell for cell in self.cells if cell.backend == name and cell.tokens == tokens)

    def timed_sizes(self, name: str) -> list[int]:
        return [t for t in self.plan.tokens if (name, t) in self.measurables]

    def group_medians(self, charge: bool = False) -> dict[tuple[str, int], float]:
        """Per (backend, size) timed so far, the slowest rank's median per call (a collective);
        ``charge``: plus the transition charge decide applies (``charge_us``)."""
        local = {}
        for cell in self.cells:
            if cell.per_call_us:
                extra = charge_us(cell, self.plan.graph_calls) if charge else 0.0
                local[f"{cell.backend}@{cell.tokens}"] = statistics.median(cell.per_call_us) + extra
        gathered = admission.gather(local, self.ctx)
        medians = {}
        for key in local:
            name, tokens = key.rsplit("@", 1)
            medians[(name, int(tokens))] = max(ranks[key] for ranks in gathered)
        return medians
