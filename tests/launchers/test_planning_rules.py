"""The planner's rules one at a time, on small hand-built tables and a stand-in launcher: the node
variants a plan must hold on, knob counts and the user's knobs winning, the refusal words, which
rungs are priced in context (and the re-check that follows), the fewest-knobs tie rule, the score of
a candidate's worst variant, what a missing measurement could unlock, and ``describe``'s words.

The stand-in launcher replaces TensorRT-LLM's router: its config names each pattern's route
directly, ``{"allreduce": (tokens, backend)}`` (that backend up to ``tokens`` tokens, NCCL above;
``tokens`` None: every size) or as spans, ``((tokens, backend), ..., (None, backend))`` (each backend
up to its token count, the last one above), optionally per group class (``{"nvswitch": (...), ...}``); a pattern
it does not name runs ``{"default_allreduce": ...}`` if given (the user's default), else NCCL
everywhere, and ``{"refuse": why}`` is refused with that reason.
"""

from __future__ import annotations

import dataclasses

import pytest
from price_tables import FUSED, PLAIN, ROW, SIZES, STEP, flat, table

from topo_gate.launchers import routes as route_models
from topo_gate.launchers.command.parse import read_knobs
from topo_gate.launchers.plan.choice import (
    CAPABILITY_VARIANTS,
    GROUP_VARIANTS,
    NO_KNOBS,
    TIE_FRACTION,
    Candidate,
    Choice,
    Unlock,
    Variant,
    _best,
    _score,
    choose,
    contexts,
    describe,
    effective_knobs,
    routed,
)
from topo_gate.launchers.plan.costmodel import Pricing, Side, StepCost, Total
from topo_gate.launchers.plan.request import ProfileFacts
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Context, Knobs, RouteError
from topo_gate.launchers.routes.base import up_to

MiB = 1 << 20
NCCL_EVERYWHERE = ((None, None),)
ONE_AND_EIGHT = Workload.from_weights("one-eight", {1: 0.5, 8: 0.5})


def stand_in_routes(knobset: Knobs, ctx: Context) -> dict:
    config = knobset.config
    if "refuse" in config:
        raise RouteError(str(config["refuse"]))
    out = {}
    for pattern in (PLAIN, FUSED):
        spec = config.get(pattern, config.get(f"default_{pattern}"))
        if isinstance(spec, dict):
            spec = spec.get(ctx.group_class)
        if spec is None:
            out[pattern] = NCCL_EVERYWHERE
        elif isinstance(spec[0], tuple):
            out[pattern] = tuple((None if t is None else t * ctx.row_bytes + 1, b) for t, b in spec)
        else:
            tokens, backend = spec
            out[pattern] = up_to(None if tokens is None else tokens * ctx.row_bytes + 1, backend)
    return out


@pytest.fixture(autouse=True)
def stand_in_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(route_models.ROUTERS, "trtllm", stand_in_routes)


def facts(
    plain: dict,
    fused: dict | None = None,
    *,
    group_class: str | None = "nvswitch",
    capability: tuple[int, int] | None = (9, 0),
    fixed: frozenset = frozenset(),
) -> ProfileFacts:
    fused = fused or {"nccl": {"median": flat(10.0)}}
    return ProfileFacts(
        {PLAIN: table(PLAIN, plain), FUSED: table(FUSED, fused)},
        7168,
        2,
        capability,
        (),
        group_class=group_class,
        served_hidden=7168,
        fixed=fixed,
    )


def knobs(**routes) -> Knobs:
    return Knobs(
        config={PLAIN if k == "plain" else FUSED if k == "fused" else k: v for k, v in routes.items()}
    )


NOTHING = Knobs()


def plan(read: ProfileFacts, candidates: list[Candidate], *, user: Knobs = NOTHING, workload=ONE_AND_EIGHT):
    return choose(
        "trtllm", candidates, read, 2, user=read_knobs("trtllm", user), workload=workload, step=STEP
    )


def fast(tokens: int | None, backend: str = "vllm_custom", note: str = "") -> Candidate:
    return Candidate(knobs(plain=(tokens, backend)), (note or f"{backend} up to {tokens}",))


NCCL_8 = {"nccl": {"median": flat(8.0)}}


# -- the node variants ----------------------------------------------------------------------------


def test_an_unknown_node_is_every_capability_row_times_every_group_class() -> None:
    read = ProfileFacts({}, None, None, None, ())
    found = contexts(read, 4)
    assert CAPABILITY_VARIANTS == ((9, 0), (10, 0), (10, 3), (12, 0))
    assert GROUP_VARIANTS == ("nvswitch", "pcie-switch")
    assert [(c.capability, c.group_class) for c in found] == [
        ((9, 0), "nvswitch"),
        ((9, 0), "pcie-switch"),
        ((10, 0), "nvswitch"),
        ((10, 0), "pcie-switch"),
        ((10, 3), "nvswitch"),
        ((10, 3), "pcie-switch"),
        ((12, 0), "nvswitch"),
        ((12, 0), "pcie-switch"),
    ]
    # Nothing known of the served model: one element of one byte-pair (bf16) per token row.
    assert {(c.tp, c.hidden, c.itemsize, c.model, c.architecture) for c in found} == {(4, 1, 2, None, None)}


