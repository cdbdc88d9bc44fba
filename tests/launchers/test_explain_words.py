"""``recommend --explain``'s words, rendered from hand-built figures: the summary line, the headline
(unmeasured defaults, the unlock), the priced share of steps, the step table and the size that binds,
the workload total, the one-line estimate, and the text laid out to a terminal's width (wrapped prose,
a table or stacked entries). The scenes are ``explain_scenes``'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from explain_scenes import (
    FAST,
    NCCL_ONLY,
    NOTHING,
    PLANNED,
    ROW,
    TWO_STEPS,
    choice,
    planned_for,
    row,
    upto,
)
from price_tables import FUSED, PLAIN

from topo_gate.launchers.knobs import PINNED
from topo_gate.launchers.plan import explain_words
from topo_gate.launchers.plan.choice import Candidate
from topo_gate.launchers.plan.costmodel import Step
from topo_gate.launchers.plan.explain import Explanation, Row, StepFigure, Totals, UnlockFigure, Unmeasured
from topo_gate.launchers.plan.unmeasured import NO_FIX
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Knobs

FAST_KNOBS = Knobs(args=("--fast",))


def entry(first: int, last: int, *, beyond: bool = False, path: str = "mystery") -> Unmeasured:
    return Unmeasured(
        paths=(path,),
        tokens=(first, last),
        patterns=(PLAIN,),
        beyond=beyond,
        runs=f"the default runs {path}",
        why="no price",
        action="re-probe",
        setting="",
        share=0.0,
    )


def totals(**over: Any) -> Totals:
    """The totals of a plan of ``--fast`` saving 1% over two priced steps."""
    base: dict[str, Any] = {
        "workload": "two",
        "workload_description": "a test mix",
        "layers": 10,
        "layers_known": True,
        "calls_per_step": 21,
        "sites_per_step": {PLAIN: 1, FUSED: 20},
        "measured_share": 1.0,
        "priced_tokens": (1, 4),
        "workload_steps": ((1, 0.5), (4, 0.5)),
        "default_us": 208.0,
        "plan_us": 206.0,
        "per_call": {PLAIN: (8.0, 6.0), FUSED: (10.0, 10.0)},
    }
    return Totals(**{**base, **over})


def explained(knobs: Knobs = FAST_KNOBS, refused: int = 3, **over: Any) -> Explanation:
    parts = {key: over.pop(key) for key in ("steps", "binding", "unmeasured", "unlock") if key in over}
    return Explanation(totals(**over), knobs, refused, **parts)


UNLOCK = UnlockFigure(
    knobs=Knobs(args=("--fast",), env={"A": "1"}, config={"k": 2}),
    saving_us=-10.123,
    saving=-0.048671,
    kernel="vllm_custom",
    after_bytes=3 * ROW + 100,
    after_tokens=3.098,
    at_tokens=2.0,
    at_most_us=2.469,
    bounded_by_bytes=1234567,
)
BINDING = StepFigure(
    tokens=1.0,
    nbytes=ROW,
    weight=None,
    default_us=208.0,
    plan_us=204.0,
    limit_us=208.08,
    changed=(PLAIN,),
    why=None,
    row_bytes=ROW,
)


def test_the_summary_of_a_plan_names_its_saving_and_where_it_binds() -> None:
    assert explain_words.summary_line(explained(binding=BINDING)) == (
        "plan: --fast (est. -1.0% all-reduce time per step); it comes closest to the default's limit at "
        "1 token (1 KiB)."
    )
    assert explain_words.summary_line(explained(plan_us=None, binding=replace(BINDING, tokens=2.5))) == (
        "plan: --fast; it comes closest to the default's limit at 2.5 tokens (1 KiB)."
    )
    assert (
        explain_words.summary_line(explained(plan_us=208.0 * 1.0123))
        == "plan: --fast (est. +1.2% all-reduce time per step)."
    )


def test_the_summary_of_no_knobs_counts_the_refused() -> None:
    assert explain_words.summary_line(explained(Knobs())) == (
        "no knobs: the launcher's default is the fastest measured choice over the workload; each of the "
        "3 other knob sets is slower than it beyond noise at some step size."
    )


def test_an_unmeasured_default_binds_first_with_its_fix() -> None:
    one = explained(Knobs(), unmeasured=(entry(1, 2048),), unlock=UNLOCK)
    assert explain_words.summary_line(one) == (
        "no knobs, because the default runs mystery at 1-2048 tokens of the workload, which is not "
        "measured: no price. Fix: re-probe."
    )
    other = replace(entry(8, 8, path="other"), why="other price", action="other fix")
    two = explained(Knobs(), unmeasured=(entry(4, 4), other))
    assert explain_words.summary_line(two) == (
        "no knobs, because the default runs mystery at 4 tokens of the workload, which is not "
        "measured: no price (and 1 more cause below). Fix: re-probe."
    )
    three = explained(Knobs(), unmeasured=(entry(4, 4), entry(8, 8), entry(9, 9)))
    assert "(and 2 more causes below)" in explain_words.summary_line(three)


def test_steps_beyond_the_table_are_named_after_the_cause() -> None:
    beyond = (entry(16, 16, beyond=True), entry(32, 64, beyond=True))
    tail = "; the steps at 16 and 32-64 tokens lie beyond the largest measured size and are left as they are."
    assert explain_words.summary_line(explained(Knobs(), unmeasured=(entry(1, 1), *beyond))).endswith(
        f"Fix: re-probe{tail}"
    )
    assert explain_words.summary_line(explained(unmeasured=beyond[:1])) == (
        "plan: --fast (est. -1.0% all-reduce time per step); the steps at 16 tokens lie beyond the largest "
        "measured size and are left as they are."
    )
    assert explain_words.summary_line(explained(Knobs(), unmeasured=beyond)).endswith(
        f"slower than it beyond noise at some step size{tail}"
    )


def test_a_plan_with_knobs_is_not_bound_by_an_unmeasured_default_elsewhere() -> None:
    assert explain_words.summary_line(explained(unmeasured=(entry(1, 1),), unlock=UNLOCK)) == (
        "plan: --fast (est. -1.0% all-reduce time per step)."
    )


def test_a_saving_refused_for_want_of_a_measurement_binds_no_knobs() -> None:
    assert explain_words.summary_line(explained(Knobs(), unlock=UNLOCK)) == (
        "no knobs, because --fast A=1 is refused only for want of one measurement: vllm_custom's size "
        "transition after 3.098 tokens. Fix: re-probe this node to measure it (see 'could unlock' below)."
    )
    assert (
        explain_words.summary_line(explained(Knobs(), unlock=replace(UNLOCK, after_tokens=1.0))).count(
            "after 1 token."
        )
        == 1
    )


# --- headline ---------------------------------------------------------------------------------


def test_the_headline_names_each_unmeasured_default_and_the_unlock() -> None:
    assert explain_words.headline(explained(unmeasured=(entry(1, 1), entry(2, 8)), unlock=UNLOCK)) == [
        "not measured: the default runs mystery at 1 tokens of this workload (no price): left as it is. "
        "To plan there: re-probe.",
        "not measured: the default runs mystery at 2-8 tokens of this workload (no price): left as it is. "
        "To plan there: re-probe.",
        "could unlock: --fast A=1: up to +10.1 us/step (+4.9%) over the workload if vllm_custom's size "
        "transition after 3.098 tokens (3.09766 KiB) is at most 2.5 us at each smaller size not yet timed after "
        "it (binding at 2 tokens; bounded today by the one "
        "after 1.17737 MiB); re-probe this node with evidence v1.2 (`topo-gate probe` with the served --model) "
        "to measure it.",
    ]


def test_an_unlock_with_no_bound_and_no_share_says_so() -> None:
    [line] = explain_words.headline(
        explained(unlock=replace(UNLOCK, bounded_by_bytes=None, saving=None, at_tokens=1.0))
    )
    assert "up to +10.1 us/step over the workload" in line
    assert "(binding at 1 token; nothing measured after a larger size);" in line


def test_nothing_to_head_with() -> None:
    assert explain_words.headline(explained()) == []


@pytest.mark.parametrize(
    ("count", "words"),
    [(1, "1 token"), (1.0, "1 token"), (2, "2 tokens"), (1.5, "1.5 tokens"), (0.5, "0.5 tokens")],
)
def test_token_counts_in_words(count: float, words: str) -> None:
    assert explain_words._tokens(count) == words


# --- priced share -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "priced", "steps", "words"),
    [
        (1.0, [1, 4], [[1, 0.5], [4, 0.5]], ""),
        (0.999, [1], [[1, 0.999], [16, 0.001]], ""),
        (
            0.998,
            [1],
            [[1, 0.998], [16, 0.002]],
            ", per 1-token step only: the 100% of steps that could be priced",
        ),
        (
            0.05,
            [8192],
            [[1, 0.95], [8192, 0.05]],
            ", per 8192-token step only: the 5% of steps that could be priced",
        ),
        (
            0.5,
            [1, 4],
            [[1, 0.25], [4, 0.25], [16, 0.5]],
            ", per 1 or 4-token step only: the 50% of steps that could be priced",
        ),
        (
            0.75,
            [1, 2, 4],
            [[1, 0.25], [2, 0.25], [4, 0.25], [16, 0.25]],
            ", per step without the 16-token steps (25% of steps), which could not be priced",
        ),
        (
            0.5,
            [1, 2, 4],
            [[1, 0.2], [2, 0.2], [4, 0.1], [16, 0.25], [32, 0.25]],
            ", per step without the 16- and 32-token steps (50% of steps), which could not be priced",
        ),
        (
            0.4,
            [1, 2, 4],
            [[1, 0.1], [2, 0.1], [4, 0.2], [16, 0.2], [32, 0.2], [64, 0.2]],
            ", per step without the 16-, 32- and 64-token steps (60% of steps), which could not be priced",
        ),
        (
            0.0,
            [],
            [[16, 0.5], [32, 0.5]],
            ", per step without the 16- and 32-token steps (100% of steps), which could not be priced",
        ),
    ],
)
def test_the_priced_share_names_the_few_priced_steps_or_the_ones_left_out(
    share, priced, steps, words
) -> None:
    assert (
        explain_words.priced_share(
            totals(measured_share=share, priced_tokens=tuple(priced), workload_steps=tuple(map(tuple, steps)))
        )
        == words
    )


# --- per-step lines and the total -------------------------------------------------------------


def step(
    tokens: float, default_us: float | None, plan_us: float | None, weight: float | None, **over: Any
) -> StepFigure:
    base: dict[str, Any] = {
        "tokens": tokens,
        "nbytes": int(tokens * ROW),
        "weight": weight,
        "default_us": default_us,
        "plan_us": plan_us,
        "limit_us": None,
        "changed": (),
        "why": None,
        "row_bytes": ROW,
    }
    return StepFigure(**{**base, **over})


STEPS = (
    step(1.0, 208.0, 204.0, 0.5, changed=(PLAIN,)),
    step(4.0, 208.0, 208.0, 0.25),
    step(16.0, None, None, 0.25, changed=(PLAIN,), why="not measured"),
)


def test_the_step_lines_are_a_table_with_the_size_that_binds() -> None:
    assert explain_words._step_lines(explained(steps=STEPS, binding=BINDING)) == [
        "per step (a step: 1 allreduce + 20 allreduce_rmsnorm all-reduces, plus each buffer's transition once):",
        "tokens  size    weight  default us/step  plan us/step  saving/step  note",
        "1       1 KiB   50.0%   208.00           204.00        +4.00",
        "4       4 KiB   25.0%   208.00           208.00        +0.00        same paths",
        "16      16 KiB  25.0%   n/a              n/a           n/a          not measured",
        "binds at 1 token (1 KiB): plan 204.0 us/step against the default's 208.0 (limit 208.1: its CI high "
        "plus its own transitions)",
    ]


def test_a_refused_binding_says_why_and_counts_no_plan_as_zero() -> None:
    lines = explain_words._step_lines(explained(binding=replace(BINDING, plan_us=None, why="step slower")))
    assert lines[-1].startswith("binds at 1 token (1 KiB): plan 0.0 us/step")
    assert lines[-1].endswith("plus its own transitions); step slower")


def test_step_lines_without_sites_or_steps() -> None:
    assert explain_words._step_lines(explained(sites_per_step={PLAIN: 0, FUSED: 21}))[0].startswith(
        "per step (a step: 21 allreduce_rmsnorm all-reduces"
    )
    assert explain_words._step_lines(explained(sites_per_step={})) == [
        "per step (a step:  all-reduces, plus each buffer's transition once):",
        "tokens  size  weight  default us/step  plan us/step  saving/step  note",
    ]


@pytest.mark.parametrize(
    ("value", "signed", "shown"),
    [
        (None, False, "n/a"),
        (None, True, "n/a"),
        (1.005, False, "1.01"),  # as the JSON keeps it (1.005), half up: not the float's 1.00499...
        (4.0, True, "+4.00"),
        (-0.5, True, "-0.50"),
        (0.0, False, "0.00"),
    ],
)
def test_figures_per_call_show_two_places(value, signed, shown) -> None:
    assert explain_words._cell_us(value, signed=signed) == shown


def test_the_total_names_the_workload_the_layers_and_each_patterns_call() -> None:
    assert explain_words._total_words(totals()) == (
        "workload 'two' (a test mix; 10 layers, 21 all-reduces per step): default 208.0 -> plan 206.0 us per "
        "step (-1.0%); allreduce 8.00 -> 6.00 us/call, allreduce_rmsnorm 10.00 -> 10.00 us/call"
    )
    partial = totals(
        layers_known=False,
        measured_share=0.5,
        priced_tokens=(1,),
        per_call={PLAIN: (None, None), FUSED: (10.0, 9.0)},
    )
    assert explain_words._total_words(partial) == (
        "workload 'two' (a test mix; 10 layers assumed, 21 all-reduces per step, per 1-token step only: the "
        "50% of steps that could be priced): default 208.0 -> plan 206.0 us per step (-1.0%); "
        "allreduce_rmsnorm 10.00 -> 9.00 us/call"
    )


def test_the_total_of_an_unmeasured_default() -> None:
    assert explain_words._total_words(totals(default_us=None)) == (
        "workload 'two': the default's paths were not measured at its sizes; nothing changed"
    )


# --- the one-line estimate --------------------------------------------------------------------


def test_the_estimate_of_a_plan() -> None:
    assert explain_words.estimate_line(PLANNED, TWO_STEPS) == (
        "plan: --fast: over the workload 'two': est. -1.0% all-reduce time vs default (208.0 -> 206.0 us "
        "per step, 10 layers)"
    )


@pytest.mark.parametrize("knobs", [Knobs(args=("--fast",)), Knobs(env={"A": "1"}), Knobs(config={"k": 1})])
def test_any_one_kind_of_knob_is_a_plan(knobs: Knobs) -> None:
    found = explain_words.estimate_line(
        choice(upto(2, "vllm_custom"), FAST, candidate=Candidate(knobs)), TWO_STEPS
    )
    assert found.startswith("plan: ") and ": est. -1.0% all-reduce time vs default" in found


def test_the_estimate_of_no_knobs_with_assumed_layers_and_part_of_the_steps() -> None:
    workload = Workload.from_weights("w", {1: 0.5, 16: 0.5})
    assumed = Step(layers=10, layers_known=False)
    found = explain_words.estimate_line(
        choice(NCCL_ONLY, FAST, candidate=NOTHING, workload=workload, step=assumed), workload
    )
    # The covered share comes before the figure it qualifies.
    assert found == (
        "no knobs: nothing measured beats the launcher's default by more than noise; on the 50% of the "
        "workload 'w' steps that could be priced: 208.0 us of all-reduce per step (10 layers assumed)"
    )


def test_the_priced_share_of_the_steps_is_said_to_the_percent() -> None:
    workload = Workload.from_weights("w", {1: 0.55, 16: 0.45})
    found = explain_words.estimate_line(
        choice(NCCL_ONLY, FAST, candidate=NOTHING, workload=workload), workload
    )
    assert "on the 55% of the workload 'w' steps that could be priced" in found


def test_the_estimate_gives_no_per_step_figure_below_half_the_steps_priced() -> None:
    workload = Workload.from_weights("w", {1: 0.4, 16: 0.6})
    found = explain_words.estimate_line(
        choice(NCCL_ONLY, FAST, candidate=NOTHING, workload=workload), workload
    )
    assert found.endswith(
        "only 40% of the workload 'w' steps could be priced: no per-step figure (recommend --explain shows "
        "each step)"
    )
    assert "us of all-reduce per step" not in found


def test_the_estimate_of_an_unmeasured_default_names_it_and_the_fix() -> None:
    workload = Workload.from_weights("w", {3: 0.5, 4: 0.5})
    found = explain_words.estimate_line(
        choice(NCCL_ONLY, FAST, default_plain=upto(8, "nccl_nvls"), workload=workload, candidate=NOTHING),
        workload,
        "vllm",
    )
    assert found.startswith(
        f"no knobs: vLLM {PINNED['vllm']} runs nccl_nvls here by default at 3-4 tokens (100% of the workload's steps), "
        "which is not measured. Fix: NCCL_NVLS_ENABLE=0"
    )
    assert "nothing changed" not in found and "beats" not in found


def test_the_estimate_of_an_unmeasured_default_no_setting_fixes_says_its_action() -> None:
    # A cause with no launcher setting: the fix is its action in words, never an empty one.
    workload = Workload.from_weights("w", {3: 0.5, 4: 0.5})
    found = explain_words.estimate_line(
        choice(
            NCCL_ONLY, FAST, default_plain=upto(8, "mixed_sites_vllm"), workload=workload, candidate=NOTHING
        ),
        workload,
        "vllm",
    )
    assert f"which is not measured. Fix: {NO_FIX} (recommend --explain" in found


def test_the_estimate_of_a_workload_priced_nowhere() -> None:
    workload = Workload.from_weights("far", {16: 1.0})
    assert explain_words.estimate_line(planned_for(workload), workload) == (
        "plan: --fast: the default's paths were not measured at any of the workload 'far' sizes"
    )


# --- the text to a terminal's width -----------------------------------------------------------

RANGES = [
    row(default_us=8.0, plan_us=4.0, plan="vllm_custom", note="plan measured faster", sites=3),
    row(first_tokens=2, last_tokens=None, source="-", note="beyond"),
]


SUMMARY = (
    "plan: --fast (est. -1.0% all-reduce time per step); it comes closest to the default's limit at 1 "
    "token (1 KiB)."
)


def text(width: int | None, ranges: list[Row] = RANGES, **over: Any) -> list[str]:
    return explain_words.render(ranges, explained(steps=STEPS[:1], binding=BINDING, **over), width).split(
        "\n"
    )


def test_without_a_width_every_part_is_one_line_each() -> None:
    found = text(None)
    assert found == [
        SUMMARY,
        "",
        "pattern    tokens  size     default runs  us/call  plan runs    us/call  saving/call  saving/step  priced    note",
        "allreduce  1       1 KiB    nccl          8.00     vllm_custom  4.00     +4.00        +12.00       isolated  plan measured faster",
        "allreduce  2+      > 1 KiB  nccl          n/a      nccl         n/a      n/a          n/a          -         beyond",
        "",
        "per step (a step: 1 allreduce + 20 allreduce_rmsnorm all-reduces, plus each buffer's transition once):",
        "tokens  size   weight  default us/step  plan us/step  saving/step  note",
        "1       1 KiB  50.0%   208.00           204.00        +4.00",
        "binds at 1 token (1 KiB): plan 204.0 us/step against the default's 208.0 (limit 208.1: its CI high "
        "plus its own transitions)",
        "workload 'two' (a test mix; 10 layers, 21 all-reduces per step): default 208.0 -> plan 206.0 us per "
        "step (-1.0%); allreduce 8.00 -> 6.00 us/call, allreduce_rmsnorm 10.00 -> 10.00 us/call",
    ]


def test_a_table_that_just_fits_stays_a_table() -> None:
    widest = max(len(line) for line in text(None)[2:5])
    assert text(widest)[2:5] == text(None)[2:5]
    assert text(widest + 1)[2:5] == text(None)[2:5]


def test_a_table_one_column_too_wide_is_stacked_one_entry_per_range() -> None:
    widest = max(len(line) for line in text(None)[2:5])
    assert text(widest - 1)[2:6] == [
        "allreduce 1 token (1 KiB): default nccl 8.00 us/call, plan vllm_custom 4.00 us/call, saving +4.00 "
        "us/call, +12.00 us/step",
        "  [isolated]: plan measured faster",
        "allreduce 2+ tokens (> 1 KiB): default nccl n/a us/call, plan nccl n/a us/call [-]: beyond",
        "",
    ]


def test_a_narrow_terminal_wraps_prose_and_stacked_entries_but_keeps_table_lines() -> None:
    assert text(60) == [
        "plan: --fast (est. -1.0% all-reduce time per step); it comes",
        "  closest to the default's limit at 1 token (1 KiB).",
        "",
        "allreduce 1 token (1 KiB): default nccl 8.00 us/call, plan",
        "  vllm_custom 4.00 us/call, saving +4.00 us/call, +12.00",
        "  us/step [isolated]: plan measured faster",
        "allreduce 2+ tokens (> 1 KiB): default nccl n/a us/call,",
        "  plan nccl n/a us/call [-]: beyond",
        "",
        "per step (a step: 1 allreduce + 20 allreduce_rmsnorm",
        "  all-reduces, plus each buffer's transition once):",
        "tokens  size   weight  default us/step  plan us/step  saving/step  note",
        "1       1 KiB  50.0%   208.00           204.00        +4.00",
        "binds at 1 token (1 KiB): plan 204.0 us/step against the",
        "  default's 208.0 (limit 208.1: its CI high plus its own",
        "  transitions)",
        "workload 'two' (a test mix; 10 layers, 21 all-reduces per",
        "  step): default 208.0 -> plan 206.0 us per step (-1.0%);",
        "  allreduce 8.00 -> 6.00 us/call, allreduce_rmsnorm 10.00 ->",
        "  10.00 us/call",
    ]


def test_the_headline_is_wrapped_with_the_summary() -> None:
    found = text(60, ranges=RANGES[:1], unmeasured=(entry(1, 1),))
    assert found[:5] == [
        "plan: --fast (est. -1.0% all-reduce time per step); it comes",
        "  closest to the default's limit at 1 token (1 KiB).",
        "not measured: the default runs mystery at 1 tokens of this",
        "  workload (no price): left as it is. To plan there:",
        "  re-probe.",
    ]


@pytest.mark.parametrize(("width", "used"), [(30, 40), (39, 40), (40, 40), (41, 41)])
def test_prose_never_wraps_narrower_than_forty_columns(width: int, used: int) -> None:
    words = "x" * 10 + (" " + "x" * 9) * 8
    lines = explain_words._wrapped(words, width)
    assert max(len(line) for line in lines) <= used
    assert len(lines[0]) > used - 10


def test_wrapping_keeps_long_words_and_hyphens_and_an_empty_line() -> None:
    assert explain_words._wrapped("", 40) == [""]
    assert explain_words._wrapped("a" * 50 + " b", 40) == ["a" * 50, "  b"]
    assert explain_words._wrapped("x" * 35 + " well-known", 40) == ["x" * 35, "  well-known"]
    assert explain_words._wrapped("anything", None) == ["anything"]


def test_a_table_pads_each_column_to_its_widest_cell() -> None:
    assert explain_words._table([("a", "bb", "c"), ("ccc", "d", ""), ("", "e", "f")]) == [
        "a    bb  c",
        "ccc  d",
        "     e   f",
    ]


def _step(tokens: int, default_us: float | None, weight: float = 0.1) -> StepFigure:
    return step(tokens, default_us, default_us, weight, nbytes=tokens * 16 * 1024)


def test_runs_of_unpriced_step_rows_fold_into_one() -> None:
    steps = [_step(1, None), _step(2, None), _step(4, None), _step(8, 5.0), _step(16, None), _step(32, None)]
    lines = explain_words._step_lines(explained(sites_per_step={PLAIN: 1}, steps=tuple(steps)))
    rows = [line.split() for line in lines[2:]]
    # Three unpriced neighbours fold (sized by their largest message); two stay rows of their own.
    assert [row[:2] for row in rows] == [["1-4", "64"], ["8", "128"], ["16", "256"], ["32", "512"]]
    assert rows[0][3:5] == ["30.0%", "n/a"] and rows[2][3] == "10.0%"


def test_a_run_longer_than_the_fold_threshold_is_folded_whole() -> None:
    steps = tuple(_step(tokens, None) for tokens in (1, 2, 4, 8))
    lines = explain_words._step_lines(explained(sites_per_step={PLAIN: 1}, steps=steps))
    assert [line.split()[:4] for line in lines[2:]] == [["1-8", "128", "KiB", "40.0%"]]


@pytest.mark.parametrize("priced_side", ["default_us", "plan_us"])
def test_a_row_one_side_prices_ends_a_run_of_unpriced_rows(priced_side: str) -> None:
    # Two unpriced rows stay rows of their own; the third has a figure on one side, so it is no third
    # unpriced neighbour to fold them with.
    half = replace(_step(4, None), **{priced_side: 5.0})
    steps = (_step(1, None), _step(2, None), half)
    lines = explain_words._step_lines(explained(sites_per_step={PLAIN: 1}, steps=steps))
    assert [line.split()[0] for line in lines[2:]] == ["1", "2", "4"]
