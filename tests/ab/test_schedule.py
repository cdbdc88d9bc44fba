"""The order of an A/B session: warm-ups first, then every arm once per round."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.ab.schedule import schedule


def test_alternate_runs_a_warmup_per_arm_then_the_arms_in_order_every_round() -> None:
    slots = schedule(["default", "plan"], runs=3, order="alternate", seed=0)
    assert [(s.arm, s.round) for s in slots] == [
        ("default", None),
        ("plan", None),
        ("default", 1),
        ("plan", 1),
        ("default", 2),
        ("plan", 2),
        ("default", 3),
        ("plan", 3),
    ]
    assert [s.index for s in slots] == list(range(8))
    assert [s.warmup for s in slots[:3]] == [True, True, False]


@given(
    arms=st.lists(st.sampled_from(["default", "plan", "nccl"]), min_size=1, max_size=3, unique=True),
    runs=st.integers(1, 8),
    warmups=st.integers(0, 2),
    seed=st.integers(0, 2**32),
)
def test_shuffle_gives_each_round_a_permutation_and_the_same_seed_the_same_order(
    arms, runs, warmups, seed
) -> None:
    slots = schedule(arms, runs=runs, order="shuffle", seed=seed, warmups=warmups)
    assert slots == schedule(arms, runs=runs, order="shuffle", seed=seed, warmups=warmups)
    assert [s.arm for s in slots[: len(arms) * warmups]] == [a for a in arms for _ in range(warmups)]
    for round_index in range(1, runs + 1):
        assert sorted(s.arm for s in slots if s.round == round_index) == sorted(arms)


def test_shuffle_does_change_the_order_between_rounds() -> None:
    slots = schedule(["default", "plan", "nccl"], runs=10, order="shuffle", seed=1)
    orders = {tuple(s.arm for s in slots if s.round == r) for r in range(1, 11)}
    assert len(orders) > 1


@pytest.mark.parametrize(
    "arms, runs, order",
    [
        (["default", "default"], 3, "alternate"),
        ([], 3, "alternate"),
        (["default"], 0, "alternate"),
        (["a"], 3, "abba"),
    ],
)
def test_bad_schedules_are_refused(arms, runs, order) -> None:
    with pytest.raises(ValueError):
        schedule(arms, runs=runs, order=order, seed=0)
