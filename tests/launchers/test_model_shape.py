"""A served-model shape no model has falls back with the reason, never raises and is never planned
as if it were a model (``common.shape_problem``): ``layers`` and ``hidden`` whole numbers from 1 to
their caps, ``tp`` a positive integer; the vLLM plugin passes its ``config.json`` on as read. And
the general invariant, as a property over generated price tables, node variants and shapes: no plan
is emitted whose own estimate is above the default's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from price_tables import SIZES, table

from topo_gate.launchers import vllm
from topo_gate.launchers.command.parse import read_knobs
from topo_gate.launchers.plan.choice import choose
from topo_gate.launchers.plan.costmodel import Step
from topo_gate.launchers.plan.explain_words import estimate_line
from topo_gate.launchers.plan.request import MAX_HIDDEN, MAX_LAYERS, PlanRequest, ProfileFacts
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Knobs
from topo_gate.launchers.sglang import sglang_plan
from topo_gate.launchers.trtllm import trtllm_plan
from topo_gate.launchers.vllm import vllm_plan
from topo_gate.plugins import Served, plan_in_launcher
from topo_gate.plugins import vllm as vllm_plugin
from topo_gate.profile.reader import FINGERPRINT_ENV

PCIE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml"
FINGERPRINT = "sha256:" + "5c" * 32
PLANNERS = (sglang_plan, vllm_plan, trtllm_plan)


def _plan(planner: Any = vllm_plan, **shape: Any) -> Any:
    return planner(PlanRequest(PCIE, **{"tp": 2, "model": "qwen3-32b", "fingerprint": FINGERPRINT, **shape}))


@pytest.mark.parametrize("planner", PLANNERS, ids=lambda planner: planner.__name__)
@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ({"layers": -3}, "layers must be a whole number of at least 1, got -3: no model has that shape"),
        ({"layers": 0}, "layers must be a whole number of at least 1, got 0: no model has that shape"),
        ({"layers": 2.5}, "layers must be a whole number of at least 1, got 2.5: no model has that shape"),
        ({"layers": True}, "layers must be a whole number of at least 1, got True: no model has that shape"),
        ({"layers": MAX_LAYERS + 1}, "layers 4097 is more than any model has (at most 4096 are planned for)"),
        ({"hidden": 0}, "hidden must be a whole number of at least 1, got 0: no model has that shape"),
        (
            {"hidden": -5120},
            "hidden must be a whole number of at least 1, got -5120: no model has that shape",
        ),
        (
            {"hidden": 5120.5},
            "hidden must be a whole number of at least 1, got 5120.5: no model has that shape",
        ),
        ({"hidden": True}, "hidden must be a whole number of at least 1, got True: no model has that shape"),
        (
            {"hidden": "5120"},
            "hidden must be a whole number of at least 1, got '5120': no model has that shape",
        ),
        (
            {"hidden": MAX_HIDDEN + 1},
            "hidden 1048577 is more than any model has (at most 1048576 are planned for)",
        ),
        ({"tp": 0}, "tp must be a positive integer, got 0"),
        ({"tp": -2}, "tp must be a positive integer, got -2"),
        ({"tp": True}, "tp must be a positive integer, got True"),
        ({"tp": "2"}, "tp must be a positive integer, got '2'"),
    ],
)
def test_a_shape_no_model_has_falls_back_with_the_reason(planner: Any, shape: dict, reason: str) -> None:
    plan = _plan(planner, **shape)
    assert plan.fallback and plan.args == () and plan.env == {} and plan.estimate == ""
    assert plan.reason == reason


@pytest.mark.parametrize(
    "shape", [{"layers": 1}, {"layers": MAX_LAYERS}, {"hidden": 1}, {"hidden": MAX_HIDDEN}, {"tp": 2}]
)
def test_a_shape_at_its_bounds_is_planned(shape: dict) -> None:
    plan = _plan(**shape)
    assert not plan.fallback, plan.reason


def _engine_args(layers: object) -> SimpleNamespace:
    """vLLM's ``EngineArgs`` as far as ``_model_shape`` reads it: a model config whose
    ``config.json`` says ``num_hidden_layers: layers``."""
    config = SimpleNamespace(
        get_hidden_size=lambda: 5120,
        hf_text_config=SimpleNamespace(num_hidden_layers=layers),
        architectures=["Qwen3ForCausalLM"],
    )
    return SimpleNamespace(create_model_config=lambda: config)


@pytest.mark.parametrize(("layers", "fallback"), [(-3, True), (2.5, True), (0, True), (64, False)])
def test_the_vllm_plugin_falls_back_on_a_config_with_no_model_s_depth(
    monkeypatch: pytest.MonkeyPatch, layers: object, fallback: bool
) -> None:
    monkeypatch.setenv(FINGERPRINT_ENV, FINGERPRINT)
    hidden, read, architecture = vllm_plugin._model_shape(_engine_args(layers))
    assert read == layers  # as read: not made whole, so 2.5 is not planned as 2
    plan, _ = plan_in_launcher(
        "vllm", served=lambda: Served(2, hidden, read, architecture, ()), profile=str(PCIE)
    )
    assert plan.fallback is fallback, plan.reason
    if fallback:
        assert plan.reason.startswith(f"layers must be a whole number of at least 1, got {layers!r}")


# -- the property: no plan above the default's estimate ------------------------------------------------

PLAIN, FUSED = "allreduce", "allreduce_rmsnorm"
#: What vLLM's routes send messages to on the nodes below: its custom all-reduce, FlashInfer's
#: TensorRT-LLM kernels (plain and fused), symmetric memory, PCIe IPC, NCCL.
PLAIN_KERNELS = (
    "vllm_custom",
    "trtllm_oneshot_vllm",
    "trtllm_twoshot_vllm",
    "symm_mem_twoshot_vllm",
    "pcie_ipc",
)
FUSED_KERNELS = ("trtllm_fused_oneshot_vllm", "trtllm_fused_twoshot_vllm") + tuple(
    f"{name}+rmsnorm" for name in PLAIN_KERNELS
)
LAMPORT = frozenset({"trtllm_oneshot_vllm", "trtllm_twoshot_vllm", "trtllm_fused_oneshot_vllm",
                     "trtllm_fused_twoshot_vllm", "trtllm_oneshot_vllm+rmsnorm", "trtllm_twoshot_vllm+rmsnorm"})  # fmt: skip
#: The ladder's first rungs (1-128 tokens at hidden 7168): enough for every route change the knobs
#: make at decode sizes, and few enough that the property runs in seconds.
LADDER = SIZES[:8]
RUNGS = len(LADDER)


@st.composite
def _spec(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A backend's medians (growing with the message, from 2 to ~2000 us), sometimes unmeasured at
    the large sizes; its CI share; for a Lamport-style one, sometimes its transitions."""
    base = draw(st.floats(2.0, 40.0))
    growth = draw(st.floats(1.0, 2.0))
    measured = draw(st.integers(1, RUNGS)) if name != "nccl" else RUNGS
    medians = [round(base * growth**i, 3) if i < measured else None for i in range(RUNGS)]
    spec: dict[str, Any] = {"median": medians, "ci": draw(st.sampled_from((0.005, 0.02, 0.1)))}
    if name in LAMPORT and draw(st.booleans()):
        cost = draw(st.floats(0.0, 3000.0))
        spec["transition"] = {LADDER[-1]: [None if median is None else cost for median in medians]}
    return spec


