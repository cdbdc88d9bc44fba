"""Run a TrialPlan: one worker process per rank, a watchdog, fault isolation, no orphans. Stdlib only.

An *attempt* starts ``plan.tp`` workers (``python -m topo_gate.trials.worker``) with the standard env
rendezvous and waits, watching two things:

- exits: a rank that exits non-zero (a crash, ``os._exit``, a signal, a Python exception) fails the
  attempt at once;
- heartbeats: a rank whose heartbeat has not changed for longer than its phase's bound (``timeout_s``
  per step; ``startup_timeout_s`` for start-up and backend setup, which import torch, rendezvous and
  JIT-compile, and for teardown after the result is written) is hung.

Either way the whole attempt is killed (SIGTERM, then SIGKILL, to every worker's process group), the
backend named by the heartbeat is marked ``failed`` or ``timeout`` with the reason, and a fresh
attempt measures the backends that remain. Each attempt removes one backend, so a plan ends after at
most ``len(plan.backends)`` attempts. A fault outside any backend (start-up, rendezvous) ends the plan:
every backend not yet measured is marked failed with that reason -- after retries, because such a
fault is rarely the node's answer:

- the rendezvous port: it is checked free right before the workers start, and an attempt whose
  rendezvous failed to bind or reach it (any rank's log says so: ``EADDRINUSE``, ``DistNetworkError``)
  is relaunched on a fresh port, up to ``PORT_TRIES`` ports;
- any other fault outside a backend (a rank dying at start-up) is retried ``INFRA_RETRIES`` time(s).

A plan that still fails records ``error`` (and the attempts' reasons in ``retries``): the probe then
names it and writes no profile unless asked to (``--allow-partial``); it is never read as "NCCL won".

No orphans: each worker leads its own process group, which takes in anything it spawns; the groups
are killed on every way out of ``run_plan`` (success, fault, exception, Ctrl-C, SIGTERM), and only
then are the workers reaped, so a group id can never be a recycled one. A worker whose runner was
SIGKILLed exits by itself (it watches its parent).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from topo_gate._atomic import write_atomic
from topo_gate.trials.plan import TrialPlan, plan_to_spec, with_backends
from topo_gate.trials.protocol import BACKEND_PHASES, Beat, log_path, read_heartbeat, result_path
from topo_gate.trials.safety import MEASUREMENT_ENV, SAFETY_ENV

DEFAULT_STARTUP_TIMEOUT_S = 120.0
PORT_TRIES = 3
INFRA_RETRIES = 1
#: What torch.distributed's TCPStore says, on any rank, when the rendezvous port was taken or unreachable.
_PORT_FAILURE = re.compile(r"EADDRINUSE|address already in use|DistNetworkError|DistStoreError")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")
KILL_GRACE_S = 3.0  # between SIGTERM and SIGKILL: lets NCCL and CUDA tear down cleanly
POLL_S = 0.1


@dataclass(frozen=True)
class BackendOutcome:
    """A backend's status over the whole plan: ok | wrong | unavailable | failed | timeout."""

    status: str
    reason: str | None = None


@dataclass(frozen=True)
class Fault:
    """Why an attempt was killed, and the backend (and size) that was in flight, if any."""

    status: str  # "failed" | "timeout"
    reason: str
    backend: str | None
    tokens: int | None
    #: The rendezvous could not bind or reach its port (a relaunch on a fresh port may succeed).
    port_failure: bool = False


@dataclass(frozen=True)
class Progress:
    """Passed to ``on_progress``: rank 0's latest heartbeat, or the fault that ended an attempt."""

    plan: TrialPlan
    attempt: int
    beat: Beat | None
    fault: Fault | None = None


