"""plan.py and cost.py: sizes, sessions, specs and the cost model are pure functions; properties over
many plans."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from gloo_helpers import gloo_plan
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.profile.schema import PATTERNS
from topo_gate.topology.capture import load_capture
from topo_gate.topology.model import build_node
from topo_gate.trials.backends import known_backend
from topo_gate.trials.cost import PHASES, estimate_phases, estimate_seconds
from topo_gate.trials.plan import (
    SessionPlan,
    TrialPlan,
    default_after_tokens,
    default_backends,
    make_sessions,
    nbytes,
    session_from_spec,
    session_to_spec,
    token_ladder,
    with_backends,
    with_tokens,
)


@given(st.integers(min_value=1, max_value=1 << 20))
def test_token_ladder_is_every_power_of_two_up_to_max(max_tokens: int) -> None:
    ladder = token_ladder(max_tokens)
    assert ladder[0] == 1 and ladder[-1] <= max_tokens < 2 * ladder[-1]
    assert all(b == 2 * a for a, b in zip(ladder, ladder[1:], strict=False))


def test_token_ladder_rejects_zero() -> None:
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        token_ladder(0)


def test_nbytes_is_tokens_times_hidden_times_itemsize() -> None:
    assert nbytes(1, 7168, "bfloat16") == 14336  # the 14 KiB decode message of DESIGN.md
    assert nbytes(4, 10, "float32") == 160


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize(("device", "baseline"), [("cuda", "nccl"), ("cpu", "gloo")])
def test_default_backends_start_with_the_baseline(pattern: str, device: str, baseline: str) -> None:
    backends = default_backends(pattern, device)
    assert backends[0] == baseline and len(backends) >= 2


def test_default_backends_are_registered() -> None:
    for pattern in PATTERNS:
        for device in ("cpu", "cuda"):
            assert all(known_backend(name) for name in default_backends(pattern, device))


@given(
    tp=st.integers(1, 8),
    pattern=st.sampled_from(PATTERNS),
    max_tokens=st.integers(1, 4096),
    rounds=st.integers(1, 30),
    device=st.sampled_from(["cpu", "cuda"]),
)
def test_spec_round_trips(tp: int, pattern: str, max_tokens: int, rounds: int, device: str) -> None:
    plans = tuple(gloo_plan(tp, p, tokens=token_ladder(max_tokens), rounds=rounds) for p in PATTERNS)
    session = SessionPlan(plans if pattern == "allreduce" else plans[1:], deadline=1e9 + rounds)
    assert session_from_spec(session_to_spec(session, device=device)) == (session, device)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group": (0,)}, "does not have tp=2 GPUs"),
        ({"group": (0, 0)}, "repeats a GPU"),
        ({"pattern": "allgather"}, "pattern 'allgather'"),
        ({"tokens": (4, 2)}, "strictly increasing"),
        ({"backends": ()}, "no backends"),
        ({"rounds": 0}, "rounds must be >= 1"),
        ({"faults": {"gloo": "explode"}}, "fault kinds"),
        ({"tp": 1, "group": (0,), "faults": {"gloo": "hang"}}, "needs tp >= 2"),
    ],
)
def test_invalid_plans_are_refused_with_the_reason(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gloo_plan(**change)


def test_bad_specs_are_refused() -> None:
    spec = session_to_spec(SessionPlan((gloo_plan(),)), device="cpu")
    with pytest.raises(ValueError, match="not a trial spec"):
        session_from_spec({**spec, "format": "something/else"})
    with pytest.raises(ValueError, match="bad trial spec"):
        session_from_spec({**spec, "surprise": 1})
    with pytest.raises(ValueError, match="bad trial spec"):
        session_from_spec({**spec, "plans": [{**spec["plans"][0], "surprise": 1}]})


@pytest.mark.parametrize(
    ("plans", "message"),
    [
        ((), "no plans"),
        ((gloo_plan(), gloo_plan()), "patterns repeat"),
        ((gloo_plan(), gloo_plan(pattern="allreduce_rmsnorm", hidden=64)), "differ in hidden"),
        ((gloo_plan(), gloo_plan(pattern="allreduce_rmsnorm", tokens=(1, 2))), "differ in tokens"),
    ],
)
def test_a_session_is_one_worker_group(plans: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionPlan(plans)


def test_transitions_follow_every_other_size_down_from_the_largest() -> None:
    assert default_after_tokens(token_ladder(8192)) == (2, 8, 32, 128, 512, 2048, 8192)
    assert default_after_tokens(token_ladder(16)) == (4, 16)
    assert default_after_tokens((1,)) == ()  # nothing is smaller than the only size
    assert gloo_plan(tokens=token_ladder(16)).after_tokens == (4, 16)
    with pytest.raises(ValueError, match="after_tokens"):
        gloo_plan(after_tokens=(8,))  # not a size of the ladder


def test_a_shorter_ladder_keeps_the_transition_grid_or_the_largest_only() -> None:
    plan = gloo_plan(tokens=token_ladder(16))
    assert with_tokens(plan, (1, 2, 4, 8)).after_tokens == (2, 8)
    largest_only = dataclasses.replace(plan, after_tokens=(16,))
    assert with_tokens(largest_only, (1, 2, 4, 8)).after_tokens == (8,)


def test_with_backends_keeps_only_their_faults() -> None:
    plan = gloo_plan(faults={"gloo": "hang", "gloo_ring": "crash"})
    assert with_backends(plan, ["gloo_ring"]).faults == {"gloo_ring": "crash"}


def alone(plan: TrialPlan) -> SessionPlan:
    return SessionPlan((plan,))


@given(rounds=st.integers(1, 40), extra=st.integers(1, 40))
def test_estimate_grows_with_rounds_sizes_and_backends(rounds: int, extra: int) -> None:
    plan = gloo_plan(rounds=rounds)
    for device in ("cpu", "cuda"):
        base = estimate_seconds(alone(plan), device)
        assert base > 0
        assert estimate_seconds(alone(dataclasses.replace(plan, rounds=rounds + extra)), device) > base
        assert estimate_seconds(alone(with_tokens(plan, token_ladder(64))), device) > base
        assert estimate_seconds(alone(dataclasses.replace(plan, backends=("gloo",))), device) < base


def test_a_session_pays_start_up_setup_and_close_once() -> None:
    both = SessionPlan(tuple(gloo_plan(pattern=p) for p in PATTERNS))
    separate = [alone(plan) for plan in both.plans]
    for device in ("cpu", "cuda"):
        one = estimate_phases(both, device)
        two = [estimate_phases(session, device) for session in separate]
        for phase in ("import", "rendezvous", "close"):
            assert one[phase] == two[0][phase] and sum(t[phase] for t in two) == 2 * one[phase]
        # gloo_ring and gloo_ring+rmsnorm share one instance: setup is paid for it once
        assert one["setup"] < sum(t["setup"] for t in two)
        for phase in ("check", "measure", "context", "recheck"):
            assert one[phase] == pytest.approx(sum(t[phase] for t in two))
        assert estimate_seconds(both, device) < sum(estimate_seconds(s, device) for s in separate)


def test_the_cuda_model_is_near_the_bundled_h200_probe_it_was_fitted_to() -> None:
    """Within 2x of each phase of profiles/h200-x2's first run (14 sizes, 10 + 16 backends), and of
    its total: what --budget and the progress bars rely on."""
    evidence = json.loads((REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json").read_text())
    sessions, _ = make_sessions(
        node_of("h200-x2.real"), [2], patterns=PATTERNS, device="cuda", dtype="bfloat16", hidden=7168,
        max_tokens=8192, graph_calls=32, rounds=15, warmup=3,
    )  # fmt: skip
    (session,) = sessions
    for run in evidence["runs"]:
        plan = session.plan(run["pattern"])
        alone_phases = estimate_phases(alone(plan), "cuda")
        for phase in ("import", "setup", "check", "capture", "measure", "context", "recheck"):
            measured, estimated = run["phases_s"][phase], alone_phases[phase]
            assert measured / 2 <= estimated <= measured * 2, (run["pattern"], phase, measured, estimated)
        assert run["wall_s"] / 2 <= estimate_seconds(alone(plan), "cuda") <= run["wall_s"] * 2
    assert set(estimate_phases(session, "cuda")) == set(PHASES)


REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "tests" / "fixtures" / "captures"


def node_of(capture: str):
    return build_node(load_capture(CAPTURES / f"{capture}.json"))


def test_make_sessions_measures_one_group_per_class_and_skips_impossible_tps() -> None:
    sessions, skipped = make_sessions(
        node_of("rtx-pro-6000-pcie-x8.synthetic"), [1, 2, 4, 8, 16], patterns=["allreduce"], device="cuda",
        dtype="bfloat16", hidden=7168, max_tokens=16, graph_calls=32, rounds=15, warmup=3,
    )  # fmt: skip
    plans = [plan for session in sessions for plan in session.plans]
    assert [(p.tp, p.group, p.group_class) for p in plans] == [
        (2, (0, 1), "pix"),
        (4, (0, 1, 2, 3), "node"),
        (8, tuple(range(8)), "no-p2p"),
    ]
    assert all(isinstance(p, TrialPlan) and p.backends[0] == "nccl" for p in plans)
    assert [s.tp for s in skipped] == [1, 16]
    assert (
        "no all-reduce" in skipped[0].reason and skipped[1].reason == "needs 16 GPUs, this node has 8 usable"
    )


def test_make_sessions_puts_every_pattern_of_a_group_in_one_session() -> None:
    defaults = {(2, "nvswitch", "allreduce"): ("vllm_custom",)}
    sessions, _ = make_sessions(
        node_of("h200-x2.real"), [2], patterns=PATTERNS, device="cuda", dtype="bfloat16", hidden=7168,
        max_tokens=16, graph_calls=32, rounds=15, warmup=3, margin=0.1, context_backends=defaults,
    )  # fmt: skip
    (session,) = sessions
    assert session.patterns == PATTERNS and session.label() == "TP2 nvswitch"
    assert session.plan("allreduce").context_backends == ("vllm_custom",)
    assert session.plan("allreduce_rmsnorm").context_backends == ()
    assert {plan.margin for plan in session.plans} == {0.1}


def test_make_sessions_says_why_mig_gpus_leave_no_group() -> None:
    plans, skipped = make_sessions(
        node_of("a100-mig-x2.synthetic"), [2], patterns=["allreduce"], device="cuda",
        dtype="bfloat16", hidden=4096, max_tokens=16, graph_calls=32, rounds=15, warmup=3,
    )  # fmt: skip
    assert plans == []
    assert "MIG enabled" in skipped[0].reason and "needs 2 GPUs, this node has 1 usable" in skipped[0].reason
