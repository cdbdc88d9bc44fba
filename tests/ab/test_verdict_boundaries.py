"""The A/B verdict at its exact boundaries (topo_gate/ab/verdict.py): a CI that only touches the
margin or 1, arms with no, one or two successful runs, the reasons' words for either direction,
``overall``'s choice, the defaults ``ab`` relies on, and the exit code of every verdict."""

from __future__ import annotations

import dataclasses
import json

import pytest

from topo_gate.ab.benchmarks import HIGHER, LOWER
from topo_gate.ab.verdict import (
    EXIT_CODES,
    IDENTICAL,
    NO_VERDICT,
    REGRESSION,
    SAME,
    VERDICTS,
    WIN,
    Comparison,
    compare,
    identical,
    overall,
    summarize,
)

BASE = {1: 100.0, 2: 101.0, 3: 102.0, 4: 99.0, 5: 100.0}
# 1.25 is 5/4, so every product, median and ratio of medians below is exact: each bootstrap draw is
# 1.25 (or 1 / 1.25, correctly rounded, which is what ``judge`` computes for the margin's far side).
QUARTER_MORE = {r: v * 1.25 for r, v in BASE.items()}
EXCLUDES = "excludes 1 but reaches into the margin"


def _within(margin: str, words: str) -> str:
    return f"within the {margin} margin: the CI {words}"


def _clear(better: str, margin: str, side: str) -> str:
    return f"{better} is better: the CI is clear of the {margin} margin on the {side} side"


# (plan, default) whose every round differs by exactly that ratio
BY_RATIO = {1.25: (QUARTER_MORE, BASE), 0.8: (BASE, QUARTER_MORE)}


@pytest.mark.parametrize(
    "ratio, direction, margin, verdict, reason",
    [
        # a CI of exactly [1.25, 1.25] against a margin of 24%, exactly 25% and 26%
        (1.25, HIGHER, 0.24, WIN, _clear("higher", "24%", "better")),
        (1.25, HIGHER, 0.25, SAME, _within("25%", EXCLUDES)),
        (1.25, HIGHER, 0.26, SAME, _within("26%", EXCLUDES)),
        (1.25, LOWER, 0.24, REGRESSION, _clear("lower", "24%", "worse")),
        (1.25, LOWER, 0.25, SAME, _within("25%", EXCLUDES)),
        (1.25, LOWER, 0.26, SAME, _within("26%", EXCLUDES)),
        # 0.8 = 1 / 1.25: the margin's lower bound
        (0.8, HIGHER, 0.24, REGRESSION, _clear("higher", "24%", "worse")),
        (0.8, HIGHER, 0.25, SAME, _within("25%", EXCLUDES)),
        (0.8, HIGHER, 0.26, SAME, _within("26%", EXCLUDES)),
        (0.8, LOWER, 0.24, WIN, _clear("lower", "24%", "better")),
        (0.8, LOWER, 0.25, SAME, _within("25%", EXCLUDES)),
        (0.8, LOWER, 0.26, SAME, _within("26%", EXCLUDES)),
    ],
)
def test_a_ci_exactly_at_the_margin_is_not_clear_of_it(ratio, direction, margin, verdict, reason) -> None:
    plan, default = BY_RATIO[ratio]
    found = compare("plan", plan, default, direction=direction, margin=margin)
    assert (found.pairs, found.ratio, found.ci) == (5, ratio, (ratio, ratio))
    assert (found.verdict, found.reason) == (verdict, reason)


@pytest.mark.parametrize(
    "direction, margin, reason",
    [
        # margin 0: both bounds are 1.0 itself, so a CI of exactly [1, 1] touches both and clears neither
        (HIGHER, 0.0, _within("0%", "includes 1")),
        (LOWER, 0.0, _within("0%", "includes 1")),
        (HIGHER, 0.02, _within("2%", "includes 1")),
        (LOWER, 0.02, _within("2%", "includes 1")),
    ],
)
def test_equal_medians_give_a_ci_of_exactly_one_that_includes_1(direction, margin, reason) -> None:
    found = compare("plan", dict(BASE), BASE, direction=direction, margin=margin)
    assert (found.ratio, found.ci) == (1.0, (1.0, 1.0))
    assert (found.verdict, found.reason) == (SAME, reason)


def test_a_direction_read_from_a_record_words_the_reason_alike() -> None:
    # show and report re-derive comparisons with the direction a record's JSON holds: an equal
    # string, not the constant itself
    direction = json.loads('{"direction": "higher"}')["direction"]
    assert direction == HIGHER and direction is not HIGHER
    found = compare("plan", QUARTER_MORE, BASE, direction=direction, margin=0.24)
    assert (found.verdict, found.reason) == (WIN, _clear("higher", "24%", "better"))