@dataclass
class PlanResult:
    """Everything one plan produced: per-backend outcomes and per-(backend, size) results (the
    evidence ``runs`` entry), how many attempts it took, and the plan-level error if it never ran."""

    plan: TrialPlan
    backends: dict[str, BackendOutcome]
    results: list[dict[str, Any]]
    attempts: int
    error: str | None = None
    software: dict[str, Any] = field(default_factory=dict)
    #: Why earlier attempts were relaunched without blaming a backend (port taken, start-up fault).
    retries: list[str] = field(default_factory=list)
    #: Layer-like graphs (worker ``context.py``): per (backend or "gemm", size) group samples.
    context: list[dict[str, Any]] = field(default_factory=list)
    #: The captured graphs checked again on fresh inputs, per (backend, size), voted.
    graph_checks: list[dict[str, Any]] = field(default_factory=list)
    #: Wall time of the whole plan, every attempt and worker start included, and the slowest rank's
    #: seconds per worker phase in the attempt that finished (import, rendezvous, admit, setup,
    #: check, capture, measure, close): what a sweep's time is made of.
    wall_s: float | None = None
    phases_s: dict[str, float] = field(default_factory=dict)

    def as_run(self) -> dict[str, Any]:
        """The evidence ``runs`` entry (docs/ARCHITECTURE.md)."""
        return {
            "tp": self.plan.tp,
            "group": list(self.plan.group),
            "group_class": self.plan.group_class,
            "pattern": self.plan.pattern,
            "backends": {name: {"status": o.status, "reason": o.reason} for name, o in self.backends.items()},
            "results": self.results,
            "wall_s": self.wall_s,
            "phases_s": self.phases_s,
            "error": self.error,
            "retries": list(self.retries),
            "context": self.context,
            "graph_checks": self.graph_checks,
        }


def run_plan(
    plan: TrialPlan,
    *,
    device: str,
    cuda_devices: Sequence[str],
    timeout_s: float,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    port_source: Callable[[], int] | None = None,
) -> PlanResult:
    """Measure ``plan`` with ``plan.tp`` worker processes; never leaves a process behind.

    ``cuda_devices``: the group's GPUs as ``CUDA_VISIBLE_DEVICES`` entries (indices in PCI bus order,
    or UUIDs), so LOCAL_RANK i runs on the group's i-th GPU; ignored on the CPU, where workers see no
    GPU at all. ``env``: extra variables for the workers over this process's environment.
    ``timeout_s``: the longest a rank may spend in one step (one check, one capture, one sample).
    ``port_source``: where each attempt's rendezvous port comes from (default ``free_port``).
    Raises KeyboardInterrupt on Ctrl-C or SIGTERM, after the workers are gone.
    """
    if device == "cuda" and len(cuda_devices) != plan.tp:
        raise ValueError(f"tp={plan.tp} needs {plan.tp} CUDA devices, got {list(cuda_devices)}")
    outcomes: dict[str, BackendOutcome] = {}
    results: list[dict[str, Any]] = []
    context: list[dict[str, Any]] = []
    graph_checks: list[dict[str, Any]] = []
    remaining = list(plan.backends)
    attempt, error = 0, None
    software: dict[str, Any] = {}
    phases: dict[str, float] = {}
    retries: list[str] = []
    port_tries, infra_retries = 1, 0
    started = time.monotonic()
    launch = _Launch(
        device, cuda_devices, {**os.environ, **(env or {})}, timeout_s, startup_timeout_s,
        port_source or free_port,
    )  # fmt: skip
    with _sigterm_as_interrupt():
        while remaining:
            attempt += 1
            folder = workdir / f"attempt-{attempt}"
            folder.mkdir(parents=True, exist_ok=True)
            sub_plan = with_backends(plan, remaining)
            fault, rank_results = _run_attempt(sub_plan, attempt, folder, launch, on_progress)
            if fault is None:
                backends, cells, software = merge_rank_results(sub_plan, rank_results)
                phases = _slowest_phases(rank_results)
                outcomes.update(backends)
                results.extend(cells)
                context = merge_context(rank_results)
                graph_checks = list(rank_results[0].get("graph_checks", []))
                for entry in (*context, *graph_checks):
                    entry["nbytes"] = plan.nbytes(entry["tokens"])
                break
            if fault.backend is None:
                if fault.port_failure and port_tries < PORT_TRIES:
                    port_tries += 1
                    retries.append(f"attempt {attempt}: {fault.reason}; relaunched on a fresh port")
                    continue
                if not fault.port_failure and infra_retries < INFRA_RETRIES:
                    infra_retries += 1
                    retries.append(f"attempt {attempt}: {fault.reason}; relaunched once")
                    continue
                error = fault.reason
                for name in remaining:
                    outcomes[name] = BackendOutcome("failed", f"workers failed before it ran: {fault.reason}")
                break
            outcomes[fault.backend] = BackendOutcome(fault.status, fault.reason)
            if fault.tokens is not None:
                results.append(_cell(plan, fault.backend, fault.tokens, fault.status, fault.reason))
            remaining.remove(fault.backend)
    order = {name: index for index, name in enumerate(plan.backends)}
    results.sort(key=lambda cell: (order[cell["backend"]], cell["tokens"]))
    backends = {name: outcomes[name] for name in plan.backends}
    wall_s = round(time.monotonic() - started, 3)
    return PlanResult(
        plan,
        backends,
        results,
        attempts=attempt,
        error=error,
        software=software,
        retries=retries,
        context=context,
        graph_checks=graph_checks,
        wall_s=wall_s,
        phases_s=phases,
    )


