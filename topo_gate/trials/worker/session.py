"""One rank's session: start once, measure each pattern of the spec in turn, close once.

The session pays what every pattern would otherwise pay again: the interpreter and torch import
(before ``run_worker``), the rendezvous and its process group, and through the pool (``pool.py``)
each backend's setup -- workspaces, IPC handles, JIT builds. Each pattern then runs on its own
(``loop.PatternTrials``) and its result file is written as soon as it is done, so a fault in a later
pattern leaves it measured. Before each pattern but the first, a rank past the session's
``deadline`` (``--budget``) starts no more: the patterns left out are named in the session file with
the reason, and every rank decides alike (the ranks vote).
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
from topo_gate.trials.backends.base import BackendContext
from topo_gate.trials.plan import STARTUP_FAULT, SessionPlan, TrialPlan
from topo_gate.trials.protocol import SESSION_FORMAT, Heartbeat, result_path, session_path
from topo_gate.trials.worker import admission
from topo_gate.trials.worker.faults import startup_fails
from topo_gate.trials.worker.loop import PatternTrials
from topo_gate.trials.worker.pool import BackendPool
from topo_gate.trials.worker.state import PhaseClock


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


@dataclass
class SessionRecord:
    """This rank's ``session.rank<R>.json``: rewritten whenever it changes, so a later fault keeps it."""

    path: Path
    rank: int
    software: dict[str, str | None]
    phases_s: dict[str, float] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)

    def write(self) -> None:
        document = {
            "format": SESSION_FORMAT, "rank": self.rank, "software": self.software,
            "phases_s": self.phases_s, "dropped": self.dropped,
        }  # fmt: skip
        write_atomic(self.path, json.dumps(document))


def run_worker(session: SessionPlan, device_type: str, out_dir: Path, *, started: float) -> None:
    """Join the group, run the session's patterns, write their result files and the session file.

    ``started``: ``time.monotonic()`` when the worker process began, so the phases include importing
    torch (and, through the backends, FlashInfer)."""
    env = RankEnv.from_environ()
    if env.world_size != session.tp:
        raise SystemExit(f"topo-gate worker: the spec is for tp={session.tp} but WORLD_SIZE={env.world_size}")
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
    record = SessionRecord(session_path(out_dir, env.rank), env.rank, _software(device), clock.phases)
    record.write()
    pool = BackendPool()
    for index, plan in enumerate(session.plans):
        ctx = _context(plan, env, device)
        heartbeat.pattern = plan.pattern
        heartbeat.beat("begin")
        late = index > 0 and session.deadline is not None and time.time() >= session.deadline
        if any(admission.gather(late, ctx)):  # one rank's clock past the deadline is every rank's
            record.dropped[plan.pattern] = "the --budget deadline had passed when it was to start"
            record.write()
            continue
        if startup_fails(plan.faults.get(STARTUP_FAULT), out_dir):
            print("topo-gate worker: injected start-up failure (harness test)", file=sys.stderr, flush=True)
            os._exit(1)
        trials = PatternTrials(plan, ctx, pool, heartbeat, PhaseClock(time.monotonic()))
        trials.run()
        write_atomic(result_path(out_dir, env.rank, plan.pattern), json.dumps(trials.result()))
        trials.release()
        record.software = _software(device)  # the backends have imported their libraries by now
        record.write()
    heartbeat.pattern = None
    closing = time.monotonic()
    pool.close_all(lambda backend: heartbeat.beat("close", backend.name))
    record.phases_s["close"] = round(time.monotonic() - closing, 3)
    record.write()
    heartbeat.beat("done")
    dist.destroy_process_group()


def _context(plan: TrialPlan, env: RankEnv, device: torch.device) -> BackendContext:
    return BackendContext(
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


def _software(device: torch.device) -> dict[str, Any]:
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
