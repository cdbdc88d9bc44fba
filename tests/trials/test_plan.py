"""plan.py: sizes, specs and the cost model are pure functions; properties over many plans."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from gloo_helpers import gloo_plan
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.topology.capture import load_capture
from topo_gate.topology.model import build_node
from topo_gate.trials.backends import known_backend
from topo_gate.trials.plan import (
    PATTERNS,
    TrialPlan,
    default_backends,
    estimate_seconds,
    make_plans,
    nbytes,
    plan_from_spec,
    plan_to_spec,
    token_ladder,
    with_backends,
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
    plan = gloo_plan(tp, pattern, tokens=token_ladder(max_tokens), rounds=rounds)
    assert plan_from_spec(plan_to_spec(plan, device=device)) == (plan, device)


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
    spec = plan_to_spec(gloo_plan(), device="cpu")
    with pytest.raises(ValueError, match="not a trial spec"):
        plan_from_spec({**spec, "format": "something/else"})
    with pytest.raises(ValueError, match="bad trial spec"):
        plan_from_spec({**spec, "surprise": 1})


def test_with_backends_keeps_only_their_faults() -> None:
    plan = gloo_plan(faults={"gloo": "hang", "gloo_ring": "crash"})
    assert with_backends(plan, ["gloo_ring"]).faults == {"gloo_ring": "crash"}


@given(rounds=st.integers(1, 40), extra=st.integers(1, 40))
def test_estimate_grows_with_rounds_sizes_and_backends(rounds: int, extra: int) -> None:
    plan = gloo_plan(rounds=rounds)
    for device in ("cpu", "cuda"):
        base = estimate_seconds(plan, device)
        assert base > 0
        assert estimate_seconds(dataclasses.replace(plan, rounds=rounds + extra), device) > base
        assert estimate_seconds(dataclasses.replace(plan, tokens=token_ladder(64)), device) > base
        assert estimate_seconds(dataclasses.replace(plan, backends=("gloo",)), device) < base


CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


def node_of(capture: str):
    return build_node(load_capture(CAPTURES / f"{capture}.json"))


def test_make_plans_measures_one_group_per_class_and_skips_impossible_tps() -> None:
    plans, skipped = make_plans(
        node_of("rtx-pro-6000-pcie-x8.synthetic"), [1, 2, 4, 8, 16], patterns=["allreduce"], device="cuda",
        dtype="bfloat16", hidden=7168, max_tokens=16, graph_calls=32, rounds=15, warmup=3,
    )  # fmt: skip
    assert [(p.tp, p.group, p.group_class) for p in plans] == [
        (2, (0, 1), "pix"),
        (4, (0, 1, 2, 3), "node"),
        (8, tuple(range(8)), "no-p2p"),
    ]
    assert all(isinstance(p, TrialPlan) and p.backends[0] == "nccl" for p in plans)
    assert [s.tp for s in skipped] == [1, 16]
    assert "no all-reduce" in skipped[0].reason and skipped[1].reason == "node has 8 usable GPUs"


def test_make_plans_says_why_mig_gpus_leave_no_group() -> None:
    plans, skipped = make_plans(
        node_of("a100-mig-x2.synthetic"), [2], patterns=["allreduce"], device="cuda",
        dtype="bfloat16", hidden=4096, max_tokens=16, graph_calls=32, rounds=15, warmup=3,
    )  # fmt: skip
    assert plans == []
    assert "MIG enabled" in skipped[0].reason and "node has 1 usable GPU" in skipped[0].reason
