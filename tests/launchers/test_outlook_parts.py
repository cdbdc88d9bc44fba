"""The outlook's parts one at a time (``launchers.outlook``): its values, the merging of served models
and of causes, the launcher settings it plans again with, the subsequence check behind them, and the
TP 1 lines. ``test_outlook.py`` checks the whole outlook on the bundled profiles; these check each
rule where it lives, with edge cases the bundled profiles never reach."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import pytest

from topo_gate.launchers.outlook import (
    NO_TP_ALL_REDUCE,
    Cause,
    DefaultSpan,
    Outcome,
    Outlook,
    Outlooks,
    Shape,
    _add_shape,
    _causes,
    _contains,
    _plan,
    _settings,
    outlooks,
    shapes,
)
from topo_gate.launchers.plan.explain import Unmeasured
from topo_gate.profile.io import load_profile

REPO = Path(__file__).resolve().parents[2]
H200 = load_profile(REPO / "profiles/h200-x2/h7168-run1.yaml")
MNNVL_FLAG = ("--flashinfer-allreduce-fusion-backend", "trtllm")


def _untimed(
    *paths: str, tokens: tuple[int, int] = (1, 2048), why: str = "why", action: str = "act"
) -> Unmeasured:
    runs = f"SGLang 0.5.23 runs {paths[0]} here by default"
    return Unmeasured(paths, tokens, ("allreduce",), False, runs, why, action, "", 1.0)


def _outlook(launcher: str, shape: Shape, estimate: str = "no knobs") -> Outlook:
    return Outlook(launcher, 2, shape, "serving", Outcome("", estimate))


# -- values --------------------------------------------------------------------------------------


SHAPE = Shape("deepseek-v3", 7168, "deepseek-v3", 61)
VALUES = {
    "Shape": (SHAPE, "hidden"),
    "DefaultSpan": (DefaultSpan("allreduce", 1, 2048, "nccl", "measured", 14336), "path"),
    "Cause": (Cause("runs", (1, 2), "why", "act"), "action"),
    "Outcome": (Outcome("", "no knobs"), "knobs"),
    "Outlook": (_outlook("vllm", SHAPE), "tp"),
    "Outlooks": (Outlooks(()), "notes"),
}


@pytest.mark.parametrize("name", list(VALUES))
def test_outlook_values_cannot_change_once_made(name: str) -> None:
    # One outlook is shared by every surface that renders it (show, the probe's summary, the
    # report) and compared by value to merge served models and inputs that would do the same:
    # a value changed after that comparison would make the merged headings lie.
    value, field = VALUES[name]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, 0)


# -- default spans -------------------------------------------------------------------------------


def test_a_span_of_one_token_count_says_its_size_not_up_to() -> None:
    # Counts made at run time (not one shared constant), beyond CPython's cached small ints: the
    # test holds for equal counts, not only for the same object.
    one = DefaultSpan("allreduce", int("4096"), int("4096"), "nccl", "measured", 14336)
    assert one.words == "nccl at 4096 tokens (56 MiB, measured)"
    many = DefaultSpan("allreduce", 2049, 4096, "nccl", "measured", 14336)
    assert many.words == "nccl at 2049-4096 tokens (up to 56 MiB, measured)"


# -- served models -------------------------------------------------------------------------------


def test_a_served_model_whose_launchers_differ_keeps_a_heading_of_its_own() -> None:
    v3, v32 = Shape("deepseek-v3", 7168, "deepseek-v3"), Shape("deepseek-v3.2", 7168, "deepseek-v3.2")
    found: list[tuple[Shape, list[Outlook]]] = []
    _add_shape(found, v3, [_outlook("vllm", v3, "no knobs")])
    _add_shape(found, v32, [_outlook("vllm", v32, "plan: X")])
    assert [shape.label for shape, _ in found] == ["deepseek-v3", "deepseek-v3.2"]
    assert found[1][1][0].outcome.estimate == "plan: X"


def test_served_models_whose_launchers_all_agree_share_one_heading() -> None:
    names = ("deepseek-v3", "deepseek-v3.2", "kimi-k2")
    found: list[tuple[Shape, list[Outlook]]] = []
    for name in names:
        shape = Shape(name, 7168, name)
        _add_shape(found, shape, [_outlook("vllm", shape), _outlook("sglang", shape)])
    ((merged, planned),) = found
    assert merged.label == "deepseek-v3 (also deepseek-v3.2, kimi-k2)"
    assert [entry.shape for entry in planned] == [merged, merged]


def test_a_served_model_with_fewer_launchers_is_not_merged() -> None:
    v3, v32 = Shape("deepseek-v3", 7168, "deepseek-v3"), Shape("deepseek-v3.2", 7168, "deepseek-v3.2")
    found: list[tuple[Shape, list[Outlook]]] = []
    _add_shape(found, v3, [_outlook("vllm", v3), _outlook("sglang", v3)])
    _add_shape(found, v32, [_outlook("vllm", v32)])
    assert len(found) == 2


# -- causes --------------------------------------------------------------------------------------


def test_two_paths_untimed_for_one_reason_are_one_cause_over_both_spans() -> None:
    plain = _untimed("mnnvl_sglang", "mnnvl_sglang_graph", tokens=(1, 2048))
    fused = _untimed("mnnvl_fused_sglang", "mnnvl_fused_sglang_graph", tokens=(4096, 8192))
    (cause,) = _causes([plain, fused])
    assert cause.runs == "SGLang 0.5.23 runs mnnvl_sglang and mnnvl_fused_sglang here by default"
    assert cause.tokens == (1, 8192)
    # The later path first: the merged span still starts at the smaller count and ends at the larger.
    (cause,) = _causes([fused, plain])
    assert cause.runs == "SGLang 0.5.23 runs mnnvl_fused_sglang and mnnvl_sglang here by default"
    assert cause.tokens == (1, 8192)


def test_paths_untimed_for_different_reasons_stay_two_causes() -> None:
    first, second = _untimed("a", why="one"), _untimed("b", why="two")
    assert [c.runs for c in _causes([first, second])] == [first.runs, second.runs]


# -- settings ------------------------------------------------------------------------------------


def test_the_settings_are_the_first_paths_cause() -> None:
    assert _settings([_untimed("mnnvl_fused_sglang")], "sglang") == (MNNVL_FLAG, {})
    # The cause belongs to the path the entry names first, not to one it lists after it.
    assert _settings([_untimed("mnnvl_fused_sglang", "nccl")], "sglang") == (MNNVL_FLAG, {})
    assert _settings([_untimed("nccl", "mnnvl_fused_sglang")], "sglang") == ((), {})


def test_a_path_with_no_cause_does_not_stop_the_causes_after_it() -> None:
    entries = [_untimed("nccl"), _untimed("custom_v2_sglang"), _untimed("mnnvl_fused_sglang")]
    args, env = _settings(entries, "sglang")
    assert args == MNNVL_FLAG and env == {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}


def test_one_flag_two_paths_need_is_given_once() -> None:
    entries = [_untimed("mnnvl_sglang"), _untimed("mnnvl_fused_sglang")]
    assert _settings(entries, "sglang") == (MNNVL_FLAG, {})


# -- the subsequence check -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "part", "expected"),
    [
        (("--a", "1", "--b", "2"), ("--a", "1"), True),  # at the start
        (("--a", "1", "--b", "2"), ("--b", "2"), True),  # at the end
        (("--a", "1", "--b", "2"), ("1", "--b"), True),  # in the middle, across two flags
        (("--a", "--a", "1"), ("--a", "1"), True),  # after a false start that overlaps it
        (("--a", "1"), ("--a",), True),
        (("--a", "1", "--b", "2"), ("--a", "2"), False),  # both tokens there, not in a row
        (("--a", "1"), ("1", "--a"), False),  # in the wrong order
        (("--a",), ("--a", "1"), False),  # longer than the tokens
        (("--b", "2"), ("--a",), False),
        ((), ("--a",), False),  # nothing to look in
    ],
)
def test_contains_finds_a_run_of_tokens_in_order(
    tokens: tuple[str, ...], part: tuple[str, ...], expected: bool
) -> None:
    assert _contains(tokens, part) is expected
    assert _contains(list(tokens), list(part)) is expected


# -- the public signatures -----------------------------------------------------------------------


def test_the_served_model_is_named_by_keyword() -> None:
    # Positional, a model name and a hidden size would be one slip apart.
    with pytest.raises(TypeError):
        shapes(H200, "llama-3-70b")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        outlooks(H200, "llama-3-70b")  # type: ignore[call-arg]


def test_the_users_settings_are_planned_with_by_keyword() -> None:
    # Positional, the env and the flags of the re-plan with the fix would be one swap apart.
    with pytest.raises(TypeError):
        _plan(H200, "vllm", 2, SHAPE, None, {}, ())  # type: ignore[call-arg]


# -- TP 1 ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tp1_and_2() -> Outlooks:
    """The 2x H200 profile as if its trials had also run at TP 1: one launcher, one model, so it
    plans once (TP 1 has no all-reduce to plan)."""
    trials = replace(H200.trials, tp=(1, 2))
    profile = replace(H200, trials=trials).with_digest()
    return outlooks(profile, model="llama-3-70b", launchers=("vllm",))


def test_tp_1_in_the_trials_is_a_note_and_the_tp_sizes_after_it_are_planned(tp1_and_2: Outlooks) -> None:
    assert tp1_and_2.notes == (f"TP 1: {NO_TP_ALL_REDUCE}",)
    assert [(entry.launcher, entry.tp) for entry in tp1_and_2.entries] == [("vllm", 2)]
    assert tp1_and_2.entries[0].outcome.fallback is None


def test_tp_2_in_the_trials_is_planned_with_no_note() -> None:
    found = outlooks(H200, model="llama-3-70b", launchers=("vllm",))
    assert found.notes == ()
    assert [entry.tp for entry in found.entries] == [2]
