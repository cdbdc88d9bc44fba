"""Every flag, env var and config key topo-gate can emit exists in the pinned launcher release.

The manifests were extracted from the releases' own source (scripts/extract_knobs.py); plans are drawn
from the case files, the forced-NCCL plans, and hypothesis-generated ladders that reach every branch.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from launcher_profiles import FINGERPRINT, build_profile

from topo_gate.launchers import PINNED, PLANNERS, LaunchPlan, nccl_plan
from topo_gate.launchers.knobs import manifest
from topo_gate.launchers.merge import split_flags
from topo_gate.profile import BACKENDS

FAST = [b for b in BACKENDS if b not in ("nccl", "gloo", "gloo_ring")]


#: NCCL's own env (read by NCCL, not by the launcher) that plans may set for baseline parity.
NCCL_ENV = {"NCCL_NVLS_ENABLE"}


def assert_knobs_exist(plan: LaunchPlan) -> None:
    known = manifest(plan.launcher)
    assert known["version"] == PINNED[plan.launcher] == plan.launcher_version_pinned
    for flag, value in split_flags(plan.args, plan.launcher):
        assert flag in known["flags"], f"{flag} is not a {plan.launcher} {known['version']} flag"
        spec = known["flags"][flag]
        assert spec["takes_value"] == (value is not None)
        if spec["choices"] is not None:
            assert value in spec["choices"]
        if flag == "--compilation-config":
            for key in json.loads(value)["pass_config"]:
                assert f"compilation_config.pass_config.{key}" in known["config_keys"]
    for name, value in plan.env.items():
        if name in NCCL_ENV:
            continue
        assert name in known["env"], f"{name} is not read by {plan.launcher} {known['version']}"
        choices = known["env"][name].get("choices")
        assert choices is None or value in choices
        assert value != "auto", "never leave a FlashInfer backend on auto (it can pick multicast MNNVL)"
    for key, value in plan.config.items():
        assert key in known["config_keys"] and value in known["config_keys"][key]["choices"]
    if plan.config:
        assert "--extra_llm_api_options" in known["flags"]  # how exec hands the YAML to trtllm-serve


@pytest.mark.parametrize("launcher", list(PLANNERS))
def test_forced_nccl_knobs_exist(launcher: str) -> None:
    assert_knobs_exist(nccl_plan(launcher, "test"))


@st.composite
def ladders(draw: st.DrawFn) -> list[list]:
    cuts = sorted(draw(st.sets(st.integers(1, 1 << 27), min_size=0, max_size=4)))
    rungs = []
    for cut in cuts:
        backend = draw(st.sampled_from(FAST))
        others = [name for name in FAST if name not in (backend, "nccl")]
        # Schema v1.1 alternatives (none on an nccl rung): other backends measured faster than NCCL there.
        alternatives = (
            [] if backend == "nccl" else draw(st.lists(st.sampled_from(others), unique=True, max_size=2))
        )
        rungs.append([cut, backend, alternatives])
    return [*rungs, [None, "nccl"]]


@settings(max_examples=60, deadline=None)
@given(
    allreduce=ladders(),
    fused=ladders(),
    tp=st.sampled_from([2, 4, 8]),
    sm=st.sampled_from(["9.0", "10.0", "12.0", None]),
    launcher=st.sampled_from(list(PLANNERS)),
)
def test_generated_plans_emit_only_known_knobs(allreduce, fused, tp, sm, launcher) -> None:
    profile = build_profile({"allreduce": allreduce, "allreduce_rmsnorm": fused}, tp=tp, sm=sm)
    plan = PLANNERS[launcher](profile, tp=tp, fingerprint=FINGERPRINT)
    assert not plan.fallback
    assert_knobs_exist(plan)
