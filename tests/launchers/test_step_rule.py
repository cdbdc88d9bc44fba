"""The per-step rule and transitions as the buffers hold them, on hand-made tables where the old
per-call-pattern rule gives a visibly different answer, and on the bundled 2x H200 price table.

Routes are written by hand (``((high_exclusive, backend), ...)``, backend None: NCCL); tables come
from ``price_tables`` (the real profile dataclasses); the step is 10 known layers: 1 plain + 20
norm sites.
"""

from __future__ import annotations

import pytest
from h200_after_2048 import bundled_evidence, profile_of, with_after_2048
from price_tables import FUSED, NCCL_EVERYWHERE, PLAIN, ROW, SIZES, STEP, flat, table

from topo_gate.launchers import PlanRequest, sglang_plan, vllm_plan
from topo_gate.launchers.plan.costmodel import Pricing, Side, Step, price_at, problems, step_check
from topo_gate.launchers.plan.explain import explanation
from topo_gate.launchers.plan.pricing import NCCL
from topo_gate.launchers.plan.workload import Workload, lookup_workload

LEGACY = {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}  # SGLang's default made a measured path
FUSION = ("--flashinfer-allreduce-fusion-backend", "trtllm")


def tables(plain: dict, fused: dict | None = None) -> dict:
    fused = fused or {"nccl": {"median": flat(10.0)}}
    return {PLAIN: table(PLAIN, plain), FUSED: table(FUSED, fused)}


def side(plain, fused=NCCL_EVERYWHERE, *, workload: Workload) -> Side:
    return Side.of({PLAIN: plain, FUSED: fused}, NCCL, ROW, workload, STEP)


def upto(tokens: int, name: str) -> tuple:
    return ((tokens * ROW + 1, name), (None, None))


def pricing(tabs: dict) -> Pricing:
    return Pricing(tabs, STEP, ROW)


# -- the rule is per step -------------------------------------------------------------------------


