"""Helpers for the trial-harness tests (a plain module: conftest names collide across test folders)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from topo_gate.trials.plan import SessionPlan, TrialPlan, default_backends, token_ladder
from topo_gate.trials.results import PlanResult, SessionResult
from topo_gate.trials.runner import Progress, run_trial_session

FAULTS_ON = {"TOPO_GATE_ALLOW_FAULT_INJECTION": "1"}
#: The step bound of the tests that wait for the watchdog to end an injected hang: each second of it
#: is a second the serial "processes" group stands idle. test_watchdog.py holds healthy gloo steps to
#: a 2 s bound (a second fault would fail it) and passes at a load of 9 on 2 cores; twice that is left
#: as margin. Those tests time the kill against the bound; these only need it to come.
HANG_BOUND_S = 4.0


def gloo_plan(tp: int = 2, pattern: str = "allreduce", **overrides: object) -> TrialPlan:
    """A tiny CPU plan: hidden 32, sizes 1..4 tokens, 3 rounds (the harness, not the numbers, is tested)."""
    fields: dict[str, object] = dict(
        tp=tp,
        group=tuple(range(tp)),
        group_class="cpu",
        pattern=pattern,
        dtype="bfloat16",
        hidden=32,
        tokens=token_ladder(4),
        backends=default_backends(pattern, "cpu"),
        graph_calls=4,
        rounds=3,
        warmup=1,
    )
    fields.update(overrides)
    return TrialPlan(**fields)  # type: ignore[arg-type]


def run_gloo(
    plans: TrialPlan | tuple[TrialPlan, ...],
    workdir: Path,
    *,
    timeout_s: float = 60.0,
    startup_timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    port_source: Callable[[], int] | None = None,
    deadline: float | None = None,
) -> SessionResult:
    """One session of ``plans`` on gloo. Watchdog bounds leave room for a loaded two-core machine: a
    healthy gloo step answers in well under a second, so a bound of tens of seconds only ever fires
    on a real hang."""
    session = SessionPlan(plans if isinstance(plans, tuple) else (plans,), deadline)
    return run_trial_session(
        session, device="cpu", cuda_devices=[], timeout_s=timeout_s, workdir=workdir, env=env,
        on_progress=on_progress, startup_timeout_s=startup_timeout_s, port_source=port_source,
    )  # fmt: skip


def run_one(plan: TrialPlan, workdir: Path, **options: object) -> PlanResult:
    """``plan`` alone in its session, and its result."""
    (result,) = run_gloo(plan, workdir, **options).runs  # type: ignore[arg-type]
    return result


def processes_mentioning(text: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # exited while we looked
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def end_groups(pids: list[int]) -> None:
    """SIGKILL each process's group where it leads one (the runner starts each worker in its own
    session), else the process alone; never this process's own group."""
    for pid in pids:
        try:
            if os.getpgid(pid) == pid != os.getpgrp():
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
