"""The decode-step benchmark's pure parts: routing a size to a backend per site, the cases and the mixed
sequence, the planner's estimate for exactly those steps, and the measured saving judged against it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _decode_cases import (
    FUSED,
    Case,
    Estimate,
    Ratio,
    RoutesError,
    case_estimates,
    estimate,
    judge,
    make_cases,
    mixed_schedule,
    parse_routes,
    prior_messages,
    ratio_to_default,
    spans_routing,
    step_names,
)
from _decode_setup import from_planner, from_routes
from decode_step import enforce_safety
from hypothesis import given
from hypothesis import strategies as st
from price_tables import ROW, SIZES, flat, table
from priced_profiles import TOKENS, scaled, write_priced_profile

from topo_gate.launchers.plan.costmodel import Pricing, Side, Step, price_at
from topo_gate.trials.safety import MEASUREMENT_ENV, SAFETY_ENV

FUSED_ONESHOT = "trtllm_fused_oneshot_sglang"
PREFILL = ROW * 2048


def test_a_route_sends_each_size_to_the_first_span_that_holds_it() -> None:
    routing = spans_routing([(8, "gloo_ring+rmsnorm"), (64, "gloo"), (None, "nccl")])
    assert [routing.name_at(t) for t in (1, 8, 9, 64, 65, 4096)] == [
        "gloo_ring+rmsnorm", "gloo_ring+rmsnorm", "gloo", "gloo", "nccl", "nccl",
    ]  # fmt: skip
    assert routing.words == "<= 8 tok gloo_ring+rmsnorm, <= 64 tok gloo, nccl above"


@given(st.lists(st.integers(1, 4096), min_size=0, max_size=5, unique=True), st.integers(1, 5000))
def test_routing_matches_the_inclusive_limits(limits: list[int], tokens: int) -> None:
    limits.sort()
    spans = [(limit, f"b{limit}") for limit in limits] + [(None, "last")]
    expected = next((f"b{limit}" for limit in limits if tokens <= limit), "last")
    assert spans_routing(spans).name_at(tokens) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "not JSON"),
        ('{"default": {}}', '{"default": {...}, "plan": {...}}'),
        ('{"default": {}, "plan": {}, "other": {}}', "unknown configuration(s) ['other']"),
        ('{"default": {"allreduce": []}, "plan": {}}', '--routes default: expected {"allreduce_rmsnorm"'),
        ('{"default": {"allreduce_rmsnorm": [[8, "gloo"]]}, "plan": {}}', "must end with [null, NAME]"),
        (
            '{"default": {"allreduce_rmsnorm": [[8, "a"], [4, "b"], [null, "c"]]}, "plan": {}}',
            "strictly ascending",
        ),
        ('{"default": {"allreduce_rmsnorm": [[0, "a"], [null, "c"]]}, "plan": {}}', "positive integers"),
        (
            '{"default": {"allreduce_rmsnorm": [[null]]}, "plan": {}}',
            "each span is [max_tokens | null, name]",
        ),
    ],
)
def test_unusable_routes_are_one_line_naming_the_problem(text: str, words: str) -> None:
    with pytest.raises(RoutesError, match=None) as raised:
        parse_routes(text)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_routes_for_default_plan_and_nccl() -> None:
    one = '{"allreduce_rmsnorm": [[null, "gloo"]]}'
    routings = parse_routes(f'{{"default": {one}, "plan": {one}, "nccl": {one}}}')
    assert list(routings) == ["default", "plan", "nccl"]
    assert routings["plan"].name_at(7) == "gloo"


def test_the_mixed_sequence_is_one_prefill_chunk_then_decode_steps() -> None:
    assert mixed_schedule(2048, 32, 3) == (2048, 32, 32, 32)
    cases = make_cases((1, 8), prefill=2048, batch=32, decodes=2)
    assert [(c.label, c.steps, c.mixed) for c in cases] == [
        ("1", (1,), False), ("8", (8,), False), ("mixed 2048+2x32", (2048, 32, 32), True),
    ]  # fmt: skip
    for bad in ((0, 1, 1), (1, 0, 1), (1, 1, 0)):
        with pytest.raises(ValueError):
            mixed_schedule(*bad)
    with pytest.raises(ValueError):
        make_cases((1, 1), prefill=2, batch=1, decodes=1)


def test_each_step_follows_the_last_message_of_its_own_buffer_in_the_loop() -> None:
    steps = (2048, 1, 1)
    same = (FUSED_ONESHOT, "trtllm_oneshot_sglang+rmsnorm", FUSED_ONESHOT)  # one SGLang workspace
    assert prior_messages(same, steps, ROW) == (ROW, PREFILL, ROW)
    # The chunk on NCCL leaves nothing in the Lamport buffer: each decode step follows a decode step.
    assert prior_messages(("nccl", FUSED_ONESHOT, FUSED_ONESHOT), steps, ROW) == (None, ROW, ROW)
    assert prior_messages((FUSED_ONESHOT,), (8,), ROW) == (None,)


def _pricing(transition: dict[int, list[float]] | None = None) -> Pricing:
    spec = {"median": flat(4.0)}
    if transition is not None:
        spec["transition"] = transition
    fused = table(FUSED, {"nccl": {"median": flat(10.0)}, FUSED_ONESHOT: spec})
    return Pricing({FUSED: fused}, Step(), ROW)


def test_a_steady_step_is_its_sites_at_the_paths_median_with_no_transition() -> None:
    pricing = _pricing({PREFILL: flat(30.0)})
    assert estimate(pricing, (FUSED_ONESHOT,), (1,), sites=4, pessimistic=True) == Estimate(
        16.0, 0.0, "isolated"
    )


def test_the_first_decode_step_after_the_chunk_pays_the_transition_once() -> None:
    pricing = _pricing({PREFILL: flat(30.0)})
    steps = (2048, 1, 1)
    lamport = estimate(pricing, (FUSED_ONESHOT,) * 3, steps, sites=4, pessimistic=False)
    assert (lamport.us, lamport.transition_us) == (3 * 4 * 4.0 + 30.0, 30.0)
    on_nccl = estimate(pricing, ("nccl", FUSED_ONESHOT, FUSED_ONESHOT), steps, sites=4, pessimistic=False)
    assert (on_nccl.us, on_nccl.transition_us) == (4 * 10.0 + 2 * 4 * 4.0, 0.0)


def test_an_unmeasured_transition_prices_a_changed_path_at_no_bound_and_the_default_at_the_lower() -> None:
    after_1024 = {ROW * 1024: flat(20.0)}
    steps, names = (2048, 1), (FUSED_ONESHOT, FUSED_ONESHOT)
    optimistic = estimate(_pricing(after_1024), names, steps, sites=2, pessimistic=False)
    assert optimistic.us == 2 * 2 * 4.0 + 20.0
    pessimistic = estimate(_pricing(after_1024), names, steps, sites=2, pessimistic=True)
    assert pessimistic.us is None and "not measured" in (pessimistic.reason or "")


def test_sizes_beyond_the_table_have_no_estimate() -> None:
    beyond = SIZES[-1] // ROW * 2
    priced = estimate(_pricing(), ("nccl",), (beyond,), sites=2, pessimistic=False)
    assert priced.us is None and "beyond the largest measured size" in (priced.reason or "")


def test_a_configuration_on_the_defaults_kernels_costs_exactly_the_default() -> None:
    pricing = _pricing({PREFILL: flat(30.0)})
    steps = (2048, 1)
    names = {
        "default": (FUSED_ONESHOT, FUSED_ONESHOT),
        "plan": ("nccl", FUSED_ONESHOT),
        "nccl": ("nccl", "nccl"),
    }
    priced = case_estimates(pricing, {**names, "same": names["default"]}, steps, sites=2)
    assert priced["same"] is priced["default"]
    assert priced["default"].us == 2 * 2 * 4.0 + 30.0
    assert priced["plan"].us == 2 * 10.0 + 2 * 4.0 and priced["nccl"].us == 4 * 10.0


def test_the_ratio_is_the_others_median_over_the_defaults_with_a_paired_ci() -> None:
    default = [100.0 + (i % 5) for i in range(15)]
    plan = [0.8 * value for value in default]
    ratio = ratio_to_default(default, plan, seed="x")
    assert (
        ratio.value == pytest.approx(0.8)
        and ratio.low == pytest.approx(0.8)
        and ratio.high == pytest.approx(0.8)
    )
    assert ratio_to_default(default, plan, seed="x") == ratio
    noisy = ratio_to_default(default, list(reversed(default)), seed="y")
    assert noisy.low < 1.0 < noisy.high


DEFAULT, PLAN = Estimate(100.0), Estimate(80.0)


def _judge(ratio: Ratio, *, same_path: bool = False, default: Estimate = DEFAULT, plan: Estimate = PLAN):
    return judge(default, plan, same_path=same_path, default_median_us=1000.0, ratio=ratio)


def test_a_measured_saving_within_30_percent_of_the_estimate() -> None:
    verdict = _judge(Ratio(0.985, 0.98, 0.99))  # 15 us measured, 20 estimated
    assert verdict.within is True and verdict.faster and not verdict.slower
    assert verdict.measured_saving_us == pytest.approx((15.0, 10.0, 20.0))
    assert verdict.words == "within 30% of the estimate"


def test_a_measured_saving_far_from_the_estimate_says_by_how_much() -> None:
    verdict = _judge(Ratio(0.99, 0.985, 0.995))
    assert verdict.within is False and verdict.words == "-50% off the estimate"


def test_an_estimated_saving_over_the_margin_that_does_not_show() -> None:
    verdict = _judge(Ratio(1.0, 0.99, 1.01))
    assert not verdict.faster and "no significant saving where 20% was estimated" in verdict.words


def test_a_plan_slower_beyond_noise_is_said_first() -> None:
    verdict = _judge(Ratio(1.02, 1.01, 1.03))
    assert verdict.slower and verdict.words.startswith("plan slower beyond noise")


def test_the_same_path_compares_with_noise_not_with_the_estimate() -> None:
    quiet = _judge(Ratio(1.0, 0.99, 1.01), same_path=True)
    assert (quiet.estimated_saving_us, quiet.within, quiet.words) == (0.0, None, "same path, within noise")
    drift = _judge(Ratio(0.9, 0.88, 0.92), same_path=True)
    assert drift.faster and "drift or order" in drift.words


def test_no_estimate_is_said_with_its_reason() -> None:
    verdict = _judge(Ratio(0.9, 0.88, 0.92), plan=Estimate(None, reason="x not measured"))
    assert verdict.within is None and verdict.words == "no estimate (x not measured)"


@pytest.fixture(scope="module")
def priced_profile_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SGLang's default custom all-reduce v2 measured slower than NCCL above 64 tokens (at hidden 7168):
    the planner lowers v2's size limit (the plan differs from the default at 128 tokens of a 70B)."""
    slow_above_64 = [4.0 if t <= 64 else 20 + 0.1 * t for t in TOKENS]
    tables = {
        "allreduce": {"nccl": scaled(8, 0.04), "custom_v2_sglang": slow_above_64},
        "allreduce_rmsnorm": {
            "nccl": scaled(10, 0.05),
            "custom_v2_sglang+rmsnorm": [x + 2 for x in slow_above_64],
        },
    }
    path = tmp_path_factory.mktemp("profile") / "priced.yaml"
    # v2's transitions measured as nothing: the plan and the default then see the same buffer history
    # at the same price (a bounded transition would charge the plan its bound and the default its
    # lower one, and this test is about the route, not that asymmetry).
    return write_priced_profile(path, tables, context=True, transitions={"custom_v2_sglang": 0.0})


