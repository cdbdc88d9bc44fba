"""The runner's watchdog, timed: a rank silent for longer than its phase's bound is killed after that
bound -- never before it, and not much after (real gloo workers, a real hang).

The silence is measured from the workers' own last heartbeat writes (file mtimes) to the moment the
runner reports the fault, after the kill. Slack for a loaded 2-core machine: the kill may come up to
5x the bound late; a watchdog that waits 5x its bound fails.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from gloo_helpers import FAULTS_ON, gloo_plan, processes_mentioning, run_one

from topo_gate.trials.plan import TrialPlan, token_ladder
from topo_gate.trials.protocol import heartbeat_path
from topo_gate.trials.results import PlanResult
from topo_gate.trials.runner import Progress

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]

STEP_BOUND_S = 2.0
#: For a plan that must make steady progress past many step bounds: no healthy gloo step comes near it.
STEADY_BOUND_S = 10.0
STARTUP_BOUND_S = 60.0  # generous for torch's import on a loaded machine; far above 5x the step bound


def test_a_hung_step_is_killed_after_its_bound_not_before_and_not_5x_later(workdir: Path) -> None:
    plan = gloo_plan(backends=("gloo_ring", "gloo"), faults={"gloo_ring": "hang"})
    faults: list[tuple[float, object]] = []
    beats: list[tuple[int, int]] = []

    def on_progress(progress: Progress) -> None:
        if progress.fault is not None:
            faults.append((time.time(), progress.fault))
        elif progress.beat is not None:
            beats.append((progress.attempt, progress.beat.seq))

    result = _run_watched(plan, workdir, on_progress)
    assert len(faults) == 1, faults
    reported_at, fault = faults[0]
    assert (fault.status, fault.backend, fault.tokens) == ("timeout", "gloo_ring", 1)
    assert fault.reason == "rank 0 made no progress for 2 s in check of gloo_ring at 1 tokens" or (
        fault.reason == "rank 1 made no progress for 2 s in check of gloo_ring at 1 tokens"
    )
    # The watchdog fires on the rank that has been silent longest: the oldest last heartbeat.
    last_beats = [heartbeat_path(workdir / "attempt-1", rank).stat().st_mtime for rank in range(plan.tp)]
    silence = reported_at - min(last_beats)
    assert STEP_BOUND_S <= silence < 5 * STEP_BOUND_S, f"killed after {silence:.2f} s of silence"
    # Progress is one rank's heartbeat (rank 0): each new beat once, in order.
    first_attempt = [seq for attempt, seq in beats if attempt == 1]
    assert first_attempt and first_attempt == sorted(set(first_attempt)), beats
    # The hung backend costs one attempt; the next attempt measures the rest (startup bound, not step).
    assert result.attempts == 2
    assert result.backends["gloo_ring"].status == "timeout"
    assert result.backends["gloo"].status == "ok"


def test_a_rank_killed_by_a_signal_ends_the_attempt_at_once(workdir: Path) -> None:
    """A worker killed by a signal (as a GPU fault kills one) is a crash, reported by its signal, long
    before any bound: here the step bound is a minute and the hang never ends by itself."""
    plan = gloo_plan(backends=("gloo_ring", "gloo"), faults={"gloo_ring": "hang"})
    killed_at: list[float] = []

    def kill_a_worker_once_checking() -> None:
        beat = heartbeat_path(workdir / "attempt-1", 0)
        deadline = time.monotonic() + STARTUP_BOUND_S
        while not (beat.exists() and '"check"' in beat.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        victims = processes_mentioning(str(workdir / "attempt-1"))
        if victims:
            killed_at.append(time.monotonic())
            os.kill(victims[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_a_worker_once_checking)
    killer.start()
    result = run_one(plan, workdir, timeout_s=60.0, env=FAULTS_ON, startup_timeout_s=STARTUP_BOUND_S)
    killer.join()
    assert killed_at, "no worker to kill"
    failed = result.backends["gloo_ring"]
    assert failed.status == "failed" and "was killed by SIGKILL" in failed.reason, failed
    assert result.backends["gloo"].status == "ok"


def test_a_hang_after_hundreds_of_heartbeats_is_still_caught(workdir: Path) -> None:
    """Heartbeat numbers past 256 (any real probe's) must still count as "no change" when they repeat,
    and steady progress for longer than the step bound must not count as a hang (a bound no healthy
    step nears, so no load on this machine can pass for a hang)."""
    # The baseline hangs: a backend other than the baseline may stop early as a clear loser (before
    # the late hang), the baseline never does. Nine sizes interleave, so hundreds of heartbeats come
    # before the baseline's 200th call at one size.
    plan = gloo_plan(
        backends=("gloo", "gloo_ring"), faults={"gloo": "hang-late"}, rounds=80, tokens=token_ladder(256)
    )
    seqs: list[int] = []

    def on_progress(progress: Progress) -> None:
        if progress.beat is not None and progress.attempt == 1:
            seqs.append(progress.beat.seq)

    result = _run_watched(plan, workdir, on_progress, step_bound_s=STEADY_BOUND_S)
    assert max(seqs) > 256, f"the plan beat only {max(seqs)} times: make it longer"
    assert result.backends["gloo"].status == "timeout", result.backends["gloo"]
    assert result.backends["gloo_ring"].status == "ok", result.backends["gloo_ring"]


def _run_watched(
    plan: TrialPlan,
    workdir: Path,
    on_progress: Callable[[Progress], None],
    *,
    step_bound_s: float = STEP_BOUND_S,
) -> PlanResult:
    """The plan on gloo with faults on, under the step and start-up bounds these tests measure against."""
    return run_one(
        plan, workdir, timeout_s=step_bound_s, env=FAULTS_ON, on_progress=on_progress,
        startup_timeout_s=STARTUP_BOUND_S,
    )  # fmt: skip