def test_a_known_node_is_one_variant_with_the_served_models_shape() -> None:
    read = ProfileFacts(
        {}, 4096, 4, (10, 3), (), group_class="pcie-switch", served_hidden=7168, model="m", architecture="A"
    )
    assert contexts(read, 2) == [Context(2, (10, 3), "pcie-switch", 7168, 4, "m", "A")]


@pytest.mark.parametrize(
    ("hidden", "served_hidden", "itemsize", "row"),
    [(4096, None, None, (4096, 2)), (None, None, 1, (1, 1)), (4096, 7168, 2, (7168, 2))],
    ids=["the-trials-hidden", "nothing-known", "the-served-one-wins"],
)
def test_the_row_is_the_served_hidden_else_the_trials_times_the_itemsize(
    hidden: int | None, served_hidden: int | None, itemsize: int | None, row: tuple[int, int]
) -> None:
    read = ProfileFacts({}, hidden, itemsize, (9, 0), (), group_class="nvswitch", served_hidden=served_hidden)
    [ctx] = contexts(read, 2)
    assert (ctx.hidden, ctx.itemsize) == row


# -- knobs ------------------------------------------------------------------------------------------


def test_a_knob_count_counts_flags_env_and_config_not_flag_values() -> None:
    candidate = Candidate(Knobs(args=("--a", "value", "-b", "x"), env={"E": "1"}, config={"c": 1, "d": 2}))
    assert candidate.knob_count == 5
    assert Candidate(Knobs(args=("--one",))).knob_count == 1
    assert NO_KNOBS.knob_count == 0
    assert NO_KNOBS == Candidate(Knobs(), ("no knobs: the launcher's default",))


def test_a_candidate_is_a_frozen_value() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        NO_KNOBS.notes = ()  # type: ignore[misc]


def test_the_users_knobs_win_key_by_key_and_the_candidates_fill_in() -> None:
    user = Knobs(args=("--model-path", "m"), env={"A": "user"}, config={"k": 1})
    candidate = Knobs(args=("--enable-nccl-nvls",), env={"A": "plan", "B": "plan"}, config={"k": 2, "j": 3})
    assert effective_knobs(read_knobs("sglang", user), candidate) == Knobs(
        args=("--model-path", "m", "--enable-nccl-nvls"),
        env={"A": "user", "B": "plan"},
        config={"k": 1, "j": 3},
    )


@pytest.mark.parametrize(
    ("tp", "env", "nccl"),
    [(2, {}, "nccl"), (4, {}, "nccl_nvls"), (4, {"NCCL_NVLS_ENABLE": "0"}, "nccl")],
    ids=["two-gpus", "nvls-at-four", "nvls-off"],
)
def test_a_knob_set_is_routed_with_the_nccl_it_runs(tp: int, env: dict, nccl: str) -> None:
    ctx = Context(tp, (9, 0), "nvswitch", 7168)
    found = routed("trtllm", Knobs(env=env, config={PLAIN: (4, "vllm_custom")}), ctx)
    assert found.nccl == nccl
    assert found.routes == {PLAIN: up_to(4 * ROW + 1, "vllm_custom"), FUSED: NCCL_EVERYWHERE}
    side = found.side(ctx, ONE_AND_EIGHT, STEP)
    assert side == Side.of(found.routes, nccl, ROW, ONE_AND_EIGHT, STEP)


# -- choose: admission and refusal words -------------------------------------------------------------


def test_a_refused_knob_set_does_not_stop_the_search() -> None:
    read = facts({**NCCL_8, "vllm_custom": {"median": flat(4.0)}})
    refused = Candidate(Knobs(config={"refuse": "no such knob here"}))
    choice = plan(read, [refused, fast(16)])
    assert choice.candidate == fast(16)
    assert choice.rejected == ((refused, "no such knob here"),)
    assert choice.routes == {PLAIN: up_to(16 * ROW + 1, "vllm_custom"), FUSED: NCCL_EVERYWHERE}
    [variant] = choice.variants
    assert (variant.plan.routes, variant.default.routes) == (
        choice.routes,
        {PLAIN: NCCL_EVERYWHERE, FUSED: NCCL_EVERYWHERE},
    )
    assert variant.problems == ()
    assert variant.total.default_us == pytest.approx(8.0 + 200.0)
    assert variant.total.plan_us == pytest.approx(4.0 + 200.0)
    assert choice.unlock is None


def test_duplicate_knob_sets_are_priced_once_and_no_knobs_comes_first() -> None:
    read = facts({**NCCL_8, "vllm_custom": {"median": flat(9.0)}})
    again = Candidate(Knobs(), ("no knobs again",))
    slow, slow_again = fast(16, note="first"), fast(16, note="second")
    choice = plan(read, [again, slow, slow_again])
    assert choice.candidate == NO_KNOBS
    assert [candidate for candidate, _ in choice.rejected] == [slow]