def test_the_planners_sides_are_read_at_the_norm_site_by_tokens(priced_profile_path: Path) -> None:
    launcher = from_planner(
        "sglang", str(priced_profile_path), tp=2, model="llama-3.1-70b", hidden=None, user_env={},
        workload=None, baseline="nccl",
    )  # fmt: skip
    assert launcher.skipped is None and launcher.hidden == 8192 and launcher.layers == 80
    assert launcher.knobs == "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB=1792"
    case = Case("128", (128,))
    names = {config: step_names(routing, case) for config, routing in launcher.routings.items()}
    assert names == {"default": ("custom_v2_sglang+rmsnorm",), "plan": ("nccl",), "nccl": ("nccl",)}
    assert {c: step_names(r, Case("1", (1,)))[0] for c, r in launcher.routings.items()}["plan"] == (
        "custom_v2_sglang+rmsnorm"
    )
    assert launcher.pricing is not None and launcher.totals is not None
    priced = case_estimates(launcher.pricing, names, case.steps, sites=160)
    assert priced["plan"].us is not None and priced["default"].us is not None
    assert priced["plan"].us < priced["default"].us and priced["default"].source == "in context"
    # The same price the planner's cost model gives one call there, times the sites.
    nbytes = 128 * launcher.pricing.row_bytes
    one = price_at(FUSED, "nccl", nbytes, Side({}, "nccl", {}), launcher.pricing, pessimistic=True)
    assert not isinstance(one, str) and priced["plan"].us == pytest.approx(160 * one.median)


