"""One rank's run: admit, set up, check, then time every (backend, size) in interleaved rounds.

Order of work (every rank walks it in lockstep; each step is a collective or follows one):

1. admission of each backend, voted across ranks (``admission.py``);
2. ``setup`` of the admitted backends;
3. per size, per backend: admission at that size (voted), one call checked against the reference
   (``checks.py``, voted: one rank's wrong answer disqualifies the backend at that size for all);
4. ``timing.Timer.prepare`` for every (backend, size) that passed (CUDA: graph capture);
5. ``rounds`` rounds; each visits every size and, within a size, the backends in an order rotated
   by the round (round r starts at backend r mod n), so drift hits every backend alike; after
   ``EARLY_ROUNDS`` rounds the backends not faster than the baseline stop (group medians);
6. size transitions of Lamport-style backends: replays right after the largest size's calls;
7. in-context confirmation (``context.py``): layer-like graphs of the faster backends per size;
8. the captured graphs checked again (``checks.py``): fresh inputs with negative zeros, odd token
   counts between the ladder's sizes, each replayed right after the largest size's graph; a wrong
   answer marks the sizes around it ``wrong``;
9. ``close``, then this rank's result file.

A backend that raises (outside admission) crashes the worker on purpose: its peers may be stuck in a
collective it never entered, so only the runner can recover, by killing the group and relaunching
fresh workers without it. The heartbeat before each step tells the runner whom to blame.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from topo_gate._atomic import write_atomic
from topo_gate.trials.backends.base import Backend, BackendContext, TrialBuffers
from topo_gate.trials.backends.composite import is_composite
from topo_gate.trials.plan import TrialPlan
from topo_gate.trials.protocol import RANK_RESULT_FORMAT, Heartbeat, result_path
from topo_gate.trials.worker import admission, checks, context, faults
from topo_gate.trials.worker.timing import make_timer


@dataclass
class _Cell:
    """This rank's record of one (backend, size)."""

    backend: str
    tokens: int
    status: str = "ok"
    reason: str | None = None
    max_abs_err: float | None = None
    per_call_us: list[float] = field(default_factory=list)
    skew_us: list[float | None] = field(default_factory=list)
    #: Per-call latency of replays that ran right after the largest size's calls (Lamport backends).
    after_larger_us: list[float] = field(default_factory=list)
    #: Stopped after EARLY_ROUNDS as a clear loser: it cannot be chosen at this size.
    stopped_early: bool = False


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


#: Early stopping: after this many rounds, a backend whose group median at a size is not below
#: LOSER_FACTOR x the baseline's stops being timed there. Not faster than the baseline, it cannot
#: clear a margin of a few percent, and it is no comparator either (a fused kernel is measured
#: against the composites *faster* than the baseline); its remaining rounds would only cost time
#: (on 2x H200 the large sizes' rounds are most of a probe's measuring). Its samples so far stay in
#: the evidence, and decide judges it on them.
EARLY_ROUNDS = 5
LOSER_FACTOR = 1.0
#: Size transitions: replays right after PREDECESSOR_CALLS calls of the largest size (a prefill chunk
#: before decode), TRANSITION_REPS of them per size.
PREDECESSOR_CALLS = 4
TRANSITION_REPS = 3
#: Token counts between the ladder's powers of two that the captured graphs are also checked at.
ODD_TOKENS = (3, 24, 3000)
_TRANSITION_FAULTS = ("stale", "transition")


