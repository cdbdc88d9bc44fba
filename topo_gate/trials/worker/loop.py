"""One rank's run: admit, set up, check, then time every (backend, size) in interleaved rounds.

Order of work (every rank walks it in lockstep; each step is a collective or follows one):

1. admission of each backend, voted across ranks (``admission.py``);
2. ``setup`` of the admitted backends;
3. per size, per backend: admission at that size (voted), one call checked against the reference
   (``checks.py``, voted: one rank's wrong answer disqualifies the backend at that size for all);
4. ``timing.Timer.prepare`` for every (backend, size) that passed (CUDA: graph capture);
5. ``rounds`` rounds; each visits every size and, within a size, the backends in an order rotated
   by the round (round r starts at backend r mod n), so drift hits every backend alike;
6. ``close``, then this rank's result file.

A backend that raises (outside admission) crashes the worker on purpose: its peers may be stuck in a
collective it never entered, so only the runner can recover, by killing the group and relaunching
fresh workers without it. The heartbeat before each step tells the runner whom to blame.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from topo_gate._atomic import write_atomic
from topo_gate.trials.backends.base import Backend, BackendContext, TrialBuffers
from topo_gate.trials.plan import TrialPlan
from topo_gate.trials.protocol import RANK_RESULT_FORMAT, Heartbeat, result_path
from topo_gate.trials.worker import admission, checks, faults
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


class TrialLoop:
    def __init__(self, plan: TrialPlan, ctx: BackendContext, heartbeat: Heartbeat, clock: PhaseClock) -> None:
        self.plan = plan
        self.ctx = ctx
        self.heartbeat = heartbeat
        self.clock = clock
        self.statuses: dict[str, dict[str, str | None]] = {}
        self.cells: list[_Cell] = []

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
        self.heartbeat.steps = len(backends) * len(self.plan.tokens) * (2 + self.plan.rounds)
        passed = self._check_all(backends, buffers)
        self.clock.mark("check")
        self.heartbeat.steps = self.heartbeat.step + len(passed) * (1 + self.plan.rounds)
        self._time(passed, backends)
        for name, backend in backends.items():
            self._beat("close", name)
            backend.close()
        self.clock.mark("close")

    def _beat(self, phase: str, backend: str, tokens: int | None = None, round: int | None = None) -> None:
        self.heartbeat.step += phase in ("check", "prepare", "measure")
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
                call = backend.prepare(tokens, buffers[tokens])
                if name in self.plan.faults:
                    call = faults.inject(self.plan.faults[name], call, self.ctx.rank, buffers[tokens])
                verdict = checks.check(call, buffers[tokens], self.ctx)
                verdicts = [
                    checks.Verdict.from_json(v) for v in admission.gather(verdict.to_json(), self.ctx)
                ]
                errors = [v.max_abs_err for v in verdicts if v.max_abs_err is not None]
                cell.max_abs_err = max(errors) if len(errors) == len(verdicts) else None  # None: NaN seen
                wrong = [(rank, v) for rank, v in enumerate(verdicts) if not v.ok]
                if wrong:
                    rank, verdict = wrong[0]
                    cell.status, cell.reason = "wrong", f"wrong answer on rank {rank}: {verdict.describe()}"
                    self._mark_wrong(name, tokens, cell.reason)
                else:
                    passed[(name, tokens)] = call
        return passed

    def _mark_wrong(self, name: str, tokens: int, reason: str) -> None:
        if self.statuses[name]["status"] == "ok":
            self.statuses[name] = {"status": "wrong", "reason": f"at {tokens} tokens: {reason}"}

    def _time(self, passed: dict[tuple[str, int], Any], backends: dict[str, Backend]) -> None:
        timer = make_timer(self.ctx.device, self.ctx.group, self.plan.graph_calls, self.plan.warmup)
        measurables = {}
        for (name, tokens), call in passed.items():
            self._beat("prepare", name, tokens)
            measurables[(name, tokens)] = timer.prepare(call, after_capture=backends[name].after_capture)
        self.clock.mark("capture")
        cells = {(cell.backend, cell.tokens): cell for cell in self.cells}
        for round_index in range(self.plan.rounds):
            for tokens in self.plan.tokens:
                names = [name for name in self.plan.backends if (name, tokens) in measurables]
                if not names:
                    continue
                start = round_index % len(names)
                for name in names[start:] + names[:start]:
                    self._beat("measure", name, tokens, round_index)
                    sample = timer.measure(measurables[(name, tokens)])
                    cells[(name, tokens)].per_call_us.append(sample.per_call_us)
                    cells[(name, tokens)].skew_us.append(sample.skew_us)
        self.clock.mark("measure")

    def result(self) -> dict[str, Any]:
        return {
            "format": RANK_RESULT_FORMAT,
            "rank": self.ctx.rank,
            "world_size": self.ctx.world_size,
            "software": _software(self.ctx.device),
            "backends": self.statuses,
            "results": [cell.__dict__ for cell in self.cells],
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
