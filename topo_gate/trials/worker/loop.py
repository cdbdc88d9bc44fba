"""One pattern of a worker session: admit, set up, check, then time every (backend, size) in rounds.

Order of work (every rank walks it in lockstep; each step is a collective or follows one):

1. admission of each backend, voted across ranks (``admission.py``);
2. ``setup`` of the admitted backends, through the session's pool (``pool.py``): a backend the
   session already set up for an earlier pattern (a plain kernel under its ``+rmsnorm`` composite)
   is not set up again;
3. per size, per backend: admission at that size (voted), one call checked against the reference
   (``checks.py``, voted: one rank's wrong answer disqualifies the backend at that size for all);
4. ``timing.Timer.prepare`` for every (backend, size) that passed (CUDA: graph capture);
5. ``rounds`` rounds; each visits every size and, within a size, the backends in an order rotated
   by the round (round r starts at backend r mod n), so drift hits every backend alike; early
   stopping (below) after ``EARLY_ROUNDS`` rounds;
6. size transitions of Lamport-style backends (``transitions.py``): replays right after the calls of
   larger sizes;
7. in-context confirmation (``context.py``): layer-like graphs of every backend that cleared the
   isolated bar at a size, and of the launchers' default paths;
8. the captured graphs checked again (``recheck.py``): fresh inputs with negative zeros, odd token
   counts between the ladder's sizes, each replayed right after the largest size's graph; a wrong
   answer marks the sizes around it ``wrong``;
9. this pattern's result file; its graphs are freed (the backends stay, for the next pattern).

A backend that raises (outside admission) crashes the worker on purpose: its peers may be stuck in a
collective it never entered, so only the runner can recover, by killing the group and relaunching
fresh workers without it. The heartbeat before each step tells the runner whom to blame.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import torch

from topo_gate.trials.backends.base import Backend
from topo_gate.trials.protocol import RANK_RESULT_FORMAT
from topo_gate.trials.worker import admission, checks, context, recheck, transitions
from topo_gate.trials.worker.state import Cell, RankPattern
from topo_gate.trials.worker.timing import make_timer

#: Early stopping: after this many rounds, a backend whose group median at a size is not below
#: LOSER_FACTOR x the baseline's stops being timed there. Not faster than the baseline, it cannot
#: clear a margin of a few percent, and it is no comparator either (a fused kernel is measured
#: against the composites *faster* than the baseline); its remaining rounds would only cost time
#: (on 2x H200 the large sizes' rounds are most of a probe's measuring). Its samples so far stay in
#: the evidence, and decide judges it on them. A stopped loser enters no layer graph and no
#: transition there -- unless it is a launcher's default path (``plan.context_backends``): a default
#: that loses to NCCL is exactly what a plan must be able to price, in context too.
EARLY_ROUNDS = 5
LOSER_FACTOR = 1.0


class PatternTrials(RankPattern):
    """One plan (one pattern) on this rank: the order of work (module docstring) over the state
    its phases share (``state.py``)."""

    def run(self) -> None:
        started = time.monotonic()
        self.backends = self._admit()
        self.clock.mark("admit")
        for name, backend in self.backends.items():
            self.beat("setup", name)
            self.pool.setup(backend)
        self.buffers = {t: checks.make_buffers(self.ctx, t, self.plan.seed) for t in self.plan.tokens}
        self.clock.mark("setup")
        self.heartbeat.steps = self.heartbeat.step + len(self.backends) * len(self.plan.tokens) * (
            3 + self.plan.rounds
        )
        self.passed = self._check_all()
        self.clock.mark("check")
        self.heartbeat.steps = self.heartbeat.step + len(self.passed) * (2 + self.plan.rounds)
        self.timer = make_timer(self.ctx.device, self.ctx.group, self.plan.graph_calls, self.plan.warmup)
        self._capture()
        self.clock.mark("capture")
        self._time()
        self.clock.mark("measure")
        transitions.time_transitions(self)
        self.clock.mark("transition")
        context.time_layers(self)
        self.clock.mark("context")
        recheck.recheck_graphs(self)
        self.clock.mark("recheck")
        self.wall_s = round(time.monotonic() - started, 3)

    def release(self) -> None:
        """Free this pattern's graphs: every graph must go before the backends close (NCCL's
        communicator destroy waits for the graphs that captured its kernels; seen: a 120 s hang in
        close of nccl on 2x H200), and the next pattern needs the memory."""
        self.measurables.clear()
        self.predecessors.clear()
        self.passed.clear()
        self.buffers.clear()
        gc.collect()
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)

    def _admit(self) -> dict[str, Backend]:
        admitted: dict[str, Backend] = {}
        for name in self.plan.backends:
            self.beat("admit", name)
            backend, local_reason = self.pool.admit(name, self.ctx)
            reason = admission.agreed_reason(admission.gather(local_reason, self.ctx))
            if reason is None and backend is not None:
                admitted[name] = backend
                self.statuses[name] = {"status": "ok", "reason": None}
            else:
                self.statuses[name] = {"status": "unavailable", "reason": reason}
        return admitted

    def _check_all(self) -> dict[tuple[str, int], Any]:
        """Check every (backend, size); return the calls of those that passed, keyed (name, tokens)."""
        passed: dict[tuple[str, int], Any] = {}
        for tokens in self.plan.tokens:
            for name in self.backends:
                self.beat("check", name, tokens)
                cell = Cell(name, tokens)
                self.cells.append(cell)
                reason = self.agreed_size_reason(name, tokens)
                if reason is not None:
                    cell.status, cell.reason = "unavailable", reason
                    continue
                call = self.call(name, tokens, self.buffers[tokens])
                cell.max_abs_err, wrong = self.vote(checks.check(call, self.buffers[tokens], self.ctx))
                if wrong:
                    rank, verdict = wrong
                    cell.status, cell.reason = "wrong", f"wrong answer on rank {rank}: {verdict.describe()}"
                    self.mark_wrong(name, tokens, cell.reason)
                else:
                    passed[(name, tokens)] = call
        return passed

    def _capture(self) -> None:
        for (name, tokens), call in self.passed.items():
            self.beat("prepare", name, tokens)
            self.measurables[(name, tokens)] = self.timer.prepare(
                call, after_capture=self.backends[name].after_capture
            )

    def _time(self) -> None:
        active = {
            tokens: [name for name in self.plan.backends if (name, tokens) in self.measurables]
            for tokens in self.plan.tokens
        }
        for round_index in range(self.plan.rounds):
            if round_index == EARLY_ROUNDS:
                self._stop_clear_losers(active)
            for tokens in self.plan.tokens:
                for name in context.rotated(active[tokens], round_index) if active[tokens] else ():
                    self.beat("measure", name, tokens, round_index)
                    sample = self.timer.measure(self.measurables[(name, tokens)])
                    cell = self.cell(name, tokens)
                    cell.per_call_us.append(sample.per_call_us)
                    cell.skew_us.append(sample.skew_us)

    def _stop_clear_losers(self, active: dict[int, list[str]]) -> None:
        medians = self.group_medians()
        baseline = self.plan.backends[0]
        for tokens, names in active.items():
            base = medians.get((baseline, tokens))
            if base is None:
                continue
            for name in [n for n in names if n != baseline and medians[(n, tokens)] >= LOSER_FACTOR * base]:
                names.remove(name)
                self.cell(name, tokens).stopped_early = True

    def result(self) -> dict[str, Any]:
        return {
            "format": RANK_RESULT_FORMAT,
            "rank": self.ctx.rank,
            "world_size": self.ctx.world_size,
            "pattern": self.plan.pattern,
            "backends": self.statuses,
            "results": [cell.__dict__ for cell in self.cells],
            "context": self.context,
            "graph_checks": self.graph_checks,
            "phases_s": self.clock.phases,
            "wall_s": self.wall_s,
        }
