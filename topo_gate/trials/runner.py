"""Run a SessionPlan: one worker per rank measures every pattern; a watchdog, fault isolation. Stdlib only.

An *attempt* starts ``tp`` workers (``python -m topo_gate.trials.worker``) with the standard env
rendezvous and waits, watching two things:

- exits: a rank that exits non-zero (a crash, ``os._exit``, a signal, a Python exception) fails the
  attempt at once;
- heartbeats: a rank whose heartbeat has not changed for longer than its phase's bound (``timeout_s``
  per step; ``startup_timeout_s`` for start-up and backend setup, which import torch, rendezvous and
  JIT-compile, and for teardown after the results are written) is hung.

Either way the whole attempt is killed (SIGTERM, then SIGKILL, to every worker's process group). What
it finished stays: a pattern whose result file every rank wrote is measured, whatever came after.
The fault is blamed on the pattern and backend the heartbeat names, and a fresh attempt measures
the patterns not yet done:

- a backend: it is marked ``failed`` or ``timeout`` with the reason, and left out of its pattern
  (only that one: the same name in another pattern is another measurement). Each such attempt
  removes one backend, so a session ends;
- outside any backend, as a pattern starts: retried ``INFRA_RETRIES`` time(s) on fresh workers; a
  pattern that still fails records ``error`` (its backends ``failed``), and the session goes on
  with the patterns after it;
- outside any pattern (start-up, rendezvous): the rendezvous port is checked free right before the
  workers start, and an attempt whose rendezvous failed to bind or reach it (any rank's log says
  so: ``EADDRINUSE``, ``DistNetworkError``) is relaunched on a fresh port, up to ``PORT_TRIES``
  ports; anything else is retried ``INFRA_RETRIES`` time(s); then every pattern not done records
  ``error``;
- after every pattern was measured (teardown): the measurements stand, and each run notes the fault.

The rules are applied by ``attempts.settle``. A plan that records ``error`` (and the attempts'
reasons in ``retries``) is named by the probe, which writes no profile unless asked to
(``--allow-partial``); it is never read as "NCCL won".

No orphans: ``processes.Workers`` kills every worker's process group on every way out of an attempt,
and SIGTERM to the runner becomes ``KeyboardInterrupt`` after the kill.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from topo_gate._atomic import write_atomic
from topo_gate.trials.attempts import Fault, PatternAttempts, add_phases, plan_results, settle
from topo_gate.trials.plan import SessionPlan, session_to_spec, with_backends
from topo_gate.trials.processes import POLL_S, Workers, free_port, port_bindable, sigterm_as_interrupt
from topo_gate.trials.protocol import BACKEND_PHASES, Beat, log_path, read_heartbeat
from topo_gate.trials.results import SessionResult, read_finished, slowest_phases
from topo_gate.trials.safety import MEASUREMENT_ENV, SAFETY_ENV

DEFAULT_STARTUP_TIMEOUT_S = 120.0
#: What torch.distributed's TCPStore says, on any rank, when the rendezvous port was taken or unreachable.
_PORT_FAILURE = re.compile(r"EADDRINUSE|address already in use|DistNetworkError|DistStoreError")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")


@dataclass(frozen=True)
class Progress:
    """Passed to ``on_progress``: rank 0's latest heartbeat, or the fault that ended an attempt."""

    plan: SessionPlan
    attempt: int
    beat: Beat | None
    fault: Fault | None = None


