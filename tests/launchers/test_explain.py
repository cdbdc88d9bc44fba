"""``recommend --explain``'s figures piece by piece, on hand-built choices: the range rows (their
notes, folding and JSON), the per-step figures and the size that binds, the default paths not
measured, what a missing measurement could unlock, the workload totals and the knob words
(``test_explain_words.py`` renders them).

The scenes are small: 1 KiB tokens, rungs at 1, 2, 4 and 8 tokens, a step of 1 plain and 20 fused
all-reduce sites (10 known layers), routes written by hand as in ``test_costmodel.py``.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest
from explain_scenes import (
    FAST,
    FLAGGED,
    NCCL_ONLY,
    NOTHING,
    PLANNED,
    ROW,
    SIZES,
    TWO_STEPS,
    choice,
    planned_for,
    row,
    upto,
)
from price_tables import FUSED, PLAIN, flat

from topo_gate._units import stored
from topo_gate.launchers.knobs import PINNED
from topo_gate.launchers.plan import explain
from topo_gate.launchers.plan.choice import Candidate, Unlock
from topo_gate.launchers.plan.costmodel import Piece, Price, Site, Step, StepCheck
from topo_gate.launchers.plan.explain import Row
from topo_gate.launchers.plan.explain_words import row_size, row_tokens, token_span
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Knobs

# --- token spans, sizes, rounding -------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "last", "words"),
    [
        (7, 7, "7"),
        (1, 2, "1-2"),
        (1, 1024, "1-1024"),
        (8, 7, "8-7"),
        # equal counts computed apart (as a row's two ends are): equal by value, not the same object
        (8192, int("8192"), "8192"),
    ],
)
def test_a_token_span_of_one_count_is_that_count(first: int, last: int, words: str) -> None:
    assert token_span(first, last) == words


@pytest.mark.parametrize(
    ("first", "last", "size", "tokens"),
    [
        (1, 1, "1 KiB", "1"),
        (1000, int("1000"), "1000 KiB", "1000"),
        (3, 4, "up to 4 KiB", "3-4"),
        (9, None, "> 8 KiB", "9+"),
        (1, None, "> 0 B", "1+"),
    ],
)
def test_a_range_names_its_largest_message_and_its_tokens(
    first: int, last: int | None, size: str, tokens: str
) -> None:
    shown = row(first_tokens=first, last_tokens=last)
    assert (row_size(shown), row_tokens(shown)) == (size, tokens)


@pytest.mark.parametrize(
    ("default_us", "plan_us", "saving"),
    [(8.0, 4.0, 4.0), (8.0, 8.0, 0.0), (None, 4.0, None), (8.0, None, None)],
)
def test_a_saving_needs_both_prices(default_us, plan_us, saving) -> None:
    assert row(default_us=default_us, plan_us=plan_us).saving_us == saving


def test_a_range_as_data_rounds_to_three_places_and_prices_the_step_by_its_sites() -> None:
    priced = row(first_tokens=3, last_tokens=4, default_us=8.12345, plan_us=4.0, sites=3, note="x")
    assert priced.to_json() == {
        "pattern": PLAIN,
        "tokens": [3, 4],
        "bytes": [3 * ROW, 4 * ROW],
        "default": "nccl",
        "plan": "nccl",
        "default_us_per_call": 8.123,
        "plan_us_per_call": 4.0,
        "saving_us_per_call": 4.123,
        "saving_us_per_step": 12.37,
        "source": "isolated",
        "note": "x",
    }


def test_an_open_unpriced_range_as_data_has_no_top_and_no_prices() -> None:
    found = row(first_tokens=9, last_tokens=None).to_json()
    assert found["tokens"] == [9, None]
    assert found["bytes"] == [9 * ROW, None]
    assert [found[key] for key in ("default_us_per_call", "plan_us_per_call")] == [None, None]
    assert [found[key] for key in ("saving_us_per_call", "saving_us_per_step")] == [None, None]


@pytest.mark.parametrize(("value", "shown"), [(None, None), (1.2345, 1.234), (1.2355, 1.236), (2.0, 2.0)])
def test_figures_are_rounded_to_three_places(value, shown) -> None:
    assert explain._round(value) == shown


def test_a_range_without_its_bytes_per_token_counts_none() -> None:
    bare = Row(PLAIN, 1, 2, "nccl", "nccl", None, None, 1, "-", "x")
    assert (bare.to_json()["bytes"], row_size(bare)) == ([0, 0], "up to 0 B")


def test_a_range_row_is_a_value() -> None:
    # folding replaces rows, never edits one another list may hold
    with pytest.raises(FrozenInstanceError):
        row().note = "changed"  # type: ignore[misc]


# --- the range rows of a choice ---------------------------------------------------------------


def test_the_rows_cut_each_piece_at_the_measured_sizes_and_price_it_at_the_top() -> None:
    assert [
        (r.pattern, row_tokens(r), r.default, r.plan, r.default_us, r.plan_us, r.sites, r.source, r.note)
        for r in explain.rows(PLANNED)
    ] == [
        (PLAIN, "1", "nccl", "vllm_custom", 8.0, 4.0, 1, "isolated", "plan measured faster"),
        (PLAIN, "2", "nccl", "vllm_custom", 8.0, 4.0, 1, "isolated", "plan measured faster"),
        (PLAIN, "3-4", "nccl", "nccl", 8.0, 8.0, 1, "isolated", "same path"),
        (PLAIN, "5-8", "nccl", "nccl", 8.0, 8.0, 1, "isolated", "same path"),
        (PLAIN, "9+", "nccl", "nccl", None, None, 1, "-", "beyond the largest measured size: unchanged"),
        (FUSED, "1", "nccl", "nccl", 10.0, 10.0, 20, "isolated", "same path"),
        (FUSED, "2", "nccl", "nccl", 10.0, 10.0, 20, "isolated", "same path"),
        (FUSED, "3-4", "nccl", "nccl", 10.0, 10.0, 20, "isolated", "same path"),
        (FUSED, "5-8", "nccl", "nccl", 10.0, 10.0, 20, "isolated", "same path"),
        (FUSED, "9+", "nccl", "nccl", None, None, 20, "-", "beyond the largest measured size: unchanged"),
    ]
    assert {r.row_bytes for r in explain.rows(PLANNED)} == {ROW}


def test_a_closed_plan_range_ends_at_its_own_top_not_the_next_rung() -> None:
    # vllm_custom up to 3 tokens: the piece 3-3 is priced at the rung of 4 tokens but ends at 3.
    found = explain.rows(choice(upto(3, "vllm_custom"), FAST))
    assert [(row_tokens(r), r.plan) for r in found if r.pattern == PLAIN] == [
        ("1", "vllm_custom"),
        ("2", "vllm_custom"),
        ("3", "vllm_custom"),
        ("4", "nccl"),
        ("5-8", "nccl"),
        ("9+", "nccl"),
    ]


def test_a_rung_between_whole_tokens_ends_its_range_at_the_whole_token_below() -> None:
    sizes = (ROW, ROW * 5 // 2, ROW * 4)
    plain = {"nccl": {"median": flat(8.0, sizes)}}
    found = explain.rows(
        choice(
            NCCL_ONLY, plain, fused={"nccl": {"median": flat(10.0, sizes)}}, sizes=sizes, candidate=NOTHING
        )
    )
    assert [(r.first_tokens, r.last_tokens) for r in found if r.pattern == PLAIN] == [
        (1, 1),
        (2, 2),
        (3, 4),
        (5, None),
    ]
    assert all(isinstance(r.first_tokens, int) for r in found)


def test_a_plan_priced_no_faster_reads_within_the_defaults_noise() -> None:
    even = {"nccl": {"median": flat(8.0, SIZES)}, "vllm_custom": {"median": flat(8.0, SIZES)}}
    first = explain.rows(choice(upto(1, "vllm_custom"), even))[0]
    assert (first.plan, first.plan_us, first.note) == ("vllm_custom", 8.0, "within the default's noise")


def test_a_fused_site_on_one_unfused_path_both_sides_is_the_same_path() -> None:
    # pcie_ipc's fused name is built on each side ("pcie_ipc" + "+rmsnorm"): equal, not one object
    fused = {"nccl": {"median": flat(10.0, SIZES)}, "pcie_ipc+rmsnorm": {"median": flat(9.0, SIZES)}}
    both = upto(8, "pcie_ipc")
    found = explain.rows(
        choice(upto(2, "vllm_custom"), FAST, fused=fused, fused_routes=both, default_fused=both)
    )
    assert [(row_tokens(r), r.default, r.plan, r.note) for r in found if r.pattern == FUSED][:2] == [
        ("1", "pcie_ipc+rmsnorm", "pcie_ipc+rmsnorm", "same path"),
        ("2", "pcie_ipc+rmsnorm", "pcie_ipc+rmsnorm", "same path"),
    ]


def test_a_rung_priced_in_context_says_so() -> None:
    found = explain.rows(choice(upto(2, "vllm_custom"), FAST, in_context=frozenset({(PLAIN, 1)})))
    assert [r.source for r in found if r.pattern == PLAIN][:3] == ["isolated", "in context", "isolated"]


def test_a_pattern_with_no_call_site_in_the_step_has_no_rows() -> None:
    # vLLM's embedding is a fused site: no plain all-reduce in the step, the fused rows still shown.
    fused_step = Step(layers=10, layers_known=True, embedding_fused=True)
    found = explain.rows(choice(upto(2, "vllm_custom"), FAST, step=fused_step))
    assert {r.pattern for r in found} == {FUSED}
    assert found[0].sites == 21


def test_an_unmeasured_default_range_folds_into_one_row_that_says_it_is_left() -> None:
    # "mystery" has no column in the table at all
    found = explain.rows(choice(upto(8, "mystery"), FAST, default_plain=upto(8, "mystery")))
    assert [
        (row_tokens(r), r.default, r.default_us, r.plan_us, r.note) for r in found if r.pattern == PLAIN
    ] == [
        ("1-8", "mystery", None, None, "default not measured: left as it is"),
        ("9+", "nccl", None, None, "beyond the largest measured size: unchanged"),
    ]


# --- folding ----------------------------------------------------------------------------------


def test_adjacent_unpriced_rows_of_one_path_fold_into_one_range() -> None:
    raw = "default not measured (mystery not measured at 2048 bytes): left as it is"
    found = explain.fold(
        [row(), row(first_tokens=2, last_tokens=2, note=raw), row(first_tokens=3, last_tokens=4)]
    )
    assert found == [row(first_tokens=1, last_tokens=4)]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (row(), row(first_tokens=3, last_tokens=3)),  # a gap: 2 is missing
        (row(last_tokens=4), row(first_tokens=2, last_tokens=2)),  # overlapping, out of order
        (row(), row(first_tokens=2, last_tokens=2, pattern=FUSED)),
        (row(pattern=FUSED), row(first_tokens=2, last_tokens=2)),
        (row(), row(first_tokens=2, last_tokens=2, default="other")),
        (row(), row(first_tokens=2, last_tokens=2, default="a_path")),
        (row(), row(first_tokens=2, last_tokens=2, plan="other")),
        (row(), row(first_tokens=2, last_tokens=2, plan="a_path")),
        (row(), row(first_tokens=2, last_tokens=2, default_us=8.0)),
        (row(), row(first_tokens=2, last_tokens=2, plan_us=8.0)),
        (row(), row(first_tokens=2, last_tokens=2, note="plan path not measured")),
        (row(), row(first_tokens=2, last_tokens=2, note="beyond the largest measured size: unchanged")),
    ],
)
def test_rows_that_differ_in_one_field_stay_apart(first: Row, second: Row) -> None:
    assert len(explain.fold([first, second])) == 2


def test_rows_after_a_priced_one_stay_apart() -> None:
    priced = row(default_us=8.0, plan_us=8.0, note="same path")
    assert explain.fold([priced, row(first_tokens=2, last_tokens=2)]) == [
        priced,
        row(first_tokens=2, last_tokens=2),
    ]
    assert len(explain.fold([row(plan_us=1.0, note="x"), row(first_tokens=2, last_tokens=2)])) == 2
    assert len(explain.fold([row(default_us=1.0, note="x"), row(first_tokens=2, last_tokens=2)])) == 2


def test_large_adjacent_counts_fold_too() -> None:
    # counts past the small integers CPython shares: equal by value, never the same object
    found = explain.fold([row(first_tokens=300, last_tokens=300), row(first_tokens=301, last_tokens=512)])
    assert [(r.first_tokens, r.last_tokens) for r in found] == [(300, 512)]


def test_nothing_follows_an_open_range() -> None:
    found = explain.fold([row(last_tokens=None), row(first_tokens=2, last_tokens=2)])
    assert [(r.first_tokens, r.last_tokens) for r in found] == [(1, None), (2, 2)]


def test_a_folded_range_keeps_one_source_or_says_they_differ() -> None:
    same = explain.fold([row(source="in context"), row(first_tokens=2, last_tokens=2, source="in context")])
    mixed = explain.fold([row(), row(first_tokens=2, last_tokens=2, source="in context")])
    assert [r.source for r in same] == ["in context"]
    assert [(r.source, r.last_tokens) for r in mixed] == [("-", 2)]
    reversed_mix = explain.fold([row(source="in context"), row(first_tokens=2, last_tokens=2)])
    assert [r.source for r in reversed_mix] == ["-"]


def test_folding_extends_the_last_row_only() -> None:
    priced = row(default_us=8.0, plan_us=8.0, note="same path")
    found = explain.fold([priced, row(first_tokens=2, last_tokens=2), row(first_tokens=3, last_tokens=4)])
    assert found == [priced, row(first_tokens=2, last_tokens=4)]


def test_an_unpriced_row_drops_the_size_its_note_names_a_priced_one_keeps_its_note() -> None:
    raw_default = "default not measured (x not measured at 16384 bytes): left as it is"
    raw_plan = "plan path not measured (allreduce: not measured at 2 tokens)"
    assert explain.fold([row(note=raw_default)])[0].note == "default not measured: left as it is"
    assert explain.fold([row(note=raw_plan)])[0].note == "plan path not measured"
    assert explain.fold([row(default_us=8.0, note=raw_plan)])[0].note == raw_plan
    assert explain.fold([row(plan_us=8.0, note=raw_default)])[0].note == raw_default
    assert explain.fold([]) == []


@pytest.mark.parametrize(
    ("note", "status"),
    [
        ("default not measured (x at 16384 bytes): left as it is", "default not measured: left as it is"),
        ("plan path not measured (x)", "plan path not measured"),
        ("default not measured: left as it is", "default not measured: left as it is"),
        ("plan path not measured", "plan path not measured"),
        ("beyond the largest measured size: unchanged", "beyond the largest measured size: unchanged"),
    ],
)
def test_a_status_is_the_note_without_its_size(note: str, status: str) -> None:
    assert explain._status(note) == status


# --- notes ------------------------------------------------------------------------------------

SWAP = Piece(PLAIN, ROW, ROW, "vllm_custom", "nccl")
KEEP = Piece(PLAIN, ROW, ROW, "nccl", "nccl")


@pytest.mark.parametrize(
    ("piece", "theirs", "mine", "note"),
    [
        (SWAP, "x not measured", 4.0, "default not measured (x not measured): left as it is"),
        (KEEP, "x not measured", "x not measured", "default not measured (x not measured): left as it is"),
        (KEEP, 8.0, 8.0, "same path"),
        (SWAP, 8.0, "y not measured", "plan path not measured (y not measured)"),
        (SWAP, 8.0, 7.99, "plan measured faster"),
        (Piece(PLAIN, ROW, ROW, "custom", "nccl"), 8.0, 4.0, "plan measured faster"),
        (SWAP, 8.0, 8.0, "within the default's noise"),
        (SWAP, 8.0, 8.01, "within the default's noise"),
    ],
)
def test_a_rows_note_says_how_its_paths_compare(piece, theirs, mine, note) -> None:
    assert explain._note(piece, theirs, mine) == note


# --- steps and the size that binds ------------------------------------------------------------


def site(pattern: str, median: float, *, name: str = "nccl", sites: int = 1, transition: float = 0.0) -> Site:
    return Site(pattern, name, sites, Price(median, median * 1.01, transition), True)


def check(*, complete: bool = True, why: str | None = None, nbytes: int = 1234567) -> StepCheck:
    return StepCheck(
        nbytes,
        nbytes / ROW,
        (site(PLAIN, 8.0), site(FUSED, 10.0, sites=20)),
        (site(PLAIN, 4.0004, name="vllm_custom"), site(FUSED, 10.0, sites=20)),
        0.0801234,
        (PLAIN,),
        complete,
        why,
    )


def test_a_priced_step_row_has_both_sides_the_limit_and_the_saving() -> None:
    assert explain.step_figure(check(), 0.12345678, ROW).to_json() == {
        "tokens": 1205.632,
        "bytes": 1234567,
        "weight": 0.123457,
        "default_us_per_step": 208.0,
        "plan_us_per_step": 204.0,
        "limit_us_per_step": 208.08,
        "saving_us_per_step": 4.0,
        "changed": [PLAIN],
        "why": None,
        "size": "1.17737 MiB",
        "row_bytes": ROW,
    }


def test_a_refused_step_row_has_the_defaults_side_only() -> None:
    found = explain.step_figure(check(why="step slower"), None, ROW).to_json()
    assert found["weight"] is None
    assert (found["default_us_per_step"], found["limit_us_per_step"]) == (208.0, 208.08)
    assert (found["plan_us_per_step"], found["saving_us_per_step"], found["why"]) == (
        None,
        None,
        "step slower",
    )


def test_an_incomplete_step_row_has_no_figures() -> None:
    found = explain.step_figure(check(complete=False), 1.0, ROW).to_json()
    assert [found[key] for key in ("default_us_per_step", "plan_us_per_step", "limit_us_per_step")] == [
        None
    ] * 3
    assert found["saving_us_per_step"] is None


def test_the_steps_are_the_workloads_token_counts_priced_whole() -> None:
    found = explain.steps(PLANNED, TWO_STEPS)
    assert [(s.tokens, s.nbytes, s.weight, s.plan_us, s.changed) for s in found] == [
        (1.0, ROW, 0.5, 204.0, (PLAIN,)),
        (4.0, 4 * ROW, 0.5, 208.0, ()),
    ]


def test_the_binding_size_is_the_changed_check_with_the_least_slack() -> None:
    # vllm_custom is changed at 1 and 2 tokens; both steps are 4 us under 208.08, 1 token comes first.
    found = explain.binding_step(PLANNED)
    assert found is not None
    assert (found.tokens, found.weight, found.changed) == (1.0, None, (PLAIN,))
    assert (found.plan_us, stored(found.limit_us)) == (204.0, 208.08)


def test_an_incomplete_check_never_binds() -> None:
    # At 2 tokens the shared fused path is not measured: the plain change there is closer to the
    # default's limit (7.9 against 8.0) but the step is incomplete, so 1 token binds.
    plain = {"nccl": {"median": flat(8.0, SIZES)}, "vllm_custom": {"median": [4.0, 7.9, 4.0, 4.0]}}
    fused = {"nccl": {"median": [10.0, None, 10.0, 10.0]}}
    found = explain.binding_step(choice(upto(2, "vllm_custom"), plain, fused=fused))
    assert found is not None and found.tokens == 1.0


def test_no_size_binds_a_plan_that_changes_nothing() -> None:
    assert explain.binding_step(choice(NCCL_ONLY, FAST, candidate=NOTHING)) is None


def test_no_size_binds_a_plan_that_changes_sizes_beyond_the_table() -> None:
    assert explain.binding_step(choice(((None, "vllm_custom"),), FAST)) is None


# --- default paths not measured ---------------------------------------------------------------

GAPPED = {**FAST, "pcie_ipc": {"median": [1.0, 1.0, None, 1.0]}}


def test_an_unmeasured_default_path_is_named_once_with_its_token_counts() -> None:
    workload = Workload.from_weights("w", {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25})
    found = explain.unmeasured(
        choice(upto(4, "pcie_ipc"), GAPPED, default_plain=upto(4, "pcie_ipc"), workload=workload),
        "vllm",
        workload,
    )
    # 1 and 2 tokens lie on measured rungs; 3 sits between a measured rung and an unmeasured one.
    assert [e.to_json() for e in found] == [
        {
            "path": "pcie_ipc",
            "tokens": [3, 4],
            "patterns": [PLAIN],
            "beyond": False,
            "runs": "the default runs pcie_ipc",
            "why": "the profile has no price for it",
            "action": "re-probe this node",
            "setting": "",
            "share": 0.5,
        }
    ]


def test_a_default_path_with_a_known_cause_says_what_the_launcher_runs_and_the_fix() -> None:
    # nccl_nvls has no column in the table: never timed (NVLS is off in the trials)
    workload = Workload.from_weights("w", {3: 0.5, 4: 0.5})
    found = explain.unmeasured(
        choice(NCCL_ONLY, FAST, default_plain=upto(8, "nccl_nvls"), workload=workload), "vllm", workload
    )
    assert [e.to_json() for e in found] == [
        {
            "path": "nccl_nvls",
            "tokens": [3, 4],
            "patterns": [PLAIN],
            "beyond": False,
            "runs": f"vLLM {PINNED['vllm']} runs nccl_nvls here by default",
            "why": "NCCL with NVLink SHARP (multicast, TP > 2 on NVSwitch); the trials time NCCL with NVLS off",
            "action": "NCCL_NVLS_ENABLE=0 in the launcher's env: its NCCL is then the one timed. This change is "
            "itself not measured against the default it replaces (no trial times that default): `topo-gate ab "
            "--profile P --arm fix:NCCL_NVLS_ENABLE=0 -- CMD` measures both end to end",
            "setting": "NCCL_NVLS_ENABLE=0",
            "share": 1.0,
        }
    ]


def test_a_step_beyond_the_table_is_unmeasured_beyond() -> None:
    workload = Workload.from_weights("w", {1: 0.5, 16: 0.25, 32: 0.25})
    found = explain.unmeasured(choice(NCCL_ONLY, FAST, workload=workload, candidate=NOTHING), "", workload)
    assert [e.to_json() for e in found] == [
        {
            "path": "nccl",
            "tokens": [16, 32],
            "patterns": [PLAIN, FUSED],
            "beyond": True,
            "runs": "the default runs nccl",
            "why": "beyond the largest measured size",
            "action": "re-probe this node with sizes that cover the workload",
            "setting": "",
            "share": 0.5,
        }
    ]


def test_a_pattern_with_no_site_is_never_unmeasured() -> None:
    fused_step = Step(layers=10, layers_known=True, embedding_fused=True)
    workload = Workload.from_weights("w", {16: 1.0})
    found = explain.unmeasured(choice(NCCL_ONLY, FAST, workload=workload, step=fused_step), "", workload)
    assert [e.patterns for e in found] == [(FUSED,)]


def test_a_default_path_is_named_at_each_steps_own_size() -> None:
    # the default runs nccl_nvls up to 2 tokens only: the 4-token step runs (measured) NCCL
    workload = Workload.from_weights("w", {1: 0.5, 4: 0.5})
    found = explain.unmeasured(choice(NCCL_ONLY, FAST, default_plain=upto(2, "nccl_nvls")), "vllm", workload)
    assert [(e.paths, e.tokens) for e in found] == [(("nccl_nvls",), (1, 1))]


def test_a_measured_plain_default_does_not_hide_an_unmeasured_fused_one() -> None:
    workload = Workload.from_weights("w", {1: 1.0})
    found = explain.unmeasured(choice(NCCL_ONLY, FAST, default_fused=upto(8, "nccl_nvls")), "vllm", workload)
    assert [(e.paths, e.tokens, e.patterns) for e in found] == [(("nccl_nvls+rmsnorm",), (1, 1), (FUSED,))]


def test_measured_defaults_are_not_listed() -> None:
    assert explain.unmeasured(PLANNED, "vllm", TWO_STEPS) == ()


# --- unlock -----------------------------------------------------------------------------------


def unlock(*, default_us: float = 200.0, bounded_by: int | None = 4 * ROW) -> Unlock:
    return Unlock(
        Candidate(Knobs(args=("--fast",), env={"A": "1"}, config={"k": 2})),
        saving_us=-10.12345,
        default_us=default_us,
        check=check(nbytes=2 * ROW + 100),
        kernel="vllm_custom",
        largest_prior=3 * ROW + 100,
        chance=0.5,
        room_us=1.23456,
        bound_us=3.0,
        bounded_by=bounded_by,
        threshold_us=2.46912,
    )


def test_what_a_measurement_could_unlock_as_data() -> None:
    found = explain.unlock_figure(unlock(), ROW)
    assert found is not None and found.to_json() == {
        "args": ["--fast"],
        "env": {"A": "1"},
        "config": {"k": 2},
        "saving_us_per_step": -10.123,
        "saving": -0.050617,
        "kernel": "vllm_custom",
        "after_bytes": 3 * ROW + 100,
        "after_tokens": 3.098,
        "at_tokens": 2.098,
        "at_most_us": 2.469,
        "bounded_by_bytes": 4 * ROW,
    }


def test_nothing_to_unlock_and_no_share_of_a_zero_default() -> None:
    assert explain.unlock_figure(None, ROW) is None
    found = explain.unlock_figure(unlock(default_us=0.0), ROW)
    assert found is not None and found.saving is None and found.to_json()["saving"] is None


# --- totals -----------------------------------------------------------------------------------


def test_the_figures_of_a_plan_carry_no_sentence() -> None:
    found = explain.explanation(PLANNED, TWO_STEPS, "vllm")
    data = found.to_json()
    assert "summary" not in data
    assert list(data) == [
        *TOTALS_KEYS,
        "knobs",
        "refused",
        "steps",
        "binding",
        "unmeasured",
        "unlock",
    ]
    assert (data["default_us_per_step"], data["plan_us_per_step"], data["saving"]) == (208.0, 206.0, 0.009615)
    assert (data["knobs"], data["refused"], data["unmeasured"], data["unlock"]) == ("--fast", 0, [], None)
    assert data["binding"]["tokens"] == 1.0
    assert [s["tokens"] for s in data["steps"]] == [1.0, 4.0]


TOTALS_KEYS = [
    "workload",
    "workload_description",
    "layers",
    "layers_known",
    "calls_per_step",
    "sites_per_step",
    "measured_share",
    "priced_tokens",
    "workload_steps",
    "default_us_per_step",
    "plan_us_per_step",
    "saving",
    "per_call",
]


def test_the_figures_count_the_refused_and_carry_the_unlock() -> None:
    refused = ((FLAGGED, "slower"), (Candidate(Knobs(env={"B": "2"})), "slower"))
    found = explain.explanation(
        choice(NCCL_ONLY, FAST, candidate=NOTHING, rejected=refused, unlock=unlock()), TWO_STEPS
    )
    assert (found.knobs, found.refused, found.binding) == (Knobs(), 2, None)
    assert found.unlock is not None and found.to_json()["unlock"]["after_tokens"] == 3.098


def test_a_workload_priced_in_part_weighs_only_its_priced_steps() -> None:
    workload = Workload.from_weights("w", {1: 0.3, 16: 0.7})
    found = explain.workload_totals(planned_for(workload), workload).to_json()
    assert (found["measured_share"], found["priced_tokens"]) == (0.3, [1])
    assert found["workload_steps"] == [[1, 0.3], [16, 0.7]]
    assert (found["default_us_per_step"], found["plan_us_per_step"]) == (208.0, 204.0)


def test_shares_and_weights_are_rounded_to_six_places() -> None:
    workload = Workload.from_weights("w", {1: 0.1234567, 16: 0.8765433})
    found = explain.workload_totals(planned_for(workload), workload).to_json()
    assert found["measured_share"] == 0.123457
    assert found["workload_steps"] == [[1, 0.123457], [16, 0.876543]]


def test_a_workload_priced_nowhere_has_no_totals() -> None:
    workload = Workload.from_weights("w", {16: 1.0})
    found = explain.workload_totals(planned_for(workload), workload).to_json()
    assert (found["measured_share"], found["default_us_per_step"], found["plan_us_per_step"]) == (
        0.0,
        None,
        None,
    )
    assert found["saving"] is None
    assert found["per_call"] == {
        PLAIN: {"default_us": None, "plan_us": None},
        FUSED: {"default_us": None, "plan_us": None},
    }


def test_per_call_figures_skip_a_pattern_with_no_site() -> None:
    fused_step = Step(layers=10, layers_known=True, embedding_fused=True)
    found = explain.workload_totals(
        choice(upto(2, "vllm_custom"), FAST, step=fused_step), TWO_STEPS
    ).to_json()
    assert list(found["per_call"]) == [FUSED]
    assert found["sites_per_step"] == {PLAIN: 0, FUSED: 21}


# --- knob words -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knobs", "words"),
    [
        (Knobs(), ""),
        (Knobs(args=("--a", "b")), "--a b"),
        (Knobs(env={"X": "1", "Y": "2"}), "X=1 Y=2"),
        (Knobs(config={"k": 1, "j": "v"}), "{k: 1, j: v}"),
        (Knobs(args=("--a",), env={"X": "1"}, config={"k": 1}), "--a X=1 {k: 1}"),
    ],
)
def test_knob_words_are_flags_then_env_then_config(knobs: Knobs, words: str) -> None:
    assert explain.knob_words(knobs) == words


def test_an_unmeasured_cause_over_two_paths_names_the_first_in_its_json() -> None:
    from topo_gate.launchers.plan.explain import Unmeasured

    entry = Unmeasured(
        paths=("mnnvl_vllm", "mnnvl_fused_vllm"), tokens=(1, 8), patterns=("allreduce",), beyond=False,
        runs="r", why="w", action="a", setting="", share=0.5,
    )  # fmt: skip
    assert entry.to_json()["path"] == "mnnvl_vllm"