@st.composite
def _facts(draw: st.DrawFn) -> ProfileFacts:
    plain = {"nccl": draw(_spec("nccl"))}
    fused = {"nccl": draw(_spec("nccl"))}
    for name in draw(st.sets(st.sampled_from(PLAIN_KERNELS), min_size=1)):
        plain[name] = draw(_spec(name))
    for name in draw(st.sets(st.sampled_from(FUSED_KERNELS), min_size=1)):
        fused[name] = draw(_spec(name))
    known = draw(st.booleans())  # a profile that leaves the node open is planned on every variant
    return ProfileFacts(
        {PLAIN: table(PLAIN, plain, sizes=LADDER), FUSED: table(FUSED, fused, sizes=LADDER)},
        7168,
        2,
        draw(st.sampled_from([(9, 0), (10, 0)])) if known else None,
        (),
        group_class=draw(st.sampled_from(["nvswitch", "pcie-switch"])) if known else None,
        served_hidden=draw(st.sampled_from([4096, 7168, 8192])),
        model=None,
        layers=draw(st.integers(1, 128)),
        architecture="LlamaForCausalLM",
    )


@settings(max_examples=8, deadline=None)
@given(
    facts=_facts(),
    weights=st.dictionaries(st.sampled_from([1, 2, 8, 64, 128, 2048]), st.floats(0.05, 1.0), min_size=1),
)
def test_no_plan_is_emitted_whose_own_estimate_is_above_the_default_s(
    facts: ProfileFacts, weights: dict[int, float]
) -> None:
    workload = Workload.from_weights("generated", weights)
    assert facts.layers is not None
    step = Step(facts.layers, layers_known=True, embedding_fused=True)
    choice = choose(
        "vllm",
        vllm.candidates(facts, 2, Knobs()),
        facts,
        2,
        user=read_knobs("vllm", Knobs()),
        workload=workload,
        step=step,
    )
    for variant in choice.variants:
        plan_us, default_us = variant.total.plan_us, variant.total.default_us
        if plan_us is not None and default_us is not None:
            assert plan_us <= default_us, (choice.candidate, variant.ctx)
    line = estimate_line(choice, workload)
    assert not line.startswith("est. +"), line
