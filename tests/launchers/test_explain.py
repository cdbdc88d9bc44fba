"""``recommend --explain`` piece by piece, on hand-built choices and data: the range rows (their token
spans, sizes, notes and folding), the per-step rows and the size that binds, the default paths not
measured, what a missing measurement could unlock, the summary line, the priced share of steps, the
knob words and the text laid out to a terminal's width (wrapped prose, a table or stacked entries).

The scenes are small: 1 KiB tokens, rungs at 1, 2, 4 and 8 tokens, a step of 1 plain and 20 fused
all-reduce sites (10 known layers), routes written by hand as in ``test_costmodel.py``.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from price_tables import FUSED, PLAIN, STEP, flat, table

from topo_gate.launchers.knobs import PINNED
from topo_gate.launchers.plan import explain
from topo_gate.launchers.plan.choice import Candidate, Choice, Unlock, Variant
from topo_gate.launchers.plan.costmodel import Piece, Price, Pricing, Side, Site, Step, StepCheck, total
from topo_gate.launchers.plan.explain import Row
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Knobs

ROW = 1024
SIZES = tuple(ROW * tokens for tokens in (1, 2, 4, 8))
NCCL_ONLY = ((None, None),)
TWO_STEPS = Workload.from_weights("two", {1: 0.5, 4: 0.5}, "a test mix")
FLAGGED = Candidate(Knobs(args=("--fast",)))
NOTHING = Candidate(Knobs())


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


def choice(
    plain_routes: tuple,
    plain: dict,
    *,
    fused_routes: tuple = NCCL_ONLY,
    fused: dict | None = None,
    workload: Workload = TWO_STEPS,
    candidate: Candidate = FLAGGED,
    step: Step = STEP,
    default_plain: tuple = NCCL_ONLY,
    default_fused: tuple = NCCL_ONLY,
    sizes: tuple = SIZES,
    in_context: frozenset = frozenset(),
    rejected: tuple = (),
    unlock: Unlock | None = None,
) -> Choice:
    """A priced choice on one variant: the plan's routes against NCCL everywhere (or the given default)."""
    fused = fused or {"nccl": {"median": flat(10.0, sizes)}}
    tabs = {
        PLAIN: table(PLAIN, plain, sizes=sizes, hidden=512),
        FUSED: table(FUSED, fused, sizes=sizes, hidden=512),
    }
    pricing = Pricing(tabs, step, ROW, in_context)
    plan = Side.of({PLAIN: plain_routes, FUSED: fused_routes}, "nccl", ROW, workload, step)
    default = Side.of({PLAIN: default_plain, FUSED: default_fused}, "nccl", ROW, workload, step)
    variant = Variant(None, pricing, default, plan, (), total(plan, default, pricing, workload))  # type: ignore[arg-type]
    return Choice(candidate, (variant,), rejected, lambda: unlock)


FAST = {"nccl": {"median": flat(8.0, SIZES)}, "vllm_custom": {"median": flat(4.0, SIZES)}}
#: vllm_custom up to 2 tokens, 4 us against NCCL's 8; fused all-reduces stay on NCCL at 10 us.
PLANNED = choice(upto(2, "vllm_custom"), FAST)


def planned_for(workload: Workload) -> Choice:
    return choice(upto(2, "vllm_custom"), FAST, workload=workload)


def row(**fields: Any) -> Row:
    base: dict[str, Any] = {
        "pattern": PLAIN,
        "first_tokens": 1,
        "last_tokens": 1,
        "default": "nccl",
        "plan": "nccl",
        "default_us": None,
        "plan_us": None,
        "sites": 1,
        "source": "isolated",
        "note": "default not measured: left as it is",
        "row_bytes": ROW,
    }
    return Row(**{**base, **fields})


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
    assert explain.token_span(first, last) == words


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
    assert (shown.size, shown.tokens) == (size, tokens)