@pytest.mark.parametrize(
    ("candidate", "why"),
    [
        (
            fast(16, "vllm_custom"),
            "step slower at 1 token (14336 B): 209.0 us/step against the default's 208.0 (CI up to 208.1)",
        ),
        (
            fast(None),
            f"allreduce {ROW}-up B: changes sizes beyond the largest measured ({SIZES[-1]} bytes)",
        ),
        (
            fast(16384),
            f"allreduce {ROW}-{16384 * ROW} B: changes sizes beyond the largest measured ({SIZES[-1]} bytes)",
        ),
        (
            fast(16, "mystery"),
            "allreduce: not measured at 1 token (14336 B) (mystery not in the trials at 14336 bytes)",
        ),
    ],
    ids=["slower-step", "every-size", "beyond-the-table", "unmeasured-path"],
)
def test_a_refusal_says_where_and_why(candidate: Candidate, why: str) -> None:
    read = facts({**NCCL_8, "vllm_custom": {"median": flat(9.0)}})
    choice = plan(read, [candidate])
    assert choice.candidate == NO_KNOBS
    assert choice.rejected == ((candidate, why),)


def test_a_pattern_left_out_must_keep_every_default_path() -> None:
    read = facts(
        {**NCCL_8, "vllm_custom": {"median": flat(4.0)}},
        {"nccl": {"median": flat(10.0)}, "trtllm_fused_oneshot_vllm": {"median": flat(5.0)}},
        fixed=frozenset({FUSED, PLAIN}),
    )
    both = Candidate(knobs(plain=(16, "vllm_custom"), fused=(16, "trtllm_fused_oneshot_vllm")))
    fused_only = Candidate(knobs(fused=(16, "trtllm_fused_oneshot_vllm")))
    choice = plan(read, [both, fused_only])
    assert choice.candidate == NO_KNOBS
    assert choice.rejected == (
        (both, "allreduce: changes nccl to vllm_custom, a pattern left out (--pattern)"),
        (
            fused_only,
            "allreduce_rmsnorm: changes nccl to trtllm_fused_oneshot_vllm, a pattern left out (--pattern)",
        ),
    )


def test_a_fixed_pattern_names_its_first_changed_range() -> None:
    read = facts(
        {**NCCL_8, "vllm_custom": {"median": flat(4.0)}, "pcie_ipc": {"median": flat(4.0)}},
        fixed=frozenset({PLAIN}),
    )
    # The user's default runs pcie_ipc up to 4 tokens: the candidate changes it, then NCCL above it.
    user = Knobs(config={f"default_{PLAIN}": (4, "pcie_ipc")})
    candidate = fast(16)
    choice = plan(read, [candidate], user=user)
    assert choice.rejected == (
        (candidate, "allreduce: changes pcie_ipc to vllm_custom, a pattern left out (--pattern)"),
    )


def test_an_unknown_group_class_must_be_held_on_each_in_order() -> None:
    read = facts({**NCCL_8, "vllm_custom": {"median": flat(4.0)}}, group_class=None)
    on_pcie_only = Candidate(knobs(plain={"pcie-switch": (None, "vllm_custom")}))
    on_both = Candidate(knobs(plain={"nvswitch": (16, "mystery"), "pcie-switch": (None, "vllm_custom")}))
    choice = plan(read, [on_pcie_only, on_both])
    assert [ctx.group_class for ctx in (v.ctx for v in choice.variants)] == list(GROUP_VARIANTS)
    assert choice.rejected == (
        (
            on_pcie_only,
            f"allreduce {ROW}-up B: changes sizes beyond the largest measured ({SIZES[-1]} bytes)",
        ),
        (on_both, "allreduce: not measured at 1 token (14336 B) (mystery not in the trials at 14336 bytes)"),
    )


# -- in-context pricing ----------------------------------------------------------------------------


def in_context(values: list[float | None], median: float) -> dict:
    return {"median": flat(median), "context": values}


def test_a_candidate_admitted_in_isolation_is_refused_in_context() -> None:
    read = facts(
        {"nccl": in_context(flat(8.0), 8.0), "vllm_custom": in_context(flat(9.0), 6.0)},
        {"nccl": in_context(flat(10.0), 10.0)},
    )
    candidate = fast(16)
    choice = plan(read, [candidate])
    assert choice.candidate == NO_KNOBS
    assert [why.split(":")[0] for _, why in choice.rejected] == ["step slower at 1 token (14336 B)"]
    everywhere = {(pattern, rung) for pattern in (PLAIN, FUSED) for rung in range(len(SIZES))}
    assert choice.worst.pricing.in_context == everywhere


def test_a_refusal_in_context_re_opens_the_rungs_it_held_back() -> None:
    """vllm_custom was never timed in context at 16 tokens, so while it is admitted that rung is
    priced in isolation for everyone; once it is refused in context (at 1 token), 16 tokens is priced
    in context, where pcie_ipc is slower than NCCL: it is refused on the re-check."""
    no_context_at_16 = [9.0] * 4 + [None] * 10
    read = facts(
        {
            "nccl": in_context(flat(8.0), 8.0),
            "vllm_custom": in_context(no_context_at_16, 6.0),
            "pcie_ipc": in_context([7.0] * 4 + [9.0] * 10, 6.0),
        },
        {"nccl": in_context(flat(10.0), 10.0)},
    )
    first, second = fast(16), fast(16, "pcie_ipc")
    choice = plan(read, [first, second])
    assert choice.candidate == NO_KNOBS
    assert [(c, why.split(":")[0]) for c, why in choice.rejected] == [
        (first, "step slower at 1 token (14336 B)"),
        (second, "step slower at 16 tokens (229376 B)"),
    ]