class TrialLoop:
    def __init__(self, plan: TrialPlan, ctx: BackendContext, heartbeat: Heartbeat, clock: PhaseClock) -> None:
        self.plan = plan
        self.ctx = ctx
        self.heartbeat = heartbeat
        self.clock = clock
        self.statuses: dict[str, dict[str, str | None]] = {}
        self.cells: list[_Cell] = []
        self.context: list[dict[str, Any]] = []
        self.graph_checks: list[dict[str, Any]] = []
        self.timer: Any = None

    def run(self) -> None:
        backends = self._admit()
        self.clock.mark("admit")
        for name, backend in backends.items():
            self._beat("setup", name)
            backend.setup()
        buffers = {
            tokens: checks.make_buffers(self.ctx, tokens, self.plan.seed) for tokens in self.plan.tokens
        }
        self.clock.mark("setup")
        self.heartbeat.steps = len(backends) * len(self.plan.tokens) * (3 + self.plan.rounds)
        passed = self._check_all(backends, buffers)
        self.clock.mark("check")
        self.heartbeat.steps = self.heartbeat.step + len(passed) * (2 + self.plan.rounds)
        self.timer = make_timer(self.ctx.device, self.ctx.group, self.plan.graph_calls, self.plan.warmup)
        measurables = self._capture(passed, backends)
        self.clock.mark("capture")
        self._time(measurables)
        self.clock.mark("measure")
        predecessors = self._predecessors(passed, backends)
        self._transitions(measurables, backends, predecessors)
        self.clock.mark("transition")
        self._in_context(passed, measurables, backends, buffers)
        self.clock.mark("context")
        self._recheck(measurables, backends, buffers, predecessors)
        self.clock.mark("recheck")
        # Every graph goes before the backends close: NCCL's communicator destroy waits for the graphs
        # that captured its kernels to be gone (seen: a 120 s hang in close of nccl on 2x H200).
        measurables.clear()
        predecessors.clear()
        gc.collect()
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)
        for name, backend in backends.items():
            self._beat("close", name)
            backend.close()
        self.clock.mark("close")

    def _beat(
        self, phase: str, backend: str | None, tokens: int | None = None, round: int | None = None
    ) -> None:
        self.heartbeat.step += phase in ("check", "prepare", "measure", "recheck")
        self.heartbeat.beat(phase, backend, tokens, round)

    def _admit(self) -> dict[str, Backend]:
        admitted: dict[str, Backend] = {}
        for name in self.plan.backends:
            self._beat("admit", name)
            backend, local_reason = admission.local_admission(name, self.ctx)
            reason = admission.agreed_reason(admission.gather(local_reason, self.ctx))
            if reason is None and backend is not None:
                admitted[name] = backend
                self.statuses[name] = {"status": "ok", "reason": None}
            else:
                self.statuses[name] = {"status": "unavailable", "reason": reason}
        return admitted

    def _call(self, name: str, backend: Backend, tokens: int, buffers: TrialBuffers) -> Any:
        call = backend.prepare(tokens, buffers)
        if name in self.plan.faults:
            call = faults.inject(
                self.plan.faults[name], call, self.ctx.rank, buffers, backend=name, tokens=tokens
            )
        return call

    def _vote(self, verdict: checks.Verdict) -> tuple[float | None, tuple[int, checks.Verdict] | None]:
        """Every rank's verdict: (max error over ranks, None if any NaN; the first wrong rank's)."""
        verdicts = [checks.Verdict.from_json(v) for v in admission.gather(verdict.to_json(), self.ctx)]
        errors = [v.max_abs_err for v in verdicts if v.max_abs_err is not None]
        max_err = max(errors) if len(errors) == len(verdicts) else None
        wrong = [(rank, v) for rank, v in enumerate(verdicts) if not v.ok]
        return max_err, (wrong[0] if wrong else None)

    def _check_all(
        self, backends: dict[str, Backend], buffers: dict[int, TrialBuffers]
    ) -> dict[tuple[str, int], Any]:
        """Check every (backend, size); return the calls of those that passed, keyed (name, tokens)."""
        passed: dict[tuple[str, int], Any] = {}
        for tokens in self.plan.tokens:
            for name, backend in backends.items():
                self._beat("check", name, tokens)
                cell = _Cell(name, tokens)
                self.cells.append(cell)
                reason = admission.agreed_reason(admission.gather(backend.size_unavailable(tokens), self.ctx))
                if reason is not None:
                    cell.status, cell.reason = "unavailable", reason
                    continue
                call = self._call(name, backend, tokens, buffers[tokens])
                cell.max_abs_err, wrong = self._vote(checks.check(call, buffers[tokens], self.ctx))
                if wrong:
                    rank, verdict = wrong
                    cell.status, cell.reason = "wrong", f"wrong answer on rank {rank}: {verdict.describe()}"
                    self._mark_wrong(name, tokens, cell.reason)
                else:
                    passed[(name, tokens)] = call
        return passed

    def _mark_wrong(self, name: str, tokens: int, reason: str) -> None:
        if self.statuses[name]["status"] == "ok":
            self.statuses[name] = {"status": "wrong", "reason": f"at {tokens} tokens: {reason}"}

    def _cell(self, name: str, tokens: int) -> _Cell:
        return next(cell for cell in self.cells if cell.backend == name and cell.tokens == tokens)

    def _capture(
        self, passed: dict[tuple[str, int], Any], backends: dict[str, Backend]
    ) -> dict[tuple[str, int], Any]:
        measurables = {}
        for (name, tokens), call in passed.items():
            self._beat("prepare", name, tokens)
            measurables[(name, tokens)] = self.timer.prepare(call, after_capture=backends[name].after_capture)
        return measurables

    def _time(self, measurables: dict[tuple[str, int], Any]) -> None:
        active = {
            tokens: [name for name in self.plan.backends if (name, tokens) in measurables]
            for tokens in self.plan.tokens
        }
        for round_index in range(self.plan.rounds):
            if round_index == EARLY_ROUNDS:
                self._stop_clear_losers(active)
            for tokens in self.plan.tokens:
                names = active[tokens]
                if not names:
                    continue
                for name in context.rotated(names, round_index):
                    self._beat("measure", name, tokens, round_index)
                    sample = self.timer.measure(measurables[(name, tokens)])
                    cell = self._cell(name, tokens)
                    cell.per_call_us.append(sample.per_call_us)
                    cell.skew_us.append(sample.skew_us)

    def group_medians(self) -> dict[tuple[str, int], float]:
        """Per (backend, size) timed so far, the slowest rank's median (a collective)."""
        local = {
            f"{cell.backend}@{cell.tokens}": statistics.median(cell.per_call_us)
            for cell in self.cells
            if cell.per_call_us
        }
        gathered = admission.gather(local, self.ctx)
        medians = {}
        for key in local:
            name, tokens = key.rsplit("@", 1)
            medians[(name, int(tokens))] = max(ranks[key] for ranks in gathered)
        return medians

    def _stop_clear_losers(self, active: dict[int, list[str]]) -> None:
        medians = self.group_medians()
        baseline = self.plan.backends[0]
        for tokens, names in active.items():
            base = medians.get((baseline, tokens))
            if base is None:
                continue
            for name in [n for n in names if n != baseline and medians[(n, tokens)] >= LOSER_FACTOR * base]:
                names.remove(name)
                self._cell(name, tokens).stopped_early = True

    def _predecessors(
        self, passed: dict[tuple[str, int], Any], backends: dict[str, Backend]
    ) -> dict[str, Any]:
        """Per backend, a graph of PREDECESSOR_CALLS calls at its largest checked size: what the
        transitions and the rechecks replay right before a smaller size."""
        predecessors = {}
        for name, backend in backends.items():
            sizes = [t for t in self.plan.tokens if (name, t) in passed]
            if sizes:
                self._beat("prepare", name, sizes[-1])
                predecessors[name] = self.timer.prepare(
                    passed[(name, sizes[-1])], after_capture=backend.after_capture, calls=PREDECESSOR_CALLS
                )
        return predecessors

    def _transitions(
        self,
        measurables: dict[tuple[str, int], Any],
        backends: dict[str, Backend],
        predecessors: dict[str, Any],
    ) -> None:
        """Lamport-style backends: replays right after PREDECESSOR_CALLS calls of the largest size the
        backend runs (a launcher variant whose rule hands the largest sizes to its other shot has a
        smaller largest size of its own)."""
        for name, backend in backends.items():
            sensitive = backend.lamport or self.plan.faults.get(name) in _TRANSITION_FAULTS
            timed = [t for t in self.plan.tokens if (name, t) in measurables]
            if not sensitive or name not in predecessors or not timed:
                continue
            predecessor = predecessors[name]
            for tokens in timed[:-1]:
                cell = self._cell(name, tokens)
                for rep in range(TRANSITION_REPS):
                    self._beat("transition", name, tokens, rep)
                    sample = self.timer.measure(measurables[(name, tokens)], preroll=predecessor)
                    cell.after_larger_us.append(sample.per_call_us)

    def _in_context(
        self,
        passed: dict[tuple[str, int], Any],
        measurables: dict[tuple[str, int], Any],
        backends: dict[str, Backend],
        buffers: dict[int, TrialBuffers],
    ) -> None:
        medians = self.group_medians()
        baseline = self.plan.backends[0]
        plain = [name for name in self.plan.backends if not is_composite(name)]
        calls = context.calls_per_graph(self.plan.graph_calls)
        for tokens in self.plan.tokens:
            chosen = context.candidates(tokens, medians, baseline, plain)
            if not chosen:
                continue
            gemm = context.gemm_for(self.ctx, tokens, buffers[tokens], self.plan.seed)
            graphs = {context.GEMM: self.timer.prepare(gemm, calls=calls)}
            for name in [baseline, *chosen]:
                self._beat("context", name, tokens)
                graphs[name] = self.timer.prepare(
                    context.layer(gemm, passed[(name, tokens)]),
                    after_capture=backends[name].after_capture,
                    calls=calls,
                )
            entries = {name: context.record(self.context, name, tokens) for name in graphs}
            for round_index in range(context.ROUNDS):
                for name in context.rotated(list(graphs), round_index):
                    self._beat("context", None if name == context.GEMM else name, tokens, round_index)
                    sample = self.timer.measure(graphs[name])
                    entries[name]["per_call_us"].append(sample.per_call_us)
                    entries[name]["skew_us"].append(sample.skew_us)
            del graphs

    def _recheck(
        self,
        measurables: dict[tuple[str, int], Any],
        backends: dict[str, Backend],
        buffers: dict[int, TrialBuffers],
        predecessors: dict[str, Any],
    ) -> None:
        """The captured graphs on fresh inputs (negative zeros, odd token counts), each replayed right
        after calls of the largest size; a wrong answer disqualifies the sizes around it."""
        ladder = self.plan.tokens
        sizes = sorted(set(ladder) | {t for t in ODD_TOKENS if t < ladder[-1]})
        seed = self.plan.seed + 1
        for name, backend in backends.items():
            timed = [t for t in ladder if (name, t) in measurables]
            if not timed:
                continue
            top = predecessors[name]
            for tokens in sizes:
                # A clear loser cannot be chosen where it stopped: its graph there is not replayed.
                if tokens in ladder and (tokens not in timed or self._cell(name, tokens).stopped_early):
                    continue
                self._beat("recheck", name, tokens)
                if tokens in ladder:
                    graph, trial_buffers = measurables[(name, tokens)], buffers[tokens]
                else:
                    reason = admission.agreed_reason(
                        admission.gather(backend.size_unavailable(tokens), self.ctx)
                    )
                    if reason is not None:
                        continue
                    trial_buffers = checks.make_buffers(self.ctx, tokens, seed)
                    call = self._call(name, backend, tokens, trial_buffers)
                    # One call: the answer checked is the first call after the larger size.
                    graph = self.timer.prepare(call, after_capture=backend.after_capture, calls=1)
                checks.load_graph_inputs(trial_buffers, self.ctx, tokens, seed)
                reference = checks.expected(trial_buffers, self.ctx)
                self.timer.replay(top)
                checks.poison(trial_buffers)
                self.timer.replay(graph)
                max_err, wrong = self._vote(checks.judge(trial_buffers, reference, self.ctx))
                record = {
                    "backend": name,
                    "tokens": tokens,
                    "status": "ok",
                    "reason": None,
                    "max_abs_err": max_err,
                }
                self.graph_checks.append(record)
                if wrong:
                    rank, verdict = wrong
                    reason = (
                        f"captured graph, fresh inputs, after {timed[-1]} tokens: wrong answer on rank {rank}: "
                        f"{verdict.describe()}"
                    )
                    record.update(status="wrong", reason=reason)
                    self._disqualify(name, tokens, reason)

    def _disqualify(self, name: str, tokens: int, reason: str) -> None:
        """A wrong answer at ``tokens`` disqualifies the ladder sizes around it (itself if on it)."""
        ladder = self.plan.tokens
        around = [tokens] if tokens in ladder else [
            t for t in (max((t for t in ladder if t < tokens), default=None), min((t for t in ladder if t > tokens), default=None)) if t is not None
        ]  # fmt: skip
        for size in around:
            cell = self._cell(name, size)
            if cell.status == "ok":
                cell.status, cell.reason = "wrong", f"at {tokens} tokens: {reason}"
        self._mark_wrong(name, tokens, reason)

    def result(self) -> dict[str, Any]:
        return {
            "format": RANK_RESULT_FORMAT,
            "rank": self.ctx.rank,
            "world_size": self.ctx.world_size,
            "software": _software(self.ctx.device),
            "backends": self.statuses,
            "results": [cell.__dict__ for cell in self.cells],
            "context": self.context,
            "graph_checks": self.graph_checks,
            "phases_s": self.clock.phases,
        }