@pytest.mark.parametrize(
    ("default_us", "plan_us", "saving"),
    [(8.0, 4.0, 4.0), (8.0, 8.0, 0.0), (None, 4.0, None), (8.0, None, None)],
)
def test_a_saving_needs_both_prices(default_us, plan_us, saving) -> None:
    assert row(default_us=default_us, plan_us=plan_us).saving_us == saving


def test_a_range_as_data_rounds_to_three_places_and_prices_the_step_by_its_sites() -> None:
    priced = row(first_tokens=3, last_tokens=4, default_us=8.12345, plan_us=4.0, sites=3, note="x")
    assert priced.to_dict() == {
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
    found = row(first_tokens=9, last_tokens=None).to_dict()
    assert found["tokens"] == [9, None]
    assert found["bytes"] == [9 * ROW, None]
    assert [found[key] for key in ("default_us_per_call", "plan_us_per_call")] == [None, None]
    assert [found[key] for key in ("saving_us_per_call", "saving_us_per_step")] == [None, None]


@pytest.mark.parametrize(("value", "shown"), [(None, None), (1.2345, 1.234), (1.2355, 1.236), (2.0, 2.0)])
def test_figures_are_rounded_to_three_places(value, shown) -> None:
    assert explain._round(value) == shown


def test_a_range_without_its_bytes_per_token_counts_none() -> None:
    bare = Row(PLAIN, 1, 2, "nccl", "nccl", None, None, 1, "-", "x")
    assert (bare.to_dict()["bytes"], bare.size) == ([0, 0], "up to 0 B")


def test_a_range_row_is_a_value() -> None:
    # folding replaces rows, never edits one another list may hold
    with pytest.raises(FrozenInstanceError):
        row().note = "changed"  # type: ignore[misc]


# --- the range rows of a choice ---------------------------------------------------------------


def test_the_rows_cut_each_piece_at_the_measured_sizes_and_price_it_at_the_top() -> None:
    assert [
        (r.pattern, r.tokens, r.default, r.plan, r.default_us, r.plan_us, r.sites, r.source, r.note)
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
    assert [(r.tokens, r.plan) for r in found if r.pattern == PLAIN] == [
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
    assert [(r.tokens, r.default, r.plan, r.note) for r in found if r.pattern == FUSED][:2] == [
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
    assert [(r.tokens, r.default, r.default_us, r.plan_us, r.note) for r in found if r.pattern == PLAIN] == [
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
    assert explain.step_row(check(), 0.12345678, ROW) == {
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
    found = explain.step_row(check(why="step slower"), None, ROW)
    assert found["weight"] is None
    assert (found["default_us_per_step"], found["limit_us_per_step"]) == (208.0, 208.08)
    assert (found["plan_us_per_step"], found["saving_us_per_step"], found["why"]) == (
        None,
        None,
        "step slower",
    )


def test_an_incomplete_step_row_has_no_figures() -> None:
    found = explain.step_row(check(complete=False), 1.0, ROW)
    assert [found[key] for key in ("default_us_per_step", "plan_us_per_step", "limit_us_per_step")] == [
        None
    ] * 3
    assert found["saving_us_per_step"] is None


def test_the_steps_are_the_workloads_token_counts_priced_whole() -> None:
    found = explain.steps(PLANNED, TWO_STEPS)
    assert [(s["tokens"], s["bytes"], s["weight"], s["plan_us_per_step"], s["changed"]) for s in found] == [
        (1.0, ROW, 0.5, 204.0, [PLAIN]),
        (4.0, 4 * ROW, 0.5, 208.0, []),
    ]


def test_the_binding_size_is_the_changed_check_with_the_least_slack() -> None:
    # vllm_custom is changed at 1 and 2 tokens; both steps are 4 us under 208.08, 1 token comes first.
    found = explain.binding_row(PLANNED)
    assert found is not None
    assert (found["tokens"], found["weight"], found["changed"]) == (1.0, None, [PLAIN])
    assert (found["plan_us_per_step"], found["limit_us_per_step"]) == (204.0, 208.08)


def test_an_incomplete_check_never_binds() -> None:
    # At 2 tokens the shared fused path is not measured: the plain change there is closer to the
    # default's limit (7.9 against 8.0) but the step is incomplete, so 1 token binds.
    plain = {"nccl": {"median": flat(8.0, SIZES)}, "vllm_custom": {"median": [4.0, 7.9, 4.0, 4.0]}}
    fused = {"nccl": {"median": [10.0, None, 10.0, 10.0]}}
    found = explain.binding_row(choice(upto(2, "vllm_custom"), plain, fused=fused))
    assert found is not None and found["tokens"] == 1.0


def test_no_size_binds_a_plan_that_changes_nothing() -> None:
    assert explain.binding_row(choice(NCCL_ONLY, FAST, candidate=NOTHING)) is None


def test_no_size_binds_a_plan_that_changes_sizes_beyond_the_table() -> None:
    assert explain.binding_row(choice(((None, "vllm_custom"),), FAST)) is None


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
    assert found == [
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
    assert found == [
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
    assert found == [
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
    assert [e["patterns"] for e in found] == [[FUSED]]


def test_a_default_path_is_named_at_each_steps_own_size() -> None:
    # the default runs nccl_nvls up to 2 tokens only: the 4-token step runs (measured) NCCL
    workload = Workload.from_weights("w", {1: 0.5, 4: 0.5})
    found = explain.unmeasured(choice(NCCL_ONLY, FAST, default_plain=upto(2, "nccl_nvls")), "vllm", workload)
    assert [(e["path"], e["tokens"]) for e in found] == [("nccl_nvls", [1, 1])]


def test_a_measured_plain_default_does_not_hide_an_unmeasured_fused_one() -> None:
    workload = Workload.from_weights("w", {1: 1.0})
    found = explain.unmeasured(choice(NCCL_ONLY, FAST, default_fused=upto(8, "nccl_nvls")), "vllm", workload)
    assert [(e["path"], e["tokens"], e["patterns"]) for e in found] == [
        ("nccl_nvls+rmsnorm", [1, 1], [FUSED])
    ]


def test_measured_defaults_are_not_listed() -> None:
    assert explain.unmeasured(PLANNED, "vllm", TWO_STEPS) == []


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
    assert explain.unlock_data(unlock(), ROW) == {
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
    assert explain.unlock_data(None, ROW) is None
    found = explain.unlock_data(unlock(default_us=0.0), ROW)
    assert found is not None and found["saving"] is None


# --- totals -----------------------------------------------------------------------------------


def test_the_workload_totals_of_a_plan() -> None:
    found = explain.totals(PLANNED, TWO_STEPS, "vllm")
    assert found["summary"] == (
        "plan: --fast (est. -1.0% all-reduce time per step); it comes closest to the default's limit "
        "at 1 token (1 KiB)."
    )
    assert list(found)[0] == "summary"
    # The same figures as data()'s, which the summary-line tests below word.
    keys = list(found)[1:14]
    assert keys == list(data())[1:14]
    assert {key: found[key] for key in keys} == {key: data()[key] for key in keys}
    assert (found["knobs"], found["refused"], found["unmeasured"], found["unlock"]) == ("--fast", 0, [], None)
    assert found["binding"]["tokens"] == 1.0
    assert [s["tokens"] for s in found["steps"]] == [1.0, 4.0]


def test_totals_count_the_refused_and_carry_the_unlock() -> None:
    refused = ((FLAGGED, "slower"), (Candidate(Knobs(env={"B": "2"})), "slower"))
    found = explain.totals(
        choice(NCCL_ONLY, FAST, candidate=NOTHING, rejected=refused, unlock=unlock()), TWO_STEPS
    )
    assert (found["knobs"], found["refused"], found["binding"]) == ("", 2, None)
    assert found["unlock"]["after_tokens"] == 3.098
    assert found["summary"].startswith(
        "no knobs, because --fast A=1 is refused only for want of one measurement"
    )


def test_a_workload_priced_in_part_weighs_only_its_priced_steps() -> None:
    workload = Workload.from_weights("w", {1: 0.3, 16: 0.7})
    found = explain.workload_totals(planned_for(workload), workload)
    assert (found["measured_share"], found["priced_tokens"]) == (0.3, [1])
    assert found["workload_steps"] == [[1, 0.3], [16, 0.7]]
    assert (found["default_us_per_step"], found["plan_us_per_step"]) == (208.0, 204.0)


def test_shares_and_weights_are_rounded_to_six_places() -> None:
    workload = Workload.from_weights("w", {1: 0.1234567, 16: 0.8765433})
    found = explain.workload_totals(planned_for(workload), workload)
    assert found["measured_share"] == 0.123457
    assert found["workload_steps"] == [[1, 0.123457], [16, 0.876543]]


def test_a_workload_priced_nowhere_has_no_totals() -> None:
    workload = Workload.from_weights("w", {16: 1.0})
    found = explain.workload_totals(planned_for(workload), workload)
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
    found = explain.workload_totals(choice(upto(2, "vllm_custom"), FAST, step=fused_step), TWO_STEPS)
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


# --- the summary line -------------------------------------------------------------------------


def entry(first: int, last: int, *, beyond: bool = False, path: str = "mystery") -> dict[str, Any]:
    return {
        "path": path,
        "tokens": [first, last],
        "patterns": [PLAIN],
        "beyond": beyond,
        "runs": f"the default runs {path}",
        "why": "no price",
        "action": "re-probe",
    }


def data(**over: Any) -> dict[str, Any]:
    """``totals()``'s keys, for a plan of ``--fast`` saving 1% over two priced steps."""
    base: dict[str, Any] = {
        "workload": "two",
        "workload_description": "a test mix",
        "layers": 10,
        "layers_known": True,
        "calls_per_step": 21,
        "sites_per_step": {PLAIN: 1, FUSED: 20},
        "measured_share": 1.0,
        "priced_tokens": [1, 4],
        "workload_steps": [[1, 0.5], [4, 0.5]],
        "default_us_per_step": 208.0,
        "plan_us_per_step": 206.0,
        "saving": 0.009615,
        "per_call": {
            PLAIN: {"default_us": 8.0, "plan_us": 6.0},
            FUSED: {"default_us": 10.0, "plan_us": 10.0},
        },
        "knobs": "--fast",
        "refused": 3,
        "steps": [],
        "binding": None,
        "unmeasured": [],
        "unlock": None,
    }
    found = {**base, **over}
    return {"summary": "SUMMARY", **found}


UNLOCK_DATA = {
    "args": ["--fast"],
    "env": {"A": "1"},
    "config": {"k": 2},
    "saving_us_per_step": -10.123,
    "saving": -0.048671,
    "kernel": "vllm_custom",
    "after_bytes": 3 * ROW + 100,
    "after_tokens": 3.098,
    "at_tokens": 2.0,
    "at_most_us": 2.469,
    "bounded_by_bytes": 1234567,
}
BINDING = {
    "tokens": 1.0,
    "size": "1 KiB",
    "plan_us_per_step": 204.0,
    "default_us_per_step": 208.0,
    "limit_us_per_step": 208.08,
    "why": None,
}


def test_the_summary_of_a_plan_names_its_saving_and_where_it_binds() -> None:
    assert explain.summary_line(data(binding=BINDING)) == (
        "plan: --fast (est. -1.0% all-reduce time per step); it comes closest to the default's limit at "
        "1 token (1 KiB)."
    )
    assert explain.summary_line(data(saving=None, binding={**BINDING, "tokens": 2.5})) == (
        "plan: --fast; it comes closest to the default's limit at 2.5 tokens (1 KiB)."
    )
    assert explain.summary_line(data(saving=-0.0123)) == "plan: --fast (est. +1.2% all-reduce time per step)."


def test_the_summary_of_no_knobs_counts_the_refused() -> None:
    assert explain.summary_line(data(knobs="")) == (
        "no knobs: the launcher's default is the fastest measured choice over the workload; each of the "
        "3 other knob sets is slower than it beyond noise at some step size."
    )


def test_an_unmeasured_default_binds_first_with_its_fix() -> None:
    one = data(knobs="", unmeasured=[entry(1, 2048)], unlock=UNLOCK_DATA)
    assert explain.summary_line(one) == (
        "no knobs, because the default runs mystery at 1-2048 tokens of the workload, which is not "
        "measured: no price. Fix: re-probe."
    )
    other = {**entry(8, 8, path="other"), "why": "other price", "action": "other fix"}
    two = data(knobs="", unmeasured=[entry(4, 4), other])
    assert explain.summary_line(two) == (
        "no knobs, because the default runs mystery at 4 tokens of the workload, which is not "
        "measured: no price (and 1 more cause below). Fix: re-probe."
    )
    three = data(knobs="", unmeasured=[entry(4, 4), entry(8, 8), entry(9, 9)])
    assert "(and 2 more causes below)" in explain.summary_line(three)


def test_steps_beyond_the_table_are_named_after_the_cause() -> None:
    beyond = [entry(16, 16, beyond=True), entry(32, 64, beyond=True)]
    tail = "; the steps at 16 and 32-64 tokens lie beyond the largest measured size and are left as they are."
    assert explain.summary_line(data(knobs="", unmeasured=[entry(1, 1), *beyond])).endswith(
        f"Fix: re-probe{tail}"
    )
    assert explain.summary_line(data(unmeasured=beyond[:1])) == (
        "plan: --fast (est. -1.0% all-reduce time per step); the steps at 16 tokens lie beyond the largest "
        "measured size and are left as they are."
    )
    assert explain.summary_line(data(knobs="", unmeasured=beyond)).endswith(
        f"slower than it beyond noise at some step size{tail}"
    )


def test_a_plan_with_knobs_is_not_bound_by_an_unmeasured_default_elsewhere() -> None:
    assert explain.summary_line(data(unmeasured=[entry(1, 1)], unlock=UNLOCK_DATA)) == (
        "plan: --fast (est. -1.0% all-reduce time per step)."
    )


def test_a_saving_refused_for_want_of_a_measurement_binds_no_knobs() -> None:
    assert explain.summary_line(data(knobs="", unlock=UNLOCK_DATA)) == (
        "no knobs, because --fast A=1 is refused only for want of one measurement: vllm_custom's size "
        "transition after 3.098 tokens. Fix: re-probe this node to measure it (see 'could unlock' below)."
    )
    assert (
        explain.summary_line(data(knobs="", unlock={**UNLOCK_DATA, "after_tokens": 1.0})).count(
            "after 1 token."
        )
        == 1
    )


def test_a_summary_reads_data_without_the_optional_keys() -> None:
    bare = {"knobs": "", "refused": 0}
    assert explain.summary_line(bare).startswith("no knobs: the launcher's default is the fastest")
    assert explain.summary_line({**bare, "unmeasured": None, "unlock": None}) == explain.summary_line(bare)


# --- headline ---------------------------------------------------------------------------------


def test_the_headline_names_each_unmeasured_default_and_the_unlock() -> None:
    assert explain.headline(data(unmeasured=[entry(1, 1), entry(2, 8)], unlock=UNLOCK_DATA)) == [
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
    [line] = explain.headline(
        data(unlock={**UNLOCK_DATA, "bounded_by_bytes": None, "saving": None, "at_tokens": 1.0})
    )
    assert "up to +10.1 us/step over the workload" in line
    assert "(binding at 1 token; nothing measured after a larger size);" in line


def test_nothing_to_head_with() -> None:
    assert explain.headline(data()) == []
    assert explain.headline({}) == []


@pytest.mark.parametrize(
    ("count", "words"),
    [(1, "1 token"), (1.0, "1 token"), (2, "2 tokens"), (1.5, "1.5 tokens"), (0.5, "0.5 tokens")],
)
def test_token_counts_in_words(count: float, words: str) -> None:
    assert explain._tokens(count) == words


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
        explain.priced_share({"measured_share": share, "priced_tokens": priced, "workload_steps": steps})
        == words
    )


# --- per-step lines and the total -------------------------------------------------------------

STEP_ROWS = [
    {
        "tokens": 1.0,
        "size": "1 KiB",
        "weight": 0.5,
        "default_us_per_step": 208.0,
        "plan_us_per_step": 204.0,
        "saving_us_per_step": 4.0,
        "changed": [PLAIN],
        "why": None,
    },
    {
        "tokens": 4.0,
        "size": "4 KiB",
        "weight": 0.25,
        "default_us_per_step": 208.0,
        "plan_us_per_step": 208.0,
        "saving_us_per_step": 0.0,
        "changed": [],
        "why": None,
    },
    {
        "tokens": 16.0,
        "size": "16 KiB",
        "weight": 0.25,
        "default_us_per_step": None,
        "plan_us_per_step": None,
        "saving_us_per_step": None,
        "changed": [PLAIN],
        "why": "not measured",
    },
]


def test_the_step_lines_are_a_table_with_the_size_that_binds() -> None:
    assert explain._step_lines(data(steps=STEP_ROWS, binding=BINDING)) == [
        "per step (a step: 1 allreduce + 20 allreduce_rmsnorm all-reduces, plus each buffer's transition once):",
        "tokens  size    weight  default us/step  plan us/step  saving/step  note",
        "1       1 KiB   50.0%   208.00           204.00        +4.00",
        "4       4 KiB   25.0%   208.00           208.00        +0.00        same paths",
        "16      16 KiB  25.0%   n/a              n/a           n/a          not measured",
        "binds at 1 token (1 KiB): plan 204.0 us/step against the default's 208.0 (limit 208.1: its CI high "
        "plus its own transitions)",
    ]


def test_a_refused_binding_says_why_and_counts_no_plan_as_zero() -> None:
    lines = explain._step_lines(data(binding={**BINDING, "plan_us_per_step": None, "why": "step slower"}))
    assert lines[-1].startswith("binds at 1 token (1 KiB): plan 0.0 us/step")
    assert lines[-1].endswith("plus its own transitions); step slower")


def test_step_lines_without_sites_or_steps() -> None:
    assert explain._step_lines({"sites_per_step": {PLAIN: 0, FUSED: 21}})[0].startswith(
        "per step (a step: 21 allreduce_rmsnorm all-reduces"
    )
    assert explain._step_lines({}) == [
        "per step (a step:  all-reduces, plus each buffer's transition once):",
        "tokens  size  weight  default us/step  plan us/step  saving/step  note",
    ]


@pytest.mark.parametrize(
    ("value", "signed", "shown"),
    [
        (None, False, "n/a"),
        (None, True, "n/a"),
        (1.005, False, "1.00"),
        (4.0, True, "+4.00"),
        (-0.5, True, "-0.50"),
        (0.0, False, "0.00"),
    ],
)
def test_figures_per_call_show_two_places(value, signed, shown) -> None:
    assert explain._us(value, signed=signed) == shown


def test_the_total_names_the_workload_the_layers_and_each_patterns_call() -> None:
    assert explain._total_words(data()) == (
        "workload 'two' (a test mix; 10 layers, 21 all-reduces per step): default 208.0 -> plan 206.0 us per "
        "step (-1.0%); allreduce 8.00 -> 6.00 us/call, allreduce_rmsnorm 10.00 -> 10.00 us/call"
    )
    partial = data(
        layers_known=False,
        measured_share=0.5,
        priced_tokens=[1],
        per_call={PLAIN: {"default_us": None, "plan_us": None}, FUSED: {"default_us": 10.0, "plan_us": 9.0}},
    )
    assert explain._total_words(partial) == (
        "workload 'two' (a test mix; 10 layers assumed, 21 all-reduces per step, per 1-token step only: the "
        "50% of steps that could be priced): default 208.0 -> plan 206.0 us per step (-1.0%); "
        "allreduce_rmsnorm 10.00 -> 9.00 us/call"
    )


def test_the_total_of_an_unmeasured_default() -> None:
    assert explain._total_words(data(default_us_per_step=None)) == (
        "workload 'two': the default's paths were not measured at its sizes; nothing changed"
    )


# --- the one-line estimate --------------------------------------------------------------------


def test_the_estimate_of_a_plan() -> None:
    assert explain.estimate_line(PLANNED, TWO_STEPS) == (
        "plan: --fast: over the workload 'two': est. -1.0% all-reduce time vs default (208.0 -> 206.0 us "
        "per step, 10 layers)"
    )


@pytest.mark.parametrize("knobs", [Knobs(args=("--fast",)), Knobs(env={"A": "1"}), Knobs(config={"k": 1})])
def test_any_one_kind_of_knob_is_a_plan(knobs: Knobs) -> None:
    found = explain.estimate_line(choice(upto(2, "vllm_custom"), FAST, candidate=Candidate(knobs)), TWO_STEPS)
    assert found.startswith("plan: ") and ": est. -1.0% all-reduce time vs default" in found


def test_the_estimate_of_no_knobs_with_assumed_layers_and_part_of_the_steps() -> None:
    workload = Workload.from_weights("w", {1: 0.5, 16: 0.5})
    assumed = Step(layers=10, layers_known=False)
    found = explain.estimate_line(
        choice(NCCL_ONLY, FAST, candidate=NOTHING, workload=workload, step=assumed), workload
    )
    # The covered share comes before the figure it qualifies.
    assert found == (
        "no knobs: nothing measured beats the launcher's default by more than noise; on the 50% of the "
        "workload 'w' steps that could be priced: 208.0 us of all-reduce per step (10 layers assumed)"
    )


def test_the_estimate_gives_no_per_step_figure_below_half_the_steps_priced() -> None:
    workload = Workload.from_weights("w", {1: 0.4, 16: 0.6})
    found = explain.estimate_line(choice(NCCL_ONLY, FAST, candidate=NOTHING, workload=workload), workload)
    assert found.endswith(
        "only 40% of the workload 'w' steps could be priced: no per-step figure (recommend --explain shows "
        "each step)"
    )
    assert "us of all-reduce per step" not in found


def test_the_estimate_of_an_unmeasured_default_names_it_and_the_fix() -> None:
    workload = Workload.from_weights("w", {3: 0.5, 4: 0.5})
    found = explain.estimate_line(
        choice(NCCL_ONLY, FAST, default_plain=upto(8, "nccl_nvls"), workload=workload, candidate=NOTHING),
        workload,
        "vllm",
    )
    assert found.startswith(
        f"no knobs: vLLM {PINNED['vllm']} runs nccl_nvls here by default at 3-4 tokens (100% of the workload's steps), "
        "which is not measured. Fix: NCCL_NVLS_ENABLE=0"
    )
    assert "nothing changed" not in found and "beats" not in found


def test_the_estimate_of_a_workload_priced_nowhere() -> None:
    workload = Workload.from_weights("far", {16: 1.0})
    assert explain.estimate_line(planned_for(workload), workload) == (
        "plan: --fast: the default's paths were not measured at any of the workload 'far' sizes"
    )


# --- the text to a terminal's width -----------------------------------------------------------

RANGES = [
    row(default_us=8.0, plan_us=4.0, plan="vllm_custom", note="plan measured faster", sites=3),
    row(first_tokens=2, last_tokens=None, source="-", note="beyond"),
]


def text(width: int | None, ranges: list[Row] = RANGES, summary: str = "SUMMARY", **over: Any) -> list[str]:
    found = {**data(steps=STEP_ROWS[:1], binding=BINDING, **over), "summary": summary}
    return explain.render(ranges, found, width).split("\n")


def test_without_a_width_every_part_is_one_line_each() -> None:
    found = text(None)
    assert found == [
        "SUMMARY",
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
    assert text(60, summary="word " * 20) == [
        "word word word word word word word word word word word word",
        "  word word word word word word word word",
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
    found = text(60, ranges=RANGES[:1], unmeasured=[entry(1, 1)])
    assert found[:4] == [
        "SUMMARY",
        "not measured: the default runs mystery at 1 tokens of this",
        "  workload (no price): left as it is. To plan there:",
        "  re-probe.",
    ]


@pytest.mark.parametrize(("width", "used"), [(30, 40), (39, 40), (40, 40), (41, 41)])
def test_prose_never_wraps_narrower_than_forty_columns(width: int, used: int) -> None:
    words = "x" * 10 + (" " + "x" * 9) * 8
    lines = explain._wrapped(words, width)
    assert max(len(line) for line in lines) <= used
    assert len(lines[0]) > used - 10


def test_wrapping_keeps_long_words_and_hyphens_and_an_empty_line() -> None:
    assert explain._wrapped("", 40) == [""]
    assert explain._wrapped("a" * 50 + " b", 40) == ["a" * 50, "  b"]
    assert explain._wrapped("x" * 35 + " well-known", 40) == ["x" * 35, "  well-known"]
    assert explain._wrapped("anything", None) == ["anything"]


def test_a_table_pads_each_column_to_its_widest_cell() -> None:
    assert explain._table([("a", "bb", "c"), ("ccc", "d", ""), ("", "e", "f")]) == [
        "a    bb  c",
        "ccc  d",
        "     e   f",
    ]


def _step(tokens: int, default_us: float | None, weight: float = 0.1) -> dict:
    plan_us = default_us
    return {
        "tokens": tokens, "size": f"{tokens * 16} KiB", "weight": weight, "default_us_per_step": default_us,
        "plan_us_per_step": plan_us, "saving_us_per_step": None if default_us is None else 0.0,
        "changed": [], "why": None,
    }  # fmt: skip


def test_runs_of_unpriced_step_rows_fold_into_one() -> None:
    steps = [_step(1, None), _step(2, None), _step(4, None), _step(8, 5.0), _step(16, None), _step(32, None)]
    lines = explain._step_lines({"sites_per_step": {PLAIN: 1}, "steps": steps, "binding": None})
    rows = [line.split() for line in lines[2:]]
    # Three unpriced neighbours fold (sized by their largest message); two stay rows of their own.
    assert [row[:2] for row in rows] == [["1-4", "64"], ["8", "128"], ["16", "256"], ["32", "512"]]
    assert rows[0][3:5] == ["30.0%", "n/a"] and rows[2][3] == "10.0%"


def test_a_run_longer_than_the_fold_threshold_is_folded_whole() -> None:
    steps = [_step(tokens, None) for tokens in (1, 2, 4, 8)]
    lines = explain._step_lines({"sites_per_step": {PLAIN: 1}, "steps": steps, "binding": None})
    assert [line.split()[:4] for line in lines[2:]] == [["1-8", "128", "KiB", "40.0%"]]


@pytest.mark.parametrize("priced_side", ["default_us_per_step", "plan_us_per_step"])
def test_a_row_one_side_prices_ends_a_run_of_unpriced_rows(priced_side: str) -> None:
    # Two unpriced rows stay rows of their own; the third has a figure on one side, so it is no third
    # unpriced neighbour to fold them with.
    half = {**_step(4, None), priced_side: 5.0}
    steps = [_step(1, None), _step(2, None), half]
    lines = explain._step_lines({"sites_per_step": {PLAIN: 1}, "steps": steps, "binding": None})
    assert [line.split()[0] for line in lines[2:]] == ["1", "2", "4"]