def test_the_rungs_priced_in_context_are_those_every_admitted_path_was_timed_at() -> None:
    """vllm_custom up to 20 tokens needs the rungs up to 32 tokens (20 lies between 16 and 32), and
    was timed in context only up to 16; NCCL above 20 tokens was timed in context everywhere."""
    read = facts(
        {"nccl": in_context(flat(8.0), 8.0), "vllm_custom": in_context([5.0] * 5 + [None] * 9, 6.0)},
        {"nccl": in_context(flat(10.0), 10.0)},
    )
    choice = plan(read, [fast(20)])
    assert choice.candidate == fast(20)
    assert choice.worst.pricing.in_context == {(PLAIN, rung) for rung in range(len(SIZES)) if rung != 5} | {
        (FUSED, rung) for rung in range(len(SIZES))
    }
    assert choice.worst.total.plan_us == pytest.approx(5.0 + 200.0)


def test_a_default_path_not_timed_in_context_keeps_its_rungs_isolated() -> None:
    read = facts(
        {
            "nccl": in_context(flat(8.0), 8.0),
            "pcie_ipc": in_context([None] * 3 + flat(7.0)[3:], 7.0),
            "vllm_custom": in_context(flat(3.0), 3.0),
        },
        {"nccl": in_context(flat(10.0), 10.0)},
    )
    choice = plan(read, [fast(8)], user=Knobs(config={f"default_{PLAIN}": (8, "pcie_ipc")}))
    assert choice.candidate == fast(8)
    assert choice.worst.pricing.in_context == {(PLAIN, rung) for rung in range(3, len(SIZES))} | {
        (FUSED, rung) for rung in range(len(SIZES))
    }


def test_a_default_reaching_beyond_the_table_prices_what_the_table_holds() -> None:
    read = facts(
        {"nccl": in_context(flat(8.0), 8.0), "pcie_ipc": in_context(flat(7.0), 7.0)},
        {"nccl": in_context(flat(10.0), 10.0)},
    )
    choice = plan(read, [], user=Knobs(config={f"default_{PLAIN}": (16384, "pcie_ipc")}))
    assert choice.candidate == NO_KNOBS
    assert choice.worst.pricing.in_context == {
        (p, rung) for p in (PLAIN, FUSED) for rung in range(len(SIZES))
    }


# -- the objective: worst variant, fewest knobs on a tie ---------------------------------------------


def variant(plan_us: float | None, default_us: float | None) -> Variant:
    """A variant whose workload total is one step of these costs (None: unmeasured)."""
    ctx = Context(2, (9, 0), "nvswitch", 7168)
    steps = (StepCost(1, 1.0, default_us, plan_us if default_us is not None else None),)
    side = Side({}, "nccl", {})
    return Variant(ctx, Pricing({}, STEP, ROW), side, side, (), Total(steps))


def test_a_score_is_the_worst_variants_plan_and_its_default() -> None:
    assert _score([variant(0.5, 0.6), variant(None, None)]) == (0.5, 0.6)
    assert _score([variant(None, None), variant(0.5, 0.6)]) == (0.5, 0.6)
    assert _score([variant(3.0, 9.0), variant(4.0, 5.0)]) == (4.0, 5.0)
    assert _score([variant(None, None)]) == (0.0, 0.0)


def test_a_choices_worst_variant_is_the_one_with_the_dearest_plan() -> None:
    unmeasured, cheap = variant(None, None), variant(0.5, 0.6)
    choice = Choice(NO_KNOBS, (unmeasured, cheap))
    assert choice.worst is cheap
    assert Choice(NO_KNOBS, (variant(2.0, 3.0), variant(1.0, 1.0))).worst.total.plan_us == 2.0


def counted(knob_count: int) -> Candidate:
    return Candidate(Knobs(config={f"k{i}": i for i in range(knob_count)}))


@pytest.mark.parametrize(
    ("dearer_plan_us", "wins"),
    [(99.0, False), (98.999, True), (99.5, False), (101.0, False)],
    ids=["exactly-the-tie-share", "just-beyond-it", "within-it", "dearer"],
)
def test_more_knobs_win_only_beyond_the_tie_share_of_the_default(dearer_plan_us: float, wins: bool) -> None:
    assert TIE_FRACTION == 0.01
    fewer, more = (counted(0), (variant(100.0, 100.0),)), (counted(2), (variant(dearer_plan_us, 100.0),))
    assert _best([more, fewer]) == (more if wins else fewer)


def test_the_tie_share_is_of_the_fewest_knobs_default_and_each_winner_raises_the_bar() -> None:
    base = (counted(0), (variant(100.0, 100.0),))
    one = (counted(1), (variant(95.0, 50.0),))
    two = (counted(2), (variant(94.5, 50.0),))  # 0.5 below one: under 1% of base's default 100
    three = (counted(3), (variant(93.9, 50.0),))
    assert _best([three, two, one, base]) is three
    assert _best([two, one, base]) is one
    assert _best([one, base]) is one
    assert _best([base]) is base
    tie = (counted(1), (variant(100.0, 100.0),))
    assert _best([base, tie]) is base and _best([tie, base]) is base


