"""The planner's search on a stand-in launcher whose routes are written by the test, so the search
rules (admission, the objective, ties, the user's knobs) are pinned apart from any launcher's routing.

The stand-in replaces TensorRT-LLM's router (its knobs live in ``Knobs.config``, which the planner
merges key by key, the user's winning): config ``{"limit": N}`` sends plain and fused all-reduces of
up to N tokens to ``vllm_custom`` / ``trtllm_fused_oneshot_vllm``; without it the launcher runs
``pcie_ipc`` up to 16 tokens (``{"default_limit": M}``: up to M).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from price_tables import ROW, SIZES, flat, table

from topo_gate.launchers import routes as route_models
from topo_gate.launchers.command.parse import read_knobs
from topo_gate.launchers.plan.choice import NO_KNOBS, Candidate, choose
from topo_gate.launchers.plan.costmodel import Problem, Step, step_check, step_sizes
from topo_gate.launchers.plan.request import ProfileFacts
from topo_gate.launchers.plan.workload import PRESETS, Workload
from topo_gate.launchers.routes import Knobs, RouteError
from topo_gate.launchers.routes.base import up_to

PLAIN, FUSED = "allreduce", "allreduce_rmsnorm"
STEP = Step(layers=10, layers_known=True)
DECODE = PRESETS["decode"]


def stand_in_routes(knobset: Knobs, ctx: route_models.Context) -> dict:
    config = knobset.config
    if config.get("refuse"):
        raise RouteError("the launcher would refuse this")
    if "limit" in config:
        limit = int(config["limit"]) * ctx.row_bytes + 1
        return {PLAIN: up_to(limit, "vllm_custom"), FUSED: up_to(limit, "trtllm_fused_oneshot_vllm")}
    limit = int(config.get("default_limit", 16)) * ctx.row_bytes + 1
    return {PLAIN: up_to(limit, "pcie_ipc"), FUSED: up_to(limit, "pcie_ipc")}


@pytest.fixture(autouse=True)
def stand_in_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(route_models.ROUTERS, "trtllm", stand_in_routes)


def facts(plain: dict, fused: dict, fixed: frozenset = frozenset()) -> ProfileFacts:
    return ProfileFacts(
        {PLAIN: table(PLAIN, plain), FUSED: table(FUSED, fused)},
        7168,
        2,
        (9, 0),
        (),
        group_class="nvswitch",
        served_hidden=7168,
        fixed=fixed,
    )


def untaxed(medians: list[float]) -> dict:
    """The stand-in fused kernel's spec: a Lamport-style kernel (TensorRT-LLM's), whose size
    transitions were timed after every larger size and cost nothing, so the search rules are pinned
    apart from transitions (a Lamport kernel's untimed transition is never free)."""
    return {"median": medians, "transition": {prior: flat(0.0) for prior in SIZES[1:]}}


def fast(tokens: int) -> Candidate:
    return Candidate(Knobs(config={"limit": tokens}), (f"fast up to {tokens}",))


NOTHING = Knobs()


def plan(
    read: ProfileFacts, candidates: list[Candidate], *, user: Knobs = NOTHING, workload: Workload = DECODE
):
    return choose(
        "trtllm", candidates, read, 2, user=read_knobs("trtllm", user), workload=workload, step=STEP
    )


BASE_PLAIN = {"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(6.0)}}
BASE_FUSED = {"nccl": {"median": flat(10.0)}, "pcie_ipc+rmsnorm": {"median": flat(8.0)}}


def test_no_knobs_when_nothing_saves() -> None:
    read = facts(
        {**BASE_PLAIN, "vllm_custom": {"median": flat(7.0)}},
        {**BASE_FUSED, "trtllm_fused_oneshot_vllm": untaxed(flat(9.0))},
    )
    choice = plan(read, [fast(16), fast(64)])
    assert choice.candidate == NO_KNOBS
    # Both are refused where they first replace the default (1 token): the whole step is slower there.
    assert [why.split(":")[0] for _, why in choice.rejected] == ["step slower at 1 token (14336 B)"] * 2


def test_the_cheapest_admissible_plan_wins() -> None:
    read = facts(
        {**BASE_PLAIN, "vllm_custom": {"median": flat(3.0)}},
        {**BASE_FUSED, "trtllm_fused_oneshot_vllm": untaxed(flat(4.0))},
    )
    choice = plan(read, [fast(16), fast(64), fast(512)])
    assert choice.candidate == fast(512)
    assert choice.worst.total.plan_us < choice.worst.total.default_us


def test_a_plan_that_would_change_an_unmeasured_default_is_refused() -> None:
    plain = {"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(1.0)}}  # "pcie_ipc" never measured
    fused = {"nccl": {"median": flat(10.0)}, "trtllm_fused_oneshot_vllm": untaxed(flat(2.0))}
    choice = plan(facts(plain, fused), [fast(16)])
    assert choice.candidate == NO_KNOBS
    assert "default path not measured" in choice.rejected[0][1]


def test_ties_go_to_fewer_knobs() -> None:
    # "vllm_custom" up to 16 tokens is the only difference that matters; two knobs buy nothing more.
    read = facts(
        {**BASE_PLAIN, "vllm_custom": {"median": flat(3.0)}},
        {**BASE_FUSED, "trtllm_fused_oneshot_vllm": untaxed(flat(4.0))},
    )
    one = fast(16)
    two = Candidate(Knobs(config={"limit": 16, "unused": 1}), ("the same, with a knob more",))
    assert plan(read, [two, one]).candidate == one


def test_a_saving_under_the_tie_share_is_no_plan() -> None:
    # 0.5% cheaper than the default over the workload: within TIE_FRACTION, so no knobs.
    read = facts(
        {**BASE_PLAIN, "vllm_custom": {"median": flat(5.995)}},
        {**BASE_FUSED, "trtllm_fused_oneshot_vllm": untaxed(flat(7.96))},
    )
    assert plan(read, [fast(16)], workload=Workload.from_weights("w", {1: 1.0})).candidate == NO_KNOBS


def test_the_users_own_knob_wins_over_a_candidate() -> None:
    read = facts(
        {**BASE_PLAIN, "vllm_custom": {"median": flat(3.0)}},
        {**BASE_FUSED, "trtllm_fused_oneshot_vllm": untaxed(flat(4.0))},
    )
    user = Knobs(config={"limit": 8})
    choice = plan(read, [fast(512)], user=user)
    # The user's "fast: 8" is what runs with or without the candidate: no candidate changes anything.
    assert choice.candidate == NO_KNOBS
    assert choice.worst.default.routes[PLAIN] == up_to(8 * ROW + 1, "vllm_custom")


def test_a_refused_knob_set_is_dropped_with_the_launchers_reason() -> None:
    read = facts(BASE_PLAIN, BASE_FUSED)
    refused = Candidate(Knobs(config={"refuse": True}))
    assert (refused, "the launcher would refuse this") in plan(read, [refused]).rejected


def test_a_default_slower_than_nccl_is_turned_off() -> None:
    # The launcher's default path loses to NCCL (the seed's TP4 case): routing to NCCL saves.
    plain = {"nccl": {"median": flat(8.0)}, "pcie_ipc": {"median": flat(12.0)}}
    fused = {"nccl": {"median": flat(10.0)}, "pcie_ipc+rmsnorm": {"median": flat(14.0)}}
    nccl_instead = Candidate(Knobs(config={"limit": 0}), ("off",))
    read = facts(
        {**plain, "vllm_custom": {"median": flat(99.0)}},
        {**fused, "trtllm_fused_oneshot_vllm": untaxed(flat(99.0))},
    )
    choice = plan(read, [nccl_instead])
    assert choice.candidate == nccl_instead
    assert choice.worst.total.plan_us < choice.worst.total.default_us


def test_a_pattern_left_out_keeps_its_default_paths() -> None:
    read = facts(
        {**BASE_PLAIN, "vllm_custom": {"median": flat(3.0)}},
        {**BASE_FUSED, "trtllm_fused_oneshot_vllm": untaxed(flat(4.0))},
        fixed=frozenset({FUSED}),
    )
    choice = plan(read, [fast(16)])
    assert choice.candidate == NO_KNOBS
    assert "a pattern left out (--pattern)" in choice.rejected[0][1]


# -- the constraint, checked size by size against an independent reading of the same prices ------

medians = st.lists(st.floats(min_value=1.0, max_value=50.0), min_size=len(SIZES), max_size=len(SIZES))
holes = st.lists(st.booleans(), min_size=len(SIZES), max_size=len(SIZES))


@st.composite
def price_tables(draw: st.DrawFn) -> ProfileFacts:
    def spec(measured_everywhere: bool = False) -> dict:
        values = draw(medians)
        if not measured_everywhere:
            values = [None if gap else v for v, gap in zip(values, draw(holes), strict=True)]
        return {"median": values, "ci": draw(st.floats(min_value=0.0, max_value=0.05))}

    plain = {"nccl": spec(True), "pcie_ipc": spec(draw(st.booleans())), "vllm_custom": spec()}
    fused = {
        "nccl": spec(True),
        "pcie_ipc+rmsnorm": spec(draw(st.booleans())),
        "trtllm_fused_oneshot_vllm": spec(),
    }
    return facts(plain, fused)


workloads = st.dictionaries(
    st.sampled_from([1, 2, 3, 8, 16, 40, 64, 512, 4096]), st.floats(0.01, 1.0), min_size=1
).map(lambda weights: Workload.from_weights("drawn", weights))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    read=price_tables(),
    limits=st.lists(st.integers(0, 8192), max_size=6),
    workload=workloads,
    default_limit=st.one_of(st.none(), st.integers(0, 8192)),
)
def test_the_chosen_plans_step_is_nowhere_dearer_than_the_defaults(
    read: ProfileFacts, limits: list[int], workload: Workload, default_limit: int | None
) -> None:
    """Principle 1 per step: at every size the constraint checks, and at whole token counts between
    them (prices are linear in log(size) in between), the chosen plan's whole step is at most the
    default's within its noise; no unmeasured default path is changed; the total never rises."""
    # The user's own knob (when drawn) moves the launcher's default: the plan is priced against that.
    user = NOTHING if default_limit is None else Knobs(config={"default_limit": default_limit})
    choice = plan(read, [fast(n) for n in limits], workload=workload, user=user)
    variant = choice.worst
    checked = step_sizes(variant.plan, variant.default, variant.pricing)
    assert not isinstance(checked, Problem), checked.why
    between = [*range(1, 65), *range(65, SIZES[-1] // ROW + 1, 37)]
    for nbytes in sorted({*checked, *(tokens * ROW for tokens in between)}):
        check = step_check(nbytes, variant.plan, variant.default, variant.pricing)
        assert check.why is None, check.why
        assert check.plan_us <= check.limit_us + 1e-9, (nbytes, check.plan_us, check.limit_us)
    assert variant.total.plan_us is None or variant.total.plan_us <= variant.total.default_us + 1e-9
    if choice.candidate != NO_KNOBS:
        assert variant.total.plan_us < variant.total.default_us


@settings(max_examples=60, deadline=None)
# Limits from 1 token: a candidate with limit 0 routes nothing to "vllm_custom" but sends every size to
# NCCL, which does save where the drawn default is slower than NCCL (test_a_default_slower_than_nccl_is_turned_off).
@given(read=price_tables(), limits=st.lists(st.integers(1, 8192), min_size=1, max_size=4))
def test_nothing_that_saves_means_no_knobs(read: ProfileFacts, limits: list[int]) -> None:
    # Make "vllm_custom" dearer than everything at every size: no candidate that routes to it can save.
    slow = {PLAIN: table(PLAIN, {**_specs(read, PLAIN), "vllm_custom": {"median": flat(1000.0)}})}
    slow[FUSED] = table(FUSED, {**_specs(read, FUSED), "trtllm_fused_oneshot_vllm": untaxed(flat(1000.0))})
    read = ProfileFacts(slow, 7168, 2, (9, 0), (), group_class="nvswitch", served_hidden=7168)
    assert plan(read, [fast(n) for n in limits]).candidate == NO_KNOBS


def _specs(read: ProfileFacts, pattern: str) -> dict:
    """The non-"vllm_custom" backends of a drawn reading, as specs again (their medians and statuses)."""
    out = {}
    current = read.tables[pattern]
    for name in ("nccl", "pcie_ipc" if pattern == PLAIN else "pcie_ipc+rmsnorm"):
        values = [current.latency(name, rung, "isolated") for rung in range(len(SIZES))]
        out[name] = {"median": [None if v is None else v.median for v in values]}
    return out


def test_a_plan_dearer_than_the_default_on_one_node_variant_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A profile that leaves the capability open is planned on every variant and scored by its worst.
    Here the default runs a slow path on SM 9.0 only, and the candidate's path is 5% dearer than NCCL
    (within NCCL's 10% CI, so the constraint passes): it wins on the worst variant, but its own
    estimate on the others would be above their default's. It is refused, saying where."""

    def routes(knobset: Knobs, ctx: route_models.Context) -> dict:
        limit = 16 * ctx.row_bytes + 1
        if "limit" in knobset.config:
            return {PLAIN: up_to(limit, "vllm_custom"), FUSED: up_to(limit, "vllm_custom")}
        default = "pcie_ipc" if ctx.capability == (9, 0) else None
        return {PLAIN: up_to(limit, default), FUSED: up_to(limit, default)}

    monkeypatch.setitem(route_models.ROUTERS, "trtllm", routes)
    read = facts(
        {
            "nccl": {"median": flat(10.0), "ci": 0.1},
            "vllm_custom": {"median": flat(10.5)},
            "pcie_ipc": {"median": flat(50.0)},
        },
        {
            "nccl": {"median": flat(10.0), "ci": 0.1},
            "vllm_custom+rmsnorm": {"median": flat(10.5)},
            "pcie_ipc+rmsnorm": {"median": flat(50.0)},
        },
    )
    read = dataclasses.replace(read, capability=None)
    choice = plan(read, [fast(16)])
    assert choice.candidate == NO_KNOBS
    ((refused, why),) = choice.rejected
    assert refused == fast(16)
    assert why == "its estimate is above the default's on nvswitch SM 10.0: 215.3 against 210.0 us per step"