def test_a_planner_fallback_is_not_compared(tmp_path: Path) -> None:
    launcher = from_planner(
        "vllm", str(tmp_path / "missing.yaml"), tp=2, model="qwen3-32b", hidden=None, user_env={},
        workload=None, baseline=None,
    )  # fmt: skip
    assert launcher.skipped and launcher.routings == {}


def test_routes_are_priced_from_a_profiles_tables_in_context_where_timed(priced_profile_path: Path) -> None:
    routings = parse_routes(
        '{"default": {"allreduce_rmsnorm": [[null, "custom_v2_sglang+rmsnorm"]]},'
        ' "plan": {"allreduce_rmsnorm": [[1, "custom_v2_sglang+rmsnorm"], [null, "nccl"]]}}'
    )
    cases = make_cases((1, 512), prefill=2048, batch=1, decodes=1)
    launcher = from_routes(
        routings, hidden=7168, profile=str(priced_profile_path), tp=2, cases=cases, baseline="nccl",
        group_class=None,
    )  # fmt: skip
    assert set(launcher.routings) == {"default", "plan", "nccl"} and launcher.pricing is not None
    names = {c: step_names(r, cases[1]) for c, r in launcher.routings.items()}
    priced = case_estimates(launcher.pricing, names, cases[1].steps, sites=2)
    assert priced["default"].source == "in context"
    assert priced["plan"].us == pytest.approx(2 * (10 + 0.05 * 511), rel=0.01)


def test_the_safety_variables_are_set_and_a_callers_other_value_refused() -> None:
    environ: dict[str, str] = {"NCCL_GRAPH_MIXING_SUPPORT": "1"}
    assert enforce_safety(environ, allow_multicast=False) is None
    assert environ == {**SAFETY_ENV, **MEASUREMENT_ENV, "NCCL_GRAPH_MIXING_SUPPORT": "1"}
    overridden = {"NCCL_NVLS_ENABLE": "1"}
    refusal = enforce_safety(overridden, allow_multicast=False)
    assert refusal is not None and "NCCL_NVLS_ENABLE=1" in refusal and overridden == {"NCCL_NVLS_ENABLE": "1"}
    assert enforce_safety(overridden, allow_multicast=True) is None and overridden == {
        "NCCL_NVLS_ENABLE": "1"
    }
