"""The steps after timing, on gloo with real workers: the captured graphs checked again (fresh
inputs, negative zeros, odd sizes, right after a larger size), size transitions, layer-like graphs,
early stopping; and the runner's retries (rendezvous port, start-up faults)."""

from __future__ import annotations

import socket
import statistics
from pathlib import Path

from gloo_helpers import gloo_plan

from topo_gate.decide import transition_us
from topo_gate.trials.plan import token_ladder
from topo_gate.trials.runner import PlanResult, free_port, run_plan
from topo_gate.trials.worker.faults import SLOW_S, TRANSITION_S

FAULTS_ON = {"TOPO_GATE_ALLOW_FAULT_INJECTION": "1"}


def run(plan, workdir: Path, *, env=None, port_source=None) -> PlanResult:
    return run_plan(
        plan, device="cpu", cuda_devices=[], timeout_s=20.0, workdir=workdir, env=env,
        startup_timeout_s=60, port_source=port_source,
    )  # fmt: skip


def cell(result: PlanResult, backend: str, tokens: int) -> dict:
    return next(c for c in result.results if c["backend"] == backend and c["tokens"] == tokens)


def checked(result: PlanResult, backend: str) -> dict[int, str]:
    return {c["tokens"]: c["status"] for c in result.graph_checks if c["backend"] == backend}


def test_captured_calls_are_checked_again_at_ladder_and_odd_sizes(workdir: Path) -> None:
    result = run(gloo_plan(tokens=token_ladder(32)), workdir)
    assert result.error is None
    # every ladder size, plus 3 and 24 between the powers of two (3000 is beyond 32 tokens)
    for backend in ("gloo", "gloo_ring"):
        assert checked(result, backend) == dict.fromkeys([1, 2, 3, 4, 8, 16, 24, 32], "ok")
    assert all(c["max_abs_err"] == 0.0 for c in result.graph_checks)


def test_a_wrong_answer_between_ladder_sizes_disqualifies_the_sizes_around_it(workdir: Path) -> None:
    result = run(
        gloo_plan(tokens=token_ladder(32), faults={"gloo_ring": "wrong-odd"}), workdir, env=FAULTS_ON
    )
    assert checked(result, "gloo_ring")[24] == "wrong" and checked(result, "gloo_ring")[3] == "wrong"
    statuses = {t: cell(result, "gloo_ring", t)["status"] for t in token_ladder(32)}
    # 3 sits between 2 and 4, 24 between 16 and 32: those are out, the others stand
    assert statuses == {1: "ok", 2: "wrong", 4: "wrong", 8: "ok", 16: "wrong", 32: "wrong"}
    assert "captured graph, fresh inputs, after 32 tokens" in cell(result, "gloo_ring", 16)["reason"]
    assert result.backends["gloo_ring"].status == "wrong"
    assert {t: cell(result, "gloo", t)["status"] for t in token_ladder(32)} == dict.fromkeys(
        token_ladder(32), "ok"
    )


def test_an_answer_gone_stale_after_a_larger_size_is_caught(workdir: Path) -> None:
    # Right in every eager check (sizes ascend there); wrong on the first call after a larger size.
    result = run(gloo_plan(faults={"gloo_ring": "stale"}), workdir, env=FAULTS_ON)
    assert checked(result, "gloo_ring")[3] == "wrong"
    assert (
        cell(result, "gloo_ring", 2)["status"] == "wrong"
        and cell(result, "gloo_ring", 4)["status"] == "wrong"
    )
    assert cell(result, "gloo_ring", 1)["status"] == "ok"


def test_size_transitions_are_timed_right_after_the_largest_size(workdir: Path) -> None:
    result = run(gloo_plan(faults={"gloo_ring": "transition"}), workdir, env=FAULTS_ON)
    for tokens in (1, 2):
        slow = cell(result, "gloo_ring", tokens)
        assert len(slow["after_larger_us"]) == 3
        # one call of the replay after the largest size paid the injected clear
        assert transition_us(slow) > 0.5 * TRANSITION_S * 1e6
    assert "after_larger_us" not in cell(result, "gloo_ring", 4)  # nothing is larger than the largest
    assert "after_larger_us" not in cell(result, "gloo", 1)  # not a Lamport-style backend


def test_layer_graphs_time_the_faster_backends_with_the_gemm_alone(workdir: Path) -> None:
    # gloo (the baseline) made surely slower, so gloo_ring is the candidate at every size
    result = run(gloo_plan(faults={"gloo": "slow"}), workdir, env=FAULTS_ON)
    entries = {(e["backend"], e["tokens"]): e for e in result.context}
    for tokens in (1, 2, 4):
        for name in ("gemm", "gloo", "gloo_ring"):
            assert len(entries[(name, tokens)]["samples_us"]) == 9
        assert entries[("gloo", tokens)]["nbytes"] == tokens * 32 * 2
        baseline = statistics.median(entries[("gloo", tokens)]["samples_us"])
        # Every gloo call sleeps SLOW_S; gloo_ring's layer runs the same GEMM and reduction without it.
        # (Not "gloo_ring < SLOW_S": a descheduled rank on a loaded CPU makes a layer take that long.)
        assert baseline > SLOW_S * 1e6
        assert baseline > statistics.median(entries[("gloo_ring", tokens)]["samples_us"])


def test_clear_losers_stop_after_the_early_rounds(workdir: Path) -> None:
    result = run(gloo_plan(rounds=8, faults={"gloo_ring": "slow"}), workdir, env=FAULTS_ON)
    for tokens in (1, 2, 4):
        assert len(cell(result, "gloo_ring", tokens)["samples_us"]) == 5
        assert len(cell(result, "gloo", tokens)["samples_us"]) == 8


def test_a_taken_rendezvous_port_is_skipped_for_a_fresh_one(workdir: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        ports = iter([held.getsockname()[1]])
        result = run(gloo_plan(), workdir, port_source=lambda: next(ports, None) or free_port())
    assert result.error is None
    assert len(result.retries) == 1 and "is taken" in result.retries[0] and "fresh port" in result.retries[0]
    assert {o.status for o in result.backends.values()} == {"ok"}


def test_a_start_up_fault_is_retried_once(workdir: Path) -> None:
    result = run(gloo_plan(faults={"_startup": "infra-once"}), workdir, env=FAULTS_ON)
    assert result.error is None and result.attempts == 2
    assert "injected start-up failure" in result.retries[0] and "relaunched once" in result.retries[0]
    assert {o.status for o in result.backends.values()} == {"ok"}


def test_a_start_up_fault_twice_fails_the_plan_and_says_so(workdir: Path) -> None:
    result = run(gloo_plan(faults={"_startup": "infra"}), workdir, env=FAULTS_ON)
    assert result.attempts == 2 and len(result.retries) == 1
    assert "injected start-up failure" in result.error
    assert result.as_run()["error"] == result.error
    assert {o.status for o in result.backends.values()} == {"failed"}