def _slowest_phases(rank_results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per phase, the slowest rank's seconds (ranks wait for each other at every collective)."""
    phases: dict[str, float] = {}
    for result in rank_results:
        for phase, seconds in result.get("phases_s", {}).items():
            phases[phase] = max(phases.get(phase, 0.0), seconds)
    return phases


@dataclass(frozen=True)
class _Launch:
    device: str
    cuda_devices: Sequence[str]
    base_env: Mapping[str, str]
    timeout_s: float
    startup_timeout_s: float
    port_source: Callable[[], int]

    def worker_env(self, plan: TrialPlan, rank: int, port: int) -> dict[str, str]:
        env = {**MEASUREMENT_ENV, **self.base_env}  # the user's own NCCL settings win
        env.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(rank),
            WORLD_SIZE=str(plan.tp),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(plan.tp),
            # NVML and the plan number GPUs in PCI bus order; CUDA's default order is "fastest first".
            CUDA_DEVICE_ORDER="PCI_BUS_ID",
            CUDA_VISIBLE_DEVICES=",".join(self.cuda_devices) if self.device == "cuda" else "",
        )
        if not plan.allow_multicast:
            env.update(SAFETY_ENV)
        return env

    def bound_s(self, beat: Beat | None) -> float:
        # "done" is teardown after the result is written (process group, interpreter exit): as slow as
        # start-up on a loaded machine, and killing it would throw away a finished measurement.
        slow = beat is None or beat.phase in ("start", "setup", "done")
        return self.startup_timeout_s if slow else self.timeout_s


def _run_attempt(
    plan: TrialPlan,
    attempt: int,
    folder: Path,
    launch: _Launch,
    on_progress: Callable[[Progress], None] | None,
) -> tuple[Fault | None, list[dict[str, Any]]]:
    spec = folder / "spec.json"
    write_atomic(spec, json.dumps(plan_to_spec(plan, device=launch.device), indent=1))
    port = launch.port_source()
    if not port_bindable(port):
        taken = Fault("failed", f"rendezvous port {port} is taken", None, None, port_failure=True)
        if on_progress is not None:
            on_progress(Progress(plan, attempt, None, taken))
        return taken, []
    with _Workers() as workers:
        for rank in range(plan.tp):
            workers.start(rank, spec, folder, launch.worker_env(plan, rank, port))
        fault = _watch(plan, attempt, folder, launch, workers, on_progress)
    if fault is not None and fault.backend is None and _port_failed(folder, plan.tp):
        fault = replace(fault, port_failure=True, reason=f"rendezvous on port {port} failed: {fault.reason}")
    if fault is None:
        fault, rank_results = _read_rank_results(folder, plan.tp)
        if fault is None:
            return None, rank_results
    if on_progress is not None:
        on_progress(Progress(plan, attempt, None, fault))
    return fault, []


def _watch(
    plan: TrialPlan,
    attempt: int,
    folder: Path,
    launch: _Launch,
    workers: _Workers,
    on_progress: Callable[[Progress], None] | None,
) -> Fault | None:
    """Wait until every rank exits 0 (None) or one fails or hangs (the Fault)."""
    started = time.monotonic()
    beats: dict[int, Beat | None] = dict.fromkeys(range(plan.tp))
    changed = dict.fromkeys(range(plan.tp), started)
    while True:
        exits = workers.exits()
        for rank in range(plan.tp):
            previous = beats[rank]
            beat = _read_beat(folder, rank, previous)
            if beat is not None and (previous is None or beat.seq != previous.seq):
                changed[rank] = time.monotonic()
                if rank == 0 and on_progress is not None:
                    on_progress(Progress(plan, attempt, beat))
            beats[rank] = beat
        crashed = {rank: status for rank, status in exits.items() if status != 0}
        if crashed:
            return _crash_fault(crashed, beats, folder)
        if len(exits) == plan.tp:
            return None
        now = time.monotonic()
        for rank in sorted(set(range(plan.tp)) - set(exits), key=changed.__getitem__):
            bound = launch.bound_s(beats[rank])
            if now - changed[rank] > bound:
                return _timeout_fault(rank, beats[rank], bound)
        time.sleep(POLL_S)