# -- what a missing measurement could unlock ----------------------------------------------------------


def lamport(after: dict, median: float = 4.0) -> dict:
    return {"median": flat(median), "transition": after}


def test_a_transition_known_only_by_its_bound_could_unlock_a_plan() -> None:
    """One-shot up to 8 tokens saves 4 us per step, but after the 8-token step its transition was only
    timed after 16 tokens (300 us): the bound refuses it at 1 token, where 4.08 us of room is left."""
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})})
    candidate = fast(8, "trtllm_oneshot")
    choice = plan(read, [candidate])
    assert choice.candidate == NO_KNOBS
    assert choice.rejected[0][1].startswith("step slower at 1 token (14336 B): 354.0 us/step")
    found = choice.unlock
    assert found is not None and choice.unlock is found
    assert (found.candidate, found.kernel, found.largest_prior, found.bounded_by) == (
        candidate,
        "trtllm_oneshot",
        8 * ROW,
        16 * ROW,
    )
    assert found.check.nbytes == ROW
    assert (found.saving_us, found.default_us, found.chance) == (
        pytest.approx(4.0),
        pytest.approx(208.0),
        pytest.approx(0.5),
    )
    assert (found.room_us, found.bound_us) == (pytest.approx(4.08), pytest.approx(150.0))
    # The room admits up to 8.16 us (4.08 / 0.5), but the plan takes the candidate only while it still
    # saves more than the tie share (2.08 us of the default's 208): 4 - 0.25 x T > 2.08.
    assert (found.largest_prior, found.threshold_us) == (8 * ROW, pytest.approx(7.68, rel=2e-3))


def test_the_unlock_with_the_largest_saving_is_named() -> None:
    read = facts(
        {
            **NCCL_8,
            "trtllm_oneshot": lamport({16 * ROW: flat(300.0)}),
            "trtllm_oneshot_sglang": lamport({16 * ROW: flat(300.0)}, 3.0),
        }
    )
    small, large = fast(8, "trtllm_oneshot"), fast(8, "trtllm_oneshot_sglang")
    unmeasured = fast(8, "mystery")
    assert plan(read, [small, unmeasured, large]).unlock.candidate == large
    assert plan(read, [large, unmeasured, small]).unlock.candidate == large
    assert plan(read, [unmeasured]).unlock is None


def test_no_unlock_when_even_the_lower_bound_saves_less_than_the_chosen_plan() -> None:
    read = facts(
        {**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)}), "vllm_custom": {"median": flat(3.0)}}
    )
    choice = plan(read, [fast(8, "trtllm_oneshot"), fast(8)])
    assert choice.candidate == fast(8)
    assert choice.unlock is None


def test_no_unlock_when_the_lower_bound_is_refused_too() -> None:
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({4 * ROW: flat(50.0), 16 * ROW: flat(300.0)})})
    assert plan(read, [fast(8, "trtllm_oneshot")]).unlock is None


@pytest.mark.parametrize(("median", "room_us"), [(4.0, 4.08), (5.5, 2.58)])
def test_an_unlocks_room_is_what_the_lower_bound_leaves_at_the_binding_size(
    median: float, room_us: float
) -> None:
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)}, median)})
    found = plan(read, [fast(8, "trtllm_oneshot")]).unlock
    assert found is not None
    assert (found.room_us, found.saving_us) == (pytest.approx(room_us), pytest.approx(8.0 - median))


def test_no_unlock_where_two_kernels_transitions_are_only_bounded() -> None:
    """The plain and the fused one-shot kernels (two buffers) are both bounded after the 8-token step,
    each half the time: measuring one of them leaves the other's bound refusing the plan, so no one
    measurement unlocks it and none is named."""
    read = facts(
        {**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})},
        {
            "nccl": {"median": flat(10.0)},
            "trtllm_fused_oneshot_sglang": lamport({16 * ROW: flat(300.0)}, 9.5),
        },
    )
    both = Candidate(knobs(plain=(8, "trtllm_oneshot"), fused=(8, "trtllm_fused_oneshot_sglang")))
    assert plan(read, [both]).unlock is None


def test_an_unlock_is_found_where_only_the_chosen_plans_paths_were_timed_in_context() -> None:
    """NCCL was timed in context, the one-shot kernel never was: the candidate's own rungs (its
    kernel's, up to 8 tokens) are priced in isolation, as ``choose`` would price it once admitted, so
    the same measurement unlocks it as when nothing was timed in context."""
    read = facts(
        {"nccl": in_context(flat(8.0), 8.0), "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})},
        {"nccl": in_context(flat(10.0), 10.0)},
    )
    found = plan(read, [fast(8, "trtllm_oneshot")]).unlock
    assert found is not None
    assert (found.check.nbytes, found.room_us, found.bound_us) == (
        ROW,
        pytest.approx(4.08),
        pytest.approx(150.0),
    )


# -- describe --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spans", "words"),
    [
        (
            ((7 * MiB + 1, "trtllm_oneshot"), (8 * MiB, "vllm_custom"), (None, None)),
            "<= 7 MiB trtllm_oneshot, < 8 MiB vllm_custom, nccl above",
        ),
        (((1024, "a"), (None, None)), "< 1 KiB a, nccl above"),
        (((1025, "a"), (None, None)), "<= 1 KiB a, nccl above"),
        (((1023, "a"), (None, "b")), "<= 1022 B a, b above"),
        (((2048, None), (None, "x")), "< 2 KiB nccl, x above"),
        (((64 * MiB - ROW + 1, "a"), (None, None)), "<= 63.9863 MiB a, nccl above"),
        (((64 * MiB - ROW, "a"), (None, None)), "< 63.9863 MiB a, nccl above"),
        (((None, "pcie_ipc"),), "pcie_ipc at every size"),
        (((None, None),), "nccl at every size"),
    ],
)
def test_a_route_reads_as_its_limits(spans: tuple, words: str) -> None:
    assert describe(spans) == words