@pytest.mark.parametrize(
    "plan, default, reason",
    [
        ({r: None for r in BASE}, BASE, "plan has 0 successful runs of 5 (a verdict needs 3)"),
        (
            {**BASE, 2: None, 3: None, 4: None, 5: None},
            BASE,
            "plan has 1 successful run of 5 (a verdict needs 3)",
        ),
        ({**BASE, 3: None, 4: None, 5: None}, BASE, "plan has 2 successful runs of 5 (a verdict needs 3)"),
        (BASE, {1: 100.0, 2: None, 3: None}, "default has 1 successful run of 3 (a verdict needs 3)"),
        (BASE, {1: 100.0, 2: None, 3: 102.0}, "default has 2 successful runs of 3 (a verdict needs 3)"),
    ],
)
def test_an_arm_short_of_three_successes_pairs_nothing(plan, default, reason) -> None:
    # rounds where both arms succeeded still count as no pairs: there is no ratio to pair them for
    assert compare("plan", plan, default, direction=HIGHER).to_dict() == {
        "arm": "plan",
        "against": "default",
        "pairs": 0,
        "ratio": None,
        "ci": None,
        "verdict": NO_VERDICT,
        "reason": reason,
    }


def test_three_successes_are_enough_for_a_verdict() -> None:
    found = compare("plan", {**QUARTER_MORE, 4: None, 5: None}, BASE, direction=HIGHER)
    assert (found.pairs, found.ratio, found.verdict) == (3, 1.25, WIN)


def test_an_identical_arm_pairs_nothing_and_says_why() -> None:
    assert identical("nccl").to_dict() == {
        "arm": "nccl",
        "against": "default",
        "pairs": 0,
        "ratio": None,
        "ci": None,
        "verdict": IDENTICAL,
        "reason": "nccl runs the default's command and environment unchanged",
    }


@pytest.mark.parametrize(
    "verdict, code",
    [(WIN, 0), (SAME, 0), (IDENTICAL, 0), (REGRESSION, 1), (NO_VERDICT, 1)],
)
def test_ab_exits_0_unless_a_regression_or_no_verdict(verdict, code) -> None:
    assert EXIT_CODES[verdict] == code


def test_every_verdict_has_an_exit_code() -> None:
    assert set(EXIT_CODES) == set(VERDICTS)


PLAN = "plan"


def _named(arm: str, verdict: str = SAME) -> Comparison:
    return Comparison(arm, 5, 1.0, (1.0, 1.0), verdict, "")


@pytest.mark.parametrize(
    "arms, chosen",
    [
        (["nccl", "tuned"], 0),  # no plan: the first, not the last
        (["tuned", "plan"], 1),  # a name sorting after "plan" is still not the plan
        (["plan", "tuned"], 0),
        (["nccl"], 0),
    ],
)
def test_overall_is_the_plan_else_the_first(arms, chosen) -> None:
    comparisons = [_named(arm) for arm in arms]
    assert overall(comparisons) is comparisons[chosen]


def test_overall_of_no_comparisons_is_none() -> None:
    assert overall([]) is None


def test_overall_finds_a_plan_named_in_a_record() -> None:
    # record_check re-derives comparisons under the arm names its JSON holds
    name = json.loads('{"arm": "plan"}')["arm"]
    assert name == PLAN and name is not PLAN  # the literal "plan" in overall is this same interned object
    comparisons = [_named("nccl", REGRESSION), _named(name, WIN)]
    assert overall(comparisons) is comparisons[1]


def test_compare_takes_its_method_options_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        compare("plan", BASE, BASE, HIGHER)  # type: ignore[misc]


# 15 rounds of irregular values: enough distinct resampled medians that the CI's upper end moves
# with one resample more or less, or another seed.
NOISY_DEFAULT = {r: 100.0 + r * 37 % 23 for r in range(1, 16)}
NOISY_PLAN = {r: 100.0 + r * 53 % 29 for r in range(1, 16)}


@pytest.mark.parametrize("other", [{"resamples": 1999}, {"resamples": 2001}, {"seed": 1}, {"seed": -1}])
def test_compare_defaults_to_2000_resamples_and_seed_0(other) -> None:
    # docs/ab.md's 2000 resamples and ab's --seed default 0: a caller leaving them out gets that CI
    default = compare("plan", NOISY_PLAN, NOISY_DEFAULT, direction=HIGHER)
    assert default == compare("plan", NOISY_PLAN, NOISY_DEFAULT, direction=HIGHER, resamples=2000, seed=0)
    assert default.ci != compare("plan", NOISY_PLAN, NOISY_DEFAULT, direction=HIGHER, **other).ci


@pytest.mark.parametrize(
    "value, field",
    [
        (summarize("default", BASE), "median"),
        (compare("plan", QUARTER_MORE, BASE, direction=HIGHER), "verdict"),
    ],
    ids=["summary", "comparison"],
)
def test_summaries_and_comparisons_cannot_be_changed(value, field) -> None:
    # overall returns one of the comparisons themselves, and a record writes both it and the list:
    # a change to one would make the record's verdict and its comparison disagree
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)