def _software(device: torch.device) -> dict[str, str | None]:
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if device.type == "cuda" else None
    # The version of the FlashInfer the backends really ran, when one did: installs without
    # dist-info metadata (an unpacked tree on PYTHONPATH) are invisible to package metadata.
    flashinfer = getattr(sys.modules.get("flashinfer"), "__version__", None)
    return {
        "torch": torch.__version__,
        "nccl": nccl,
        "flashinfer": flashinfer,
        "python": platform.python_version(),
    }


@dataclass(frozen=True)
class RankEnv:
    """The standard torch.distributed env rendezvous, as the runner and torchrun set it."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_environ(cls) -> RankEnv:
        try:
            return cls(*(int(os.environ[name]) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK")))
        except KeyError as missing:
            raise SystemExit(f"topo-gate worker: {missing.args[0]} is not set (env rendezvous)") from None
        except ValueError as error:
            raise SystemExit(f"topo-gate worker: bad rendezvous env: {error}") from None


def run_worker(plan: TrialPlan, device_type: str, out_dir: Path, *, started: float) -> None:
    """Join the group, run the plan, write ``result.rank<R>.json`` to ``out_dir``.

    ``started``: ``time.monotonic()`` when the worker process began, so the phases include importing
    torch (and, through the backends, FlashInfer)."""
    env = RankEnv.from_environ()
    if env.world_size != plan.tp:
        raise SystemExit(f"topo-gate worker: the spec is for tp={plan.tp} but WORLD_SIZE={env.world_size}")
    clock = PhaseClock(started)
    clock.mark("import")
    heartbeat = Heartbeat(out_dir, env.rank)
    heartbeat.beat("start")
    if device_type == "cuda":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method="env://", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method="env://")
    clock.mark("rendezvous")
    ctx = BackendContext(
        rank=env.rank,
        world_size=env.world_size,
        local_rank=env.local_rank,
        device=device,
        dtype=getattr(torch, plan.dtype),
        hidden=plan.hidden,
        max_tokens=max(plan.tokens),
        pattern=plan.pattern,
        allow_multicast=plan.allow_multicast,
        group=dist.group.WORLD,
        group_class=plan.group_class,
    )
    loop = TrialLoop(plan, ctx, heartbeat, clock)
    loop.run()
    write_atomic(result_path(out_dir, env.rank), json.dumps(loop.result()))
    heartbeat.beat("done")
    dist.destroy_process_group()