def test_no_unlock_when_the_lower_bound_only_ties_the_chosen_plan() -> None:
    # vllm_custom at 4 us is chosen; the one-shot kernel, at its lower bound, costs the same per step:
    # unlocking it would save nothing over the plan the user already gets.
    read = facts(
        {**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)}), "vllm_custom": {"median": flat(4.0)}}
    )
    choice = plan(read, [fast(8, "trtllm_oneshot"), fast(8)])
    assert choice.candidate == fast(8) and choice.worst.total.plan_us == pytest.approx(204.0)
    assert choice.unlock is None


def test_an_unlock_is_bound_at_the_size_with_the_least_room_for_its_bound() -> None:
    """Both the 1- and the 4-token steps are refused at the bound (their transitions after the 8-token
    step only timed after 16 tokens); the 4-token step's bound is dearer (2000 us against 300) for the
    same room, so that is where a measurement must land."""
    cost = [300.0, 300.0, 2000.0] + [2000.0] * 11
    workload = Workload.from_weights("one-four-eight", {1: 1, 4: 1, 8: 1})
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: cost})})
    found = plan(read, [fast(8, "trtllm_oneshot")], workload=workload).unlock
    assert found is not None
    assert (found.check.nbytes, found.room_us, found.bound_us) == (
        4 * ROW,
        pytest.approx(4.08),
        pytest.approx(2000.0 / 3),
    )


def test_an_unlock_does_not_name_a_later_site_whose_transitions_were_all_measured() -> None:
    """The fused one-shot kernel's transitions after the 8-token step were timed (chance 0 of a bound):
    the plain kernel, bounded half the time, is the one a measurement is missing for."""
    read = facts(
        {**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})},
        {
            "nccl": {"median": flat(10.0)},
            "trtllm_fused_oneshot_sglang": lamport({8 * ROW: flat(1.0), 16 * ROW: flat(1.0)}, 9.5),
        },
    )
    both = Candidate(knobs(plain=(8, "trtllm_oneshot"), fused=(8, "trtllm_fused_oneshot_sglang")))
    found = plan(read, [both]).unlock
    assert found is not None
    assert (found.kernel, found.largest_prior, found.chance) == (
        "trtllm_oneshot",
        8 * ROW,
        pytest.approx(0.5),
    )


def test_a_piece_starting_between_rungs_needs_its_path_timed_in_context_at_the_rung_below() -> None:
    """The plan hands 9-16 tokens to NCCL (the default keeps vllm_custom up to 16), and NCCL was not
    timed in context at 8 tokens, the rung the 9-token message is priced from: that rung is priced in
    isolation, and the plan is admitted on its isolated prices there."""
    nccl_in_context = [3.0] * 3 + [None] + [3.0] * 10  # none at rung 3 (8 tokens)
    read = facts(
        {
            "nccl": in_context(nccl_in_context, 3.0),
            "vllm_custom": in_context(flat(8.0), 8.0),
            "pcie_ipc": in_context(flat(2.0), 2.0),
        }
    )
    user = knobs(default_allreduce=(16, "vllm_custom"))
    workload = Workload.from_weights("one-twelve", {1: 1, 12: 1})
    candidate = fast(8, "pcie_ipc")
    choice = plan(read, [candidate], user=user, workload=workload)
    assert (choice.candidate, choice.rejected) == (candidate, ())
    assert sorted(rung for pattern, rung in choice.worst.pricing.in_context if pattern == PLAIN) == [
        rung for rung in range(len(SIZES)) if rung != 3
    ]


def test_a_variant_is_a_value_that_cannot_be_changed() -> None:
    # A Choice's variants are what explain and the outlook read after the search: none may move.
    found = plan(facts(NCCL_8), [fast(8)]).worst
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.total = None  # type: ignore[misc]


def test_choose_takes_its_settings_by_keyword_only() -> None:
    # follow.py passes them by name; a positional call would bind a workload to ``user``.
    with pytest.raises(TypeError):
        choose("trtllm", [NO_KNOBS], facts(NCCL_8), 2, NOTHING, ONE_AND_EIGHT, STEP)  # type: ignore[misc, arg-type]


def test_an_unlock_looks_past_a_size_its_bound_leaves_within_the_limit() -> None:
    """At 1 token the transition's bound is cheap (1 us) and the step stays within the limit; at 4
    tokens it is 2000 us: the search goes on to the 4-token step and binds there."""
    cost = [1.0, 1.0, 2000.0] + [2000.0] * 11
    workload = Workload.from_weights("one-four-eight", {1: 1, 4: 1, 8: 1})
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: cost})})
    found = plan(read, [fast(8, "trtllm_oneshot")], workload=workload).unlock
    assert found is not None
    assert (found.check.nbytes, found.chance) == (4 * ROW, pytest.approx(1 / 3))