def test_a_site_a_hair_slower_inside_a_faster_step_is_admitted() -> None:
    """The plain site is 0.3 us slower than the default's CI high, the 20 norm sites save 2 us each:
    the step is faster, so the plan stands (the per-pattern rule refused it)."""
    workload = Workload.from_weights("one", {1: 1.0})
    tabs = tables(
        {"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(8.4)}},
        {"nccl": {"median": flat(10.0)}, "vllm_custom+rmsnorm": {"median": flat(8.0)}},
    )
    plan = side(upto(64, "vllm_custom"), upto(64, "vllm_custom"), workload=workload)
    default = side(NCCL_EVERYWHERE, workload=workload)
    assert problems(plan, default, pricing(tabs)) == []
    check = step_check(ROW, plan, default, pricing(tabs))
    assert check.per_call(PLAIN, 1) > 8.0 * 1.01  # the plain site alone is slower than the default's CI
    assert check.plan_us == pytest.approx(8.4 + 20 * 8.0) and check.default_us == pytest.approx(8.0 + 200.0)


def test_a_step_slower_by_more_than_the_defaults_noise_is_refused_at_that_size() -> None:
    workload = Workload.from_weights("one", {1: 1.0})
    tabs = tables(
        {"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(12.0)}},
        {"nccl": {"median": flat(10.0)}, "vllm_custom+rmsnorm": {"median": flat(10.1)}},
    )
    plan = side(upto(64, "vllm_custom"), upto(64, "vllm_custom"), workload=workload)
    [problem] = problems(plan, side(NCCL_EVERYWHERE, workload=workload), pricing(tabs))
    # 12 + 20 x 10.1 = 214 against 8 + 200 = 208 (CI up to 8.08 + 202 = 210.08).
    assert (
        problem.why
        == "step slower at 1 token (14336 B): 214.0 us/step against the default's 208.0 (CI up to 210.1)"
    )


# -- (a) the priors of a buffer, renormalised by the share of steps through it --------------------


def test_a_buffers_priors_are_the_steps_that_use_it() -> None:
    """Half the steps are 8192-token prefills routed to NCCL: they never enter the Lamport buffer, so
    after a 1-token step the buffer last held the 512-token message with chance 0.25 / 0.5, not 0.25."""
    workload = Workload.from_weights("mix", {1: 0.25, 512: 0.25, 8192: 0.5})
    lamport = {"median": flat(4.0), "transition": {SIZES[-1]: flat(420.0)}}
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": lamport})
    plan = side(upto(512, "trtllm_oneshot"), workload=workload)
    price = price_at(PLAIN, "trtllm_oneshot", ROW, plan, pricing(tabs), pessimistic=True)
    assert price.transition == pytest.approx(0.5 * 420.0)  # the old rule: 0.25 x 420


# -- (c) the charge: the transition measured after the nearest earlier size at least as large -------


def test_the_charge_is_the_one_after_the_nearest_larger_measured_size() -> None:
    """Transitions after 1024 tokens (300 us), 4096 (200 us, noise) and 8192 (930 us): a route that
    sends at most 512 tokens pays the one after 1024, not the smallest of the larger ones (the old
    rule's 200) nor the one after the largest size."""
    workload = Workload.from_weights("mix", {1: 0.5, 512: 0.5})
    after = {1024 * ROW: flat(300.0), 4096 * ROW: flat(200.0), SIZES[-1]: flat(930.0)}
    tabs = tables(
        {"nccl": {"median": flat(8.0)}, "trtllm_oneshot": {"median": flat(4.0), "transition": after}}
    )
    plan = side(upto(512, "trtllm_oneshot"), workload=workload)
    price = price_at(PLAIN, "trtllm_oneshot", ROW, plan, pricing(tabs), pessimistic=True)
    assert price.transition == pytest.approx(0.5 * 300.0)


#: Half the steps one token, half 2048 tokens, for the shared-workspace cases below.
SHARED_MIX = Workload.from_weights("mix", {1: 0.5, 2048: 0.5})


def shared_workspace_tables() -> dict:
    """SGLang's plain and fused one-shot kernels (3 and 5 us), each 900 us after the largest size."""
    after = {SIZES[-1]: flat(900.0)}
    plain = {
        "nccl": {"median": flat(8.0)},
        "trtllm_oneshot_sglang": {"median": flat(3.0), "transition": after},
    }
    fused = {
        "nccl": {"median": flat(10.0)},
        "trtllm_fused_oneshot_sglang": {"median": flat(5.0), "transition": after},
    }
    return tables(plain, fused)


def test_plain_after_fused_in_a_shared_workspace_pays_the_fused_message() -> None:
    """SGLang's FlashInfer workspace serves plain and fused one-shot alike: a 2048-token step whose
    fused sites run the fused kernel (its plain site NCCL) leaves a 2048-token message there, which
    the next 1-token step's plain one-shot pays for."""
    workload, tabs = SHARED_MIX, shared_workspace_tables()
    plan = side(
        upto(1, "trtllm_oneshot_sglang"), upto(2048, "trtllm_fused_oneshot_sglang"), workload=workload
    )
    check = step_check(ROW, plan, side(NCCL_EVERYWHERE, workload=workload), pricing(tabs))
    first = check.plan[0]
    assert (first.pattern, first.pays_transition) == (PLAIN, True)
    assert first.price.transition == pytest.approx(0.5 * 900.0)
    # The norm sites of the same step see the 1-token message the plain site left: no second charge.
    assert check.plan_us == pytest.approx(3.0 + 20 * 5.0 + 0.5 * 900.0)


def test_fused_after_plain_in_a_shared_workspace_pays_the_plain_message() -> None:
    workload, tabs = SHARED_MIX, shared_workspace_tables()
    plan = side(
        upto(2048, "trtllm_oneshot_sglang"), upto(1, "trtllm_fused_oneshot_sglang"), workload=workload
    )
    price = price_at(FUSED, "trtllm_fused_oneshot_sglang", ROW, plan, pricing(tabs), pessimistic=True)
    assert price.transition == pytest.approx(0.5 * 900.0)


#: The one-shot kernel's transition cost per size: the same 420 us at every size (measured after the
#: largest message), or 420 us at 1 token only (measured after the 512-token message, nothing
#: elsewhere), where the 2..512-token range the plan adds is faster than NCCL on its own.
STRETCH_TRANSITIONS = {
    "costly-at-every-size": {SIZES[-1]: flat(420.0)},
    "costly-at-1-token-only": {512 * ROW: [420.0 if size == ROW else 0.0 for size in SIZES]},
}


@pytest.mark.parametrize("transition", STRETCH_TRANSITIONS.values(), ids=STRETCH_TRANSITIONS)
def test_stretching_a_lamport_default_is_checked_where_the_default_already_ran_it(transition) -> None:
    """The default runs one-shot at 1 token only, the plan stretches it to 512: at 1 token the same
    kernel now pays the transition after the 512-token steps (4 + 0.5 x 420 us) and the step is
    refused there, even where every size the plan newly sends to one-shot is faster than NCCL; the
    same route on both sides is the same price."""
    workload = Workload.from_weights("mix", {1: 0.5, 512: 0.5})
    lamport = {"median": flat(4.0), "transition": transition}
    tabs = tables({"nccl": {"median": flat(8.0)}, "trtllm_oneshot": lamport})
    default = side(upto(1, "trtllm_oneshot"), workload=workload)
    [problem] = problems(side(upto(512, "trtllm_oneshot"), workload=workload), default, pricing(tabs))
    assert (problem.first, problem.plan, problem.default) == (ROW, "trtllm_oneshot", "trtllm_oneshot")
    # 4 + 0.5 x 420 + 20 x 10 = 414 against the default's 4 + 200, which never held a larger message.
    assert problem.why == (
        "step slower at 1 token (14336 B): 414.0 us/step against the default's 204.0 (CI up to 204.0)"
    )
    assert problems(side(upto(1, "trtllm_oneshot"), workload=workload), default, pricing(tabs)) == []


# -- the step's sites per launcher, and the workload ------------------------------------------------


def test_vllms_embedding_all_reduce_is_a_norm_site() -> None:
    assert Step(layers=80, embedding_fused=True).sites == {PLAIN: 0, FUSED: 161}
    assert Step(layers=80).sites == {PLAIN: 1, FUSED: 160}


def test_the_serving_preset_decodes_to_512_from_tp_4() -> None:
    narrow, wide = lookup_workload("serving", 2), lookup_workload("serving", 4)
    assert narrow.steps[-3][0] == 256 and wide.steps[-3][0] == 512
    assert [t for t, _ in wide.steps[-2:]] == [2048, 8192]
    assert "assumed" in narrow.description and lookup_workload(None, 8) is wide


# -- the bundled 2x H200 price table, with and without a transition after 2048 tokens --------------


@pytest.fixture(scope="module")
def h200(tmp_path_factory) -> dict:
    from topo_gate.profile import dump_profile

    folder = tmp_path_factory.mktemp("h200")
    paths = {}
    for name, evidence in (("bundled", bundled_evidence()), ("after_2048", with_after_2048())):
        paths[name] = folder / f"{name}.yaml"
        dump_profile(profile_of(evidence), paths[name])
    return paths


def sglang_legacy(path, model: str):
    return sglang_plan(PlanRequest(path, tp=2, model=model, trust_unverified_node=True, user_env=LEGACY))


@pytest.mark.slow  # prices the bundled H200 table for several models
def test_a_transition_measured_after_2048_tokens_plans_sglangs_fusion_backend(h200) -> None:
    """Llama 3 405B's shape on the H200 table plus the SGLang FlashInfer kernels' transition after
    2048 tokens: the fusion backend wins over the legacy custom all-reduce, and no step is slower."""
    plan = sglang_legacy(h200["after_2048"], "llama-3-405b")
    assert plan.args == FUSION and not plan.env
    assert (
        plan.estimate.startswith("plan: --flashinfer-allreduce-fusion-backend trtllm: ")
        and ": est. -8." in plan.estimate
    )
    steps = explanation(plan.choice, plan.workload, "sglang").steps
    assert all(step.plan_us <= step.limit_us for step in steps if step.plan_us)
    assert all(step.saving_us > 0 for step in steps if step.changed)


@pytest.mark.slow  # prices the bundled H200 table for several models
def test_without_that_measurement_the_plan_stays_no_knobs_and_names_it(h200) -> None:
    plan = sglang_legacy(h200["bundled"], "llama-3-405b")
    assert plan.args == () and plan.estimate.startswith("no knobs")
    unlock = explanation(plan.choice, plan.workload, "sglang").unlock
    assert unlock.knobs.args == FUSION and unlock.kernel == "trtllm_oneshot_sglang"
    assert unlock.after_tokens == 2048 and unlock.at_tokens == 1
    assert unlock.bounded_by_bytes == 8192 * 14336  # only the after-8192 replay was timed
    assert unlock.saving_us > 600 and 300 < unlock.at_most_us < 400


def test_a_narrower_model_needs_the_mid_size_measurement_too(h200) -> None:
    """Qwen3-32B's shape: after 2048 tokens is measured (238.8 us at 1 token) but the 2-256-token
    decode steps before a 1-token one are bounded by it too, and together they cost more than the
    fusion saves there: no knobs, with the limit the transition would have to stay under."""
    plan = sglang_legacy(h200["after_2048"], "qwen3-32b")
    assert plan.args == ()
    unlock = explanation(plan.choice, plan.workload, "sglang").unlock
    assert unlock.bounded_by_bytes == 2048 * 14336 and unlock.at_most_us < 238.8


def test_vllms_step_on_the_bundled_table_is_all_norm_sites(h200) -> None:
    request = PlanRequest(
        h200["bundled"],
        tp=2,
        model="qwen3-32b",
        trust_unverified_node=True,
        user_env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
    )
    plan = vllm_plan(request)
    assert plan.choice.worst.pricing.step.sites == {PLAIN: 0, FUSED: 129}
    sglang = sglang_legacy(h200["bundled"], "qwen3-32b")
    assert sglang.choice.worst.pricing.step.sites == {PLAIN: 1, FUSED: 128}