def run_trial_session(
    plan: SessionPlan,
    *,
    device: str,
    cuda_devices: Sequence[str],
    timeout_s: float,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    port_source: Callable[[], int] | None = None,
) -> SessionResult:
    """Measure every pattern of ``plan`` with one group of ``plan.tp`` workers; never leaves a
    process behind.

    ``cuda_devices``: the group's GPUs as ``CUDA_VISIBLE_DEVICES`` entries (indices in PCI bus order,
    or UUIDs), so LOCAL_RANK i runs on the group's i-th GPU; ignored on the CPU, where workers see no
    GPU at all. ``env``: extra variables for the workers over this process's environment.
    ``timeout_s``: the longest a rank may spend in one step (one check, one capture, one sample).
    ``port_source``: where each attempt's rendezvous port comes from (default ``free_port``).
    Raises KeyboardInterrupt on Ctrl-C or SIGTERM, after the workers are gone.
    """
    if device == "cuda" and len(cuda_devices) != plan.tp:
        raise ValueError(f"tp={plan.tp} needs {plan.tp} CUDA devices, got {list(cuda_devices)}")
    patterns = {p.pattern: PatternAttempts(p, list(p.backends)) for p in plan.plans}
    dropped: dict[str, str] = {}
    phases: dict[str, float] = {}
    software: dict[str, Any] = {}
    attempt, port_tries, session_retries = 0, 1, 0
    started = time.monotonic()
    launch = _Launch(
        device, cuda_devices, {**os.environ, **(env or {})}, timeout_s, startup_timeout_s,
        port_source or free_port,
    )  # fmt: skip
    with sigterm_as_interrupt():
        while pending := [p for p in patterns.values() if not p.done]:
            attempt += 1
            folder = workdir / f"attempt-{attempt}"
            folder.mkdir(parents=True, exist_ok=True)
            for state in pending:
                state.attempts += 1
            sub = SessionPlan(tuple(with_backends(p.plan, p.remaining) for p in pending), plan.deadline)
            fault = _run_attempt(sub, attempt, folder, launch, on_progress)
            finished, records = read_finished(folder, sub)
            add_phases(phases, slowest_phases(records))
            for pattern, rank_results in finished.items():
                patterns[pattern].finish(rank_results)
                add_phases(phases, patterns[pattern].phases_s)
            if records:
                software.update(records[0].get("software", {}))
                for pattern, reason in records[0].get("dropped", {}).items():
                    dropped[pattern] = reason
                    patterns[pattern].done = True
            left = [p for p in patterns.values() if not p.done]
            if fault is None and left:
                fault = Fault("failed", "every rank exited 0 but a result is missing", None, None,
                              pattern=left[0].plan.pattern)  # fmt: skip
            if fault is None:
                break
            if not left:  # the fault came after every pattern was measured: nothing to relaunch
                for state in pending:
                    state.retries.append(
                        f"attempt {attempt}: {fault.reason} after its measurement; results kept"
                    )
                break
            session_retries = settle(fault, attempt, patterns, left, session_retries, port_tries)
            port_tries += fault.port_failure
    wall_s = round(time.monotonic() - started, 3)
    return SessionResult(
        plan, plan_results(plan, patterns, dropped, software, wall_s, phases), dropped, attempt, wall_s, phases,
        software,
    )  # fmt: skip


@dataclass(frozen=True)
class _Launch:
    device: str
    cuda_devices: Sequence[str]
    base_env: Mapping[str, str]
    timeout_s: float
    startup_timeout_s: float
    port_source: Callable[[], int]

    def worker_env(self, plan: SessionPlan, rank: int, port: int) -> dict[str, str]:
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
        # "begin" waits for every rank to start the pattern (the deadline vote), after the previous
        # pattern's graphs were freed and the device synchronised: start-up-like, not one step.
        slow = beat is None or beat.phase in ("start", "begin", "setup", "done")
        return self.startup_timeout_s if slow else self.timeout_s


def _run_attempt(
    plan: SessionPlan,
    attempt: int,
    folder: Path,
    launch: _Launch,
    on_progress: Callable[[Progress], None] | None,
) -> Fault | None:
    spec = folder / "spec.json"
    write_atomic(spec, json.dumps(session_to_spec(plan, device=launch.device), indent=1))
    port = launch.port_source()
    fault: Fault | None
    if not port_bindable(port):
        fault = Fault("failed", f"rendezvous port {port} is taken", None, None, port_failure=True)
    else:
        with Workers() as workers:
            for rank in range(plan.tp):
                workers.start(rank, spec, folder, launch.worker_env(plan, rank, port))
            fault = _watch(plan, attempt, folder, launch, workers, on_progress)
        # Only before any pattern began can a rendezvous have failed (a later peer's death reads alike).
        outside = fault is not None and fault.backend is None and fault.pattern is None
        if fault is not None and outside and _port_failed(folder, plan.tp):
            fault = replace(
                fault, port_failure=True, reason=f"rendezvous on port {port} failed: {fault.reason}"
            )
    if fault is not None and on_progress is not None:
        on_progress(Progress(plan, attempt, None, fault))
    return fault


def _watch(
    plan: SessionPlan,
    attempt: int,
    folder: Path,
    launch: _Launch,
    workers: Workers,
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


def _blame(beat: Beat | None) -> tuple[str | None, int | None, str | None]:
    """(backend, tokens, pattern) in flight: no backend outside the backend phases."""
    if beat is None:
        return None, None, None
    if beat.phase not in BACKEND_PHASES:
        return None, None, beat.pattern
    return beat.backend, beat.tokens, beat.pattern


def _timeout_fault(rank: int, beat: Beat | None, bound: float) -> Fault:
    where = "starting up" if beat is None else f"in {beat.where()}"
    backend, tokens, pattern = _blame(beat)
    return Fault(
        "timeout", f"rank {rank} made no progress for {bound:g} s {where}", backend, tokens, pattern=pattern
    )


def _crash_fault(crashed: Mapping[int, int], beats: Mapping[int, Beat | None], folder: Path) -> Fault:
    # Blame what the first crashed rank was doing; report every rank that died on its own, since the
    # first death often makes its peers fail too (a closed connection) and the order is a race.
    first = min(crashed)
    beat = beats[first]
    parts = [_exit_words(rank, status, log_path(folder, rank)) for rank, status in sorted(crashed.items())]
    where = "while starting up" if beat is None else f"in {beat.where()}"
    backend, tokens, pattern = _blame(beat)
    return Fault("failed", f"{'; '.join(parts)} {where}", backend, tokens, pattern=pattern)


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
