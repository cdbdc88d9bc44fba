"""One worker group per TP group measures every pattern, on gloo with real workers: start-up paid
once, a fault in one pattern leaving the other measured, and the deadline of ``--budget``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from gloo_helpers import FAULTS_ON, HANG_BOUND_S, gloo_plan, run_gloo

from topo_gate.profile.schema import PATTERNS
from topo_gate.trials.results import PlanResult, SessionResult

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]

SMALL = {"tokens": (1, 2), "rounds": 2}


def both(**faults: dict[str, str]) -> tuple:
    """A plan per pattern, ``faults`` by pattern."""
    return tuple(gloo_plan(pattern=p, faults=faults.get(p, {}), **SMALL) for p in PATTERNS)


def run(session: SessionResult, pattern: str) -> PlanResult:
    return next(result for result in session.runs if result.plan.pattern == pattern)


def measured(result: PlanResult) -> dict[str, str]:
    return {name: outcome.status for name, outcome in result.backends.items()}


def test_one_worker_group_measures_both_patterns_and_pays_start_up_once(workdir: Path) -> None:
    session = run_gloo(both(), workdir)
    assert session.attempts == 1 and session.dropped == {}
    assert [r.plan.pattern for r in session.runs] == list(PATTERNS)
    for result in session.runs:
        assert result.error is None and set(measured(result).values()) == {"ok"}
        assert result.attempts == 1
    # One spec for both patterns, one worker per rank, one rendezvous.
    spec = json.loads((workdir / "attempt-1" / "spec.json").read_text())
    assert [plan["pattern"] for plan in spec["plans"]] == list(PATTERNS)
    assert sorted(p.name for p in (workdir / "attempt-1").glob("worker.rank*.log")) == [
        "worker.rank0.log", "worker.rank1.log",
    ]  # fmt: skip
    # The evidence records the shared session once per run; each run's phases are its pattern's own.
    runs = [result.as_run() for result in session.runs]
    assert runs[0]["session"] == runs[1]["session"]
    record = runs[0]["session"]
    assert record["id"] == "tp2-cpu-0-1" and record["patterns"] == list(PATTERNS)
    assert record["wall_s"] == session.wall_s
    assert {"import", "rendezvous", "close"} <= set(record["phases_s"])
    for run_entry in runs:
        assert not {"import", "rendezvous", "close"} & set(run_entry["phases_s"])
        assert 0 < run_entry["wall_s"] <= record["wall_s"]
    for phase in ("check", "measure", "recheck"):
        total = sum(run_entry["phases_s"][phase] for run_entry in runs)
        assert abs(record["phases_s"][phase] - total) < 0.01


def test_a_crash_in_one_pattern_leaves_the_other_measured(workdir: Path) -> None:
    session = run_gloo(both(allreduce_rmsnorm={"gloo_ring": "crash"}), workdir, env=FAULTS_ON)
    plain, fused = run(session, "allreduce"), run(session, "allreduce_rmsnorm")
    # allreduce was done when the second pattern crashed: measured in the first attempt, kept.
    assert plain.attempts == 1 and set(measured(plain).values()) == {"ok"}
    assert fused.attempts == 2 and session.attempts == 2
    assert measured(fused) == {"gloo": "ok", "gloo_ring": "failed", "gloo_ring+rmsnorm": "ok"}
    assert "rank 1 exited with status 17" in fused.backends["gloo_ring"].reason
    # The same name in the other pattern is another measurement: not blamed there.
    assert plain.backends["gloo_ring"].status == "ok"


def test_a_hang_in_the_first_pattern_leaves_the_second_measured(workdir: Path) -> None:
    session = run_gloo(both(allreduce={"gloo_ring": "hang"}), workdir, timeout_s=HANG_BOUND_S, env=FAULTS_ON)
    plain, fused = run(session, "allreduce"), run(session, "allreduce_rmsnorm")
    assert measured(plain) == {"gloo": "ok", "gloo_ring": "timeout"}
    reason = plain.backends["gloo_ring"].reason
    assert f"no progress for {HANG_BOUND_S:g} s in check of gloo_ring at 1 tokens" in reason
    assert set(measured(fused).values()) == {"ok"} and fused.error is None


def test_a_pattern_failing_twice_outside_any_backend_is_failed_and_the_other_kept(workdir: Path) -> None:
    session = run_gloo(both(allreduce_rmsnorm={"_startup": "infra"}), workdir, env=FAULTS_ON)
    plain, fused = run(session, "allreduce"), run(session, "allreduce_rmsnorm")
    assert plain.error is None and plain.attempts == 1 and plain.retries == []
    assert "injected start-up failure" in fused.error and "starting allreduce_rmsnorm" in fused.error
    assert fused.attempts == 2 and len(fused.retries) == 1 and "relaunched once" in fused.retries[0]
    assert set(measured(fused).values()) == {"failed"}


def test_past_the_deadline_the_workers_start_no_further_pattern(workdir: Path) -> None:
    # The first pattern of an attempt always runs; the deadline is already past when the second
    # would start, on every rank's clock, so it is left out -- deterministically.
    session = run_gloo(both(), workdir, deadline=time.time() - 1)
    assert [r.plan.pattern for r in session.runs] == ["allreduce"]
    assert session.dropped == {"allreduce_rmsnorm": "the --budget deadline had passed when it was to start"}
    assert session.attempts == 1
    assert set(measured(session.runs[0]).values()) == {"ok"}