def test_an_unlocks_chance_counts_only_the_earlier_messages_whose_transition_is_unmeasured() -> None:
    """One-shot up to 16 tokens: after the 16-token step its transition was timed (7 us, charged in
    full), after the 8-token step only bounded by that: the unlock is that third of the steps alone."""
    workload = Workload.from_weights("one-eight-sixteen", {1: 1, 8: 1, 16: 1})
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(7.0), 32 * ROW: flat(300.0)})})
    choice = plan(read, [fast(16, "trtllm_oneshot")], workload=workload)
    assert choice.rejected[0][1].startswith("step slower at 1 token (14336 B): 208.7 us/step")
    found = choice.unlock
    assert found is not None
    assert (found.check.nbytes, found.chance, found.largest_prior) == (ROW, pytest.approx(1 / 3), 8 * ROW)


def test_a_choices_routes_are_its_first_variants() -> None:
    # Unknown group class: the NVSwitch variant comes first, and its routes are the ones shown.
    read = facts({**NCCL_8, "vllm_custom": {"median": flat(3.0)}}, group_class=None)
    candidate = Candidate(knobs(plain={"nvswitch": (8, "vllm_custom"), "pcie-switch": (4, "vllm_custom")}))
    choice = plan(read, [candidate])
    assert choice.candidate == candidate
    assert [v.ctx.group_class for v in choice.variants] == ["nvswitch", "pcie-switch"]
    assert choice.routes[PLAIN] == ((8 * ROW + 1, "vllm_custom"), (None, None))


def test_a_choices_repr_leaves_out_its_unlock_search() -> None:
    # The search is a closure: in a repr it would be an address that changes from run to run.
    assert "unlock_search" not in repr(plan(facts(NCCL_8), [fast(8)]))


def test_an_unlocks_bound_comes_from_the_nearest_measurement_after_a_larger_message() -> None:
    # A transition timed after 2 tokens says nothing of one after 8: the bound is the 16-token one.
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({2 * ROW: flat(0.5), 16 * ROW: flat(300.0)})})
    found = plan(read, [fast(8, "trtllm_oneshot")]).unlock
    assert found is not None
    assert (found.largest_prior, found.bounded_by) == (8 * ROW, 16 * ROW)


def test_no_unlock_where_the_kernel_bounded_most_often_is_not_the_only_one() -> None:
    """The plain one-shot runs up to 4 tokens, the fused one up to 8: at 1 token the fused buffer is
    bounded after two of the three steps, the plain one after one: measuring the fused kernel's
    transition leaves the plain one's bound refusing the plan, so neither is named."""
    workload = Workload.from_weights("one-four-eight", {1: 1, 4: 1, 8: 1})
    read = facts(
        {**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})},
        {
            "nccl": {"median": flat(10.0)},
            "trtllm_fused_oneshot_sglang": lamport({16 * ROW: flat(300.0)}, 9.5),
        },
    )
    both = Candidate(knobs(plain=(4, "trtllm_oneshot"), fused=(8, "trtllm_fused_oneshot_sglang")))
    assert plan(read, [both], workload=workload).unlock is None


def test_a_pattern_left_out_refuses_a_change_to_a_kernel_that_sorts_before_the_defaults() -> None:
    # "pcie_ipc" sorts before "vllm_custom": any change of a left-out pattern is refused, not only one
    # to a later name.
    read = facts(
        {**NCCL_8, "vllm_custom": {"median": flat(6.0)}, "pcie_ipc": {"median": flat(3.0)}},
        fixed=frozenset({PLAIN}),
    )
    choice = plan(read, [fast(8, "pcie_ipc")], user=knobs(default_allreduce=(8, "vllm_custom")))
    assert choice.candidate == NO_KNOBS
    assert [why for _, why in choice.rejected] == [
        "allreduce: changes vllm_custom to pcie_ipc, a pattern left out (--pattern)"
    ]


def test_a_choice_is_a_value_that_cannot_be_changed() -> None:
    # Launch plans, explain and the outlook all read the one Choice the search returns.
    choice = plan(facts(NCCL_8), [fast(8)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.candidate = NO_KNOBS  # type: ignore[misc]


def test_an_unlock_is_a_value_that_cannot_be_changed() -> None:
    # explain and the outlook word the one Unlock a Choice carries.
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})})
    found = plan(read, [fast(8, "trtllm_oneshot")]).unlock
    assert found is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.chance = 1.0  # type: ignore[misc]


def test_two_searches_over_the_same_evidence_give_equal_choices() -> None:
    # The unlock search is a closure per search: it takes no part in a Choice's equality.
    read = facts({**NCCL_8, "vllm_custom": {"median": flat(3.0)}})
    assert plan(read, [fast(8)]) == plan(read, [fast(8)])