def _read_beat(folder: Path, rank: int, previous: Beat | None) -> Beat | None:
    try:
        return read_heartbeat(folder, rank)
    except (OSError, ValueError, TypeError):
        return previous  # a torn or odd file: keep the last good beat and look again next poll


def _blame(beat: Beat | None) -> tuple[str | None, int | None]:
    if beat is None or beat.phase not in BACKEND_PHASES:
        return None, None
    return beat.backend, beat.tokens


def _timeout_fault(rank: int, beat: Beat | None, bound: float) -> Fault:
    where = "starting up" if beat is None else f"in {beat.where()}"
    backend, tokens = _blame(beat)
    return Fault("timeout", f"rank {rank} made no progress for {bound:g} s {where}", backend, tokens)


def _crash_fault(crashed: Mapping[int, int], beats: Mapping[int, Beat | None], folder: Path) -> Fault:
    # Blame what the first crashed rank was doing; report every rank that died on its own, since the
    # first death often makes its peers fail too (a closed connection) and the order is a race.
    first = min(crashed)
    beat = beats[first]
    parts = [_exit_words(rank, status, log_path(folder, rank)) for rank, status in sorted(crashed.items())]
    where = "while starting up" if beat is None else f"in {beat.where()}"
    backend, tokens = _blame(beat)
    return Fault("failed", f"{'; '.join(parts)} {where}", backend, tokens)


def _exit_words(rank: int, status: int, log: Path) -> str:
    if status < 0:
        words = f"rank {rank} was killed by {signal.Signals(-status).name}"
    else:
        words = f"rank {rank} exited with status {status}"
    gist = _log_gist(log)
    return f"{words} ({gist})" if gist else words


def _log_gist(log: Path, tail_bytes: int = 8192) -> str | None:
    """The line that says what went wrong: a traceback's last line, or a worker's own one-line
    refusal ("topo-gate worker: ..."); None when the log holds neither (e.g. only library warnings)."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - tail_bytes))
            lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines()]
    except OSError:
        return None
    # torch.distributed prefixes its workers' error output with "[rank<R>]:".
    lines = [_RANK_PREFIX.sub("", line) for line in lines if line]
    if any(line.startswith("Traceback") for line in lines):
        return lines[-1]
    own = [line for line in lines if line.startswith("topo-gate worker:")]
    return own[-1] if own else None


def _read_rank_results(folder: Path, tp: int) -> tuple[Fault | None, list[dict[str, Any]]]:
    rank_results = []
    for rank in range(tp):
        try:
            rank_results.append(json.loads(result_path(folder, rank).read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            return Fault(
                "failed", f"rank {rank} exited 0 but its result is unreadable: {error}", None, None
            ), []
    return None, rank_results


def merge_rank_results(
    plan: TrialPlan, rank_results: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, BackendOutcome], list[dict[str, Any]], dict[str, Any]]:
    """Combine the ranks' files: the verdicts (voted, so equal on every rank) from rank 0, and per
    round the group latency = the slowest rank's per-call latency, and the largest reported skew."""
    first = rank_results[0]
    layout = [[(c["backend"], c["tokens"], c["status"]) for c in r["results"]] for r in rank_results]
    if any(cells != layout[0] for cells in layout):
        raise RuntimeError("ranks disagree on which trials ran: the worker's votes are broken")
    backends = {name: BackendOutcome(v["status"], v["reason"]) for name, v in first["backends"].items()}
    cells = []
    for index, cell in enumerate(first["results"]):
        per_rank = [r["results"][index]["per_call_us"] for r in rank_results]
        skews = zip(*(r["results"][index]["skew_us"] for r in rank_results), strict=True)
        merged = _cell(plan, cell["backend"], cell["tokens"], cell["status"], cell["reason"])
        merged.update(
            samples_us=[max(values) for values in zip(*per_rank, strict=True)],
            per_rank_us=per_rank,
            skew_us=[max((s for s in column if s is not None), default=None) for column in skews],
            max_abs_err=cell["max_abs_err"],
        )
        if cell.get("stopped_early"):
            merged["stopped_early"] = True
        after = [r["results"][index].get("after_larger_us", []) for r in rank_results]
        if any(after):
            merged["after_larger_us"] = [max(values) for values in zip(*after, strict=True)]
        cells.append(merged)
    return backends, cells, first["software"]


