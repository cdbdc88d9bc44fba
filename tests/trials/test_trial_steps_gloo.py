"""The steps after timing, on gloo with real workers: the captured graphs checked again (fresh
inputs, negative zeros, odd sizes, right after a larger size), size transitions after several sizes,
layer-like graphs, early stopping; and the runner's retries (rendezvous port, start-up faults).

No assertion rests on how fast this machine is: a backend is made the loser or the winner by the
``slow`` fault (SLOW_S a call, ten times the widest gap between gloo backends under load), a
transition by the ``transition`` fault (TRANSITION_S once), and what must be timed regardless of
speed (a launcher's default path) is named in ``context_backends``."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from gloo_helpers import FAULTS_ON, gloo_plan, run_one

from topo_gate.decide import transition_us
from topo_gate.evidence.document import Result
from topo_gate.trials.plan import token_ladder
from topo_gate.trials.results import PlanResult
from topo_gate.trials.runner import free_port
from topo_gate.trials.worker.faults import TRANSITION_S

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]


def run(plan, workdir: Path, *, env=None, port_source=None) -> PlanResult:
    return run_one(plan, workdir, timeout_s=20.0, env=env, port_source=port_source)


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


def test_size_transitions_are_timed_after_each_larger_size_of_the_grid(workdir: Path) -> None:
    # Sizes 1..16: the grid is every other size down from the largest, 16 and 4. gloo_ring is a
    # launcher's default path, so every pair is timed whether or not it wins.
    plan = gloo_plan(
        tokens=token_ladder(16), faults={"gloo_ring": "transition"}, context_backends=("gloo_ring",)
    )
    assert plan.after_tokens == (4, 16)
    result = run(plan, workdir, env=FAULTS_ON)
    nbytes = {t: t * 32 * 2 for t in token_ladder(16)}
    expected = {1: [4, 16], 2: [4, 16], 4: [16], 8: [16]}
    for tokens, afters in expected.items():
        slow = cell(result, "gloo_ring", tokens)
        assert [entry["after_nbytes"] for entry in slow["after_sizes"]] == [nbytes[t] for t in afters]
        assert slow["after_larger_us"] == slow["after_sizes"][-1]["samples_us"]  # v1.1: after the largest
        for entry in slow["after_sizes"]:
            assert len(entry["samples_us"]) == 3
            # one call of each replay after a larger size paid the injected clear
            assert (
                transition_us(Result.from_record({**slow, "after_larger_us": entry["samples_us"]}))
                > 0.5 * TRANSITION_S * 1e6
            )
    assert "after_sizes" not in cell(result, "gloo_ring", 16)  # nothing is larger than the largest
    assert all("after_sizes" not in cell(result, "gloo", t) for t in token_ladder(16))  # not Lamport-style


def test_after_a_smaller_grid_size_a_transition_is_timed_only_where_a_plan_may_route(workdir: Path) -> None:
    # No backend can clear a margin of 1000x and gloo_ring is no default path: only the replays after
    # its largest size (decide's charge) are timed, never after the grid's 4, where no plan routes it.
    plan = gloo_plan(tokens=token_ladder(16), rounds=2, margin=1000.0, faults={"gloo_ring": "transition"})
    result = run(plan, workdir, env=FAULTS_ON)
    assert [e["after_nbytes"] for e in cell(result, "gloo_ring", 1)["after_sizes"]] == [16 * 64]
    assert result.context == []  # and no layer graphs: nothing to confirm


def test_a_backend_that_cleared_the_bar_is_timed_after_the_grid_and_in_the_layer_graphs(
    workdir: Path,
) -> None:
    # The baseline made a sure loser (SLOW_S a call): gloo_ring clears the bar at every size, so it is
    # timed after the grid's smaller size (2, of 1..8) too, and in the layer graphs beside the GEMM alone.
    faults = {"gloo_ring": "transition", "gloo": "slow"}
    result = run(
        gloo_plan(tokens=token_ladder(8), rounds=2, graph_calls=2, faults=faults), workdir, env=FAULTS_ON
    )
    assert [e["after_nbytes"] for e in cell(result, "gloo_ring", 1)["after_sizes"]] == [2 * 64, 8 * 64]
    entries = {(e["backend"], e["tokens"]): e for e in result.context}
    assert set(entries) == {(name, t) for name in ("gemm", "gloo", "gloo_ring") for t in (1, 2, 4, 8)}
    assert all(len(e["samples_us"]) == 9 for e in result.context)
    assert entries[("gloo", 4)]["nbytes"] == 4 * 32 * 2


def test_a_composite_that_cleared_the_bar_is_timed_in_the_layer_graphs(workdir: Path) -> None:
    # With fusion off a plan routes the fused pattern to the plain path + norm: it is confirmed too.
    plan = gloo_plan(
        pattern="allreduce_rmsnorm", tokens=(1, 2), rounds=2, graph_calls=2, faults={"gloo": "slow"}
    )
    result = run(plan, workdir, env=FAULTS_ON)
    assert {(e["backend"], e["tokens"]) for e in result.context} == {
        (name, t) for name in ("gemm", "gloo", "gloo_ring", "gloo_ring+rmsnorm") for t in (1, 2)
    }


def test_a_default_path_is_timed_in_context_even_where_it_loses(workdir: Path) -> None:
    # gloo_ring made a sure loser: stopped early as a clear loser, yet timed in the layer graphs and
    # rechecked at every size, because a launcher runs it by default; a loser that is no default
    # path is neither (only its one-call graph between the sizes is rechecked).
    losing: dict = {"rounds": 6, "graph_calls": 2, "faults": {"gloo_ring": "slow"}}
    result = run(gloo_plan(**losing, context_backends=("gloo_ring",)), workdir, env=FAULTS_ON)
    assert all(cell(result, "gloo_ring", t).get("stopped_early") for t in (1, 2, 4))
    assert {(e["backend"], e["tokens"]) for e in result.context} == {
        (name, t) for name in ("gemm", "gloo", "gloo_ring") for t in (1, 2, 4)
    }
    assert set(checked(result, "gloo_ring")) == {1, 2, 3, 4}
    assert result.as_run()["context_backends"] == ["gloo_ring"]
    alone = run(gloo_plan(**losing), workdir / "no-default", env=FAULTS_ON)
    assert alone.context == [] and set(checked(alone, "gloo_ring")) == {3}


def test_clear_losers_stop_after_the_early_rounds(workdir: Path) -> None:
    plan = gloo_plan(tokens=(1, 2), rounds=8, graph_calls=2, faults={"gloo_ring": "slow"})
    result = run(plan, workdir, env=FAULTS_ON)
    for tokens in (1, 2):
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