def test_a_left_out_patterns_refusal_names_its_first_change() -> None:
    # pcie_ipc up to 4 tokens, NCCL from 5 to 8, where the user's default runs vllm_custom up to 8.
    read = facts(
        {**NCCL_8, "vllm_custom": {"median": flat(6.0)}, "pcie_ipc": {"median": flat(3.0)}},
        fixed=frozenset({PLAIN}),
    )
    choice = plan(read, [fast(4, "pcie_ipc")], user=knobs(default_allreduce=(8, "vllm_custom")))
    assert [why for _, why in choice.rejected] == [
        "allreduce: changes vllm_custom to pcie_ipc, a pattern left out (--pattern)"
    ]


def test_an_unlock_of_the_fused_pattern_alone_names_the_fused_kernel() -> None:
    # The plain pattern stays on NCCL (no Lamport buffer): the search goes past it to the fused site.
    read = facts(
        NCCL_8,
        {
            "nccl": {"median": flat(10.0)},
            "trtllm_fused_oneshot_sglang": lamport({16 * ROW: flat(300.0)}, 9.5),
        },
    )
    found = plan(read, [Candidate(knobs(fused=(8, "trtllm_fused_oneshot_sglang")))]).unlock
    assert found is not None
    assert (found.kernel, found.largest_prior, found.chance) == (
        "trtllm_fused_oneshot_sglang",
        8 * ROW,
        pytest.approx(0.5),
    )


def test_an_unlocks_saving_is_that_of_its_dearest_node_variant() -> None:
    """Unknown group class: on NVSwitch the one-shot kernel would run up to 8 tokens, on a PCIe switch
    up to 4; the unlock promises only the PCIe variant's saving (8/3 us per step), not NVSwitch's 4."""
    workload = Workload.from_weights("one-four-eight", {1: 1, 4: 1, 8: 1})
    read = facts({**NCCL_8, "trtllm_oneshot": lamport({16 * ROW: flat(300.0)})}, group_class=None)
    candidate = Candidate(
        knobs(plain={"nvswitch": (8, "trtllm_oneshot"), "pcie-switch": (4, "trtllm_oneshot")})
    )
    found = plan(read, [candidate], workload=workload).unlock
    assert found is not None
    assert (found.saving_us, found.default_us) == (pytest.approx(8 / 3), pytest.approx(208.0))


def seven_token_unlock(plain_transitions: dict) -> Unlock | None:
    """The one-shot kernel at 7 tokens only (vllm_custom below, NCCL above), where the default runs
    vllm_custom and NCCL: 7 tokens, between the 4- and 8-token rungs, is the only size checked. Its
    buffer, shared with the fused one-shot kernel both sides run up to 16 tokens, last held the 5-,
    7- or 16-token step's message, a third each; the fused kernel's transitions were all timed. At
    1 us against 8 the one-shot call saves 7/3 us per step, more than the tie share (2.08 us)."""
    read = facts(
        {
            **NCCL_8,
            "vllm_custom": {"median": flat(8.0)},
            "trtllm_oneshot_sglang": lamport(plain_transitions, 1.0),
        },
        {
            "nccl": {"median": flat(10.0)},
            "trtllm_fused_oneshot_sglang": lamport({16 * ROW: flat(1.0), 32 * ROW: flat(1.0)}, 9.5),
        },
    )
    user = knobs(
        default_allreduce=((6, "vllm_custom"), (None, None)),
        default_allreduce_rmsnorm=((16, "trtllm_fused_oneshot_sglang"), (None, None)),
    )
    candidate = Candidate(knobs(plain=((6, "vllm_custom"), (7, "trtllm_oneshot_sglang"), (None, None))))
    workload = Workload.from_weights("five-seven-sixteen", {5: 1, 7: 1, 16: 1})
    choice = plan(read, [candidate], user=user, workload=workload)
    assert choice.rejected[0][1].startswith("step slower at 7 tokens (100352 B)")
    return choice.unlock


def test_an_unlocks_chance_leaves_out_earlier_messages_no_larger_than_the_binding_size() -> None:
    """After the 5- and the 7-token steps the 7-token call pays no transition, though the 4-token
    rung below it was never timed after them: only the 16-token step's third is what a measurement
    could unlock."""
    found = seven_token_unlock({32 * ROW: flat(2000.0)})
    assert found is not None
    assert (found.check.nbytes, found.kernel, found.largest_prior, found.bounded_by) == (
        7 * ROW,
        "trtllm_oneshot_sglang",
        16 * ROW,
        32 * ROW,
    )
    assert found.chance == pytest.approx(1 / 3)


def test_an_unlocks_bound_is_named_by_the_measurement_it_comes_from() -> None:
    """After 16 and after 32 tokens the one-shot transition was timed at the 8-token rung but not at
    the 4-token one, where the bound is the one timed after 64 tokens: that is the measurement named,
    not the exact one after 16 tokens nor the one after 32 that bounds nothing at 4 tokens."""
    untimed_at_four = [None] * 3 + [1.0] * 11
    found = seven_token_unlock({16 * ROW: untimed_at_four, 32 * ROW: untimed_at_four, 64 * ROW: flat(2000.0)})
    assert found is not None
    assert (found.check.nbytes, found.largest_prior, found.bounded_by) == (7 * ROW, 16 * ROW, 64 * ROW)
    assert found.chance == pytest.approx(1 / 3)