def merge_context(rank_results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The layer-graph samples: per entry and round, the slowest rank's per-call latency."""
    merged = []
    for index, entry in enumerate(rank_results[0].get("context", [])):
        per_rank = [r["context"][index]["per_call_us"] for r in rank_results]
        merged.append(
            {
                "backend": entry["backend"],
                "tokens": entry["tokens"],
                "samples_us": [max(values) for values in zip(*per_rank, strict=True)],
            }
        )
    return merged


def _cell(plan: TrialPlan, backend: str, tokens: int, status: str, reason: str | None) -> dict[str, Any]:
    return {
        "backend": backend,
        "tokens": tokens,
        "nbytes": plan.nbytes(tokens),
        "status": status,
        "reason": reason,
        "samples_us": [],
        "per_rank_us": [],
        "skew_us": [],
        "graph_calls": plan.graph_calls,
        "max_abs_err": None,
    }


def _port_failed(folder: Path, tp: int) -> bool:
    """Whether any rank's log says the rendezvous port could not be bound or reached."""
    for rank in range(tp):
        try:
            text = log_path(folder, rank).read_bytes()[-16384:].decode("utf-8", "replace")
        except OSError:
            continue
        if _PORT_FAILURE.search(text):
            return True
    return False


def free_port() -> int:
    """A port that binds on 127.0.0.1 right now. Another process may still take it before rank 0
    binds it; the runner then sees the rendezvous fail and relaunches on a fresh port."""
    for _ in range(16):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port_bindable(port):
            return port
    raise OSError("no free TCP port on 127.0.0.1 for the rendezvous")


def port_bindable(port: int) -> bool:
    """Whether a listening socket can take ``port`` on 127.0.0.1 now (what rank 0's TCPStore does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class _Workers:
    """The worker processes of one attempt. Leaving the ``with`` block kills and reaps all of them."""

    def __init__(self) -> None:
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

    def start(self, rank: int, spec: Path, folder: Path, env: Mapping[str, str]) -> None:
        command = [sys.executable, "-m", "topo_gate.trials.worker", "--spec", str(spec), "--out", str(folder)]
        with log_path(folder, rank).open("wb") as log:
            self._processes[rank] = subprocess.Popen(
                command,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                # Its own session and process group: Ctrl-C in the terminal reaches only the runner,
                # which then stops the workers in order, and killpg reaches anything a worker spawned.
                start_new_session=True,
            )

    def exits(self) -> dict[int, int]:
        """Rank -> exit status (negative: killed by that signal) of the ranks that have exited.
        Uses WNOWAIT so exited workers stay unreaped zombies: their pids, and so their process
        group ids, cannot be reused before ``kill`` signals the groups."""
        statuses = {}
        for rank, process in self._processes.items():
            info = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None and info.si_pid != 0:
                exited = info.si_code == os.CLD_EXITED
                statuses[rank] = info.si_status if exited else -info.si_status
        return statuses

    def kill(self) -> None:
        """SIGTERM every group, wait up to KILL_GRACE_S, SIGKILL every group, then reap."""
        self._signal_groups(signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE_S
        while len(self.exits()) < len(self._processes) and time.monotonic() < deadline:
            time.sleep(POLL_S / 2)
        self._signal_groups(signal.SIGKILL)  # also reaches grandchildren that outlived their leader
        for process in self._processes.values():
            process.wait()

    def _signal_groups(self, signum: signal.Signals) -> None:
        for process in self._processes.values():
            try:
                os.killpg(process.pid, signum)
            except ProcessLookupError:
                pass  # the group is empty: nothing left to stop


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while trials run, so the ``finally`` that kills the
    workers runs for ``kill <runner>`` too (Python's default SIGTERM action skips it)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        # None: the previous handler was not set from Python; the default is the closest match.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
