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


def test_the_smallest_session_is_one_run_without_warm_ups() -> None:
    """The bounds are inclusive: one round, no warm-up, is a session; zero rounds or -1 warm-ups not."""
    assert [(s.arm, s.round) for s in schedule(["A"], runs=1, order="alternate", seed=0, warmups=0)] == [
        ("A", 1)
    ]
    with pytest.raises(ValueError, match="runs >= 1"):
        schedule(["A"], runs=0, order="alternate", seed=0)
    with pytest.raises(ValueError, match="warmups >= 0"):
        schedule(["A"], runs=1, order="alternate", seed=0, warmups=-1)


def test_an_order_read_from_a_command_line_is_compared_by_value() -> None:
    """``alternate`` built at run time (as click hands it over) is not the interned literal."""
    order = "".join(["alter", "nate"])
    slots = schedule(["A", "B", "C"], runs=4, order=order, seed=1, warmups=0)
    assert [s.arm for s in slots] == ["A", "B", "C"] * 4


def test_a_slot_is_frozen_and_the_schedules_options_are_keywords() -> None:
    slot = schedule(["A"], runs=1, order="alternate", seed=0)[0]
    with pytest.raises(AttributeError):
        slot.arm = "B"  # type: ignore[misc]
    with pytest.raises(TypeError):
        schedule(["A"], 1, "alternate", 0)  # type: ignore[misc]
