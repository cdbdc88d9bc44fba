"""The runner and worker on gloo, with real processes: happy paths, injected faults, no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gloo_helpers import FAULTS_ON, HANG_BOUND_S, gloo_plan, processes_mentioning, run_one

from topo_gate.trials.protocol import heartbeat_path
from topo_gate.trials.results import PlanResult

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]


def run(plan, workdir: Path, *, timeout_s: float = 60.0, env=None) -> PlanResult:
    return run_one(plan, workdir, timeout_s=timeout_s, env=env)


def cells(result: PlanResult, backend: str) -> list[dict]:
    return [cell for cell in result.results if cell["backend"] == backend]


def assert_measured(result: PlanResult, backend: str) -> None:
    assert result.backends[backend].status == "ok", result.backends[backend]
    measured = cells(result, backend)
    assert [cell["tokens"] for cell in measured] == list(result.plan.tokens)
    for cell in measured:
        assert cell["status"] == "ok", cell
        assert len(cell["samples_us"]) == result.plan.rounds
        assert len(cell["per_rank_us"]) == result.plan.tp
        # group latency per round is the slowest rank's
        assert cell["samples_us"] == [max(column) for column in zip(*cell["per_rank_us"], strict=True)]
        assert all(skew is not None and skew >= 0 for skew in cell["skew_us"])
        assert cell["max_abs_err"] == 0.0 or result.plan.pattern == "allreduce_rmsnorm"


@pytest.mark.parametrize(
    ("tp", "pattern"),
    [
        (2, "allreduce"),
        (2, "allreduce_rmsnorm"),
        (4, "allreduce"),
        # TP8 as far as CPUs take it (4- and 8-GPU machines are not lent): eight real ranks, the ring
        # and the fused pattern checked exactly as on GPUs.
        pytest.param(8, "allreduce_rmsnorm", marks=pytest.mark.slow),
    ],
)
def test_every_backend_is_checked_and_measured(tp: int, pattern: str, workdir: Path) -> None:
    result = run(gloo_plan(tp, pattern), workdir)
    assert result.error is None and result.attempts == 1
    assert result.software["torch"]
    # where the time went: every worker phase, in seconds, within the session's wall time (a session
    # of one pattern: the run is the session)
    phases = (
        "import", "rendezvous", "admit", "setup", "check", "capture", "measure", "transition", "context",
        "recheck", "close",
    )  # fmt: skip
    assert list(result.phases_s) == list(phases)
    assert 0 < sum(result.phases_s.values()) <= result.wall_s
    for backend in result.plan.backends:
        assert_measured(result, backend)


def test_hang_is_killed_within_its_bound_and_the_others_still_measured(workdir: Path) -> None:
    plan = gloo_plan(backends=("gloo_ring", "gloo"), faults={"gloo_ring": "hang"})
    # The injected hang never returns: only the runner's watchdog (HANG_BOUND_S without progress) ends
    # it, and its reason says so. No elapsed-time assertion: a loaded machine is slow, not wrong.
    result = run(plan, workdir, timeout_s=HANG_BOUND_S, env=FAULTS_ON)
    hung = result.backends["gloo_ring"]
    assert hung.status == "timeout"
    assert f"no progress for {HANG_BOUND_S:g} s in check of gloo_ring at 1 tokens" in hung.reason
    assert [(c["tokens"], c["status"]) for c in cells(result, "gloo_ring")] == [(1, "timeout")]
    assert_measured(result, "gloo")
    assert result.attempts == 2  # when the kill came, against the bound: test_watchdog.py


def test_crash_is_reported_with_its_exit_status(workdir: Path) -> None:
    plan = gloo_plan(faults={"gloo": "crash"})
    result = run(plan, workdir, env=FAULTS_ON)
    crashed = result.backends["gloo"]
    assert crashed.status == "failed"
    assert "rank 1 exited with status 17" in crashed.reason
    assert "check of gloo at 1 tokens" in crashed.reason
    assert_measured(result, "gloo_ring")


def test_wrong_answer_disqualifies_the_backend_at_every_size_and_is_not_timed(workdir: Path) -> None:
    # (the fused pattern's tolerance check is exercised in-process by test_checks.py)
    plan = gloo_plan(faults={"gloo_ring": "wrong"})
    result = run(plan, workdir, env=FAULTS_ON)
    assert result.backends["gloo_ring"].status == "wrong"
    for cell in cells(result, "gloo_ring"):
        assert cell["status"] == "wrong"
        assert cell["samples_us"] == []
        assert "wrong answer on rank 1: out: max abs err" in cell["reason"]
        assert "first mismatch at [0, 0]" in cell["reason"]
    assert_measured(result, "gloo")
    assert result.attempts == 1  # a wrong answer is a verdict, not a fault: no relaunch


def test_fault_injection_needs_the_env_switch(workdir: Path) -> None:
    result = run(gloo_plan(faults={"gloo": "crash"}), workdir, env={"TOPO_GATE_ALLOW_FAULT_INJECTION": ""})
    assert result.error is not None and "fault injection" in result.error
    assert {o.status for o in result.backends.values()} == {"failed"}


def test_ctrl_c_leaves_no_worker_behind(workdir: Path) -> None:
    # The runner in its own process (as a user runs it), stuck on a hanging backend with a long bound.
    command = [
        sys.executable, "-m", "topo_gate.trials", "--tp", "2", "--hidden", "32", "--max-tokens", "2",
        "--rounds", "2", "--backends", "gloo", "--fault", "gloo=hang", "--timeout", "300",
        "--workdir", str(workdir), "--out", str(workdir / "evidence.json"),
    ]  # fmt: skip
    # A shell starts background jobs with SIGINT ignored, and children inherit that: a suite run as
    # `pytest &` would hand the runner a Ctrl-C it never sees. The runner gets the default, as in a terminal.
    runner = subprocess.Popen(
        command,
        env={**os.environ, **FAULTS_ON},
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        beat = heartbeat_path(workdir / "attempt-1", 1)
        deadline = time.monotonic() + 60
        while not (beat.exists() and '"check"' in beat.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(processes_mentioning(str(workdir))) == 3  # the runner and its two workers
        runner.send_signal(signal.SIGINT)
        _, stderr = runner.communicate(timeout=30)
    finally:
        runner.kill()
        runner.wait()
    assert runner.returncode == 130, stderr
    assert "interrupted" in stderr
    assert not processes_mentioning(str(workdir))
