"""Every flag, env var and config key topo-gate can emit exists in the pinned launcher release.

The manifests were extracted from the releases' own source (scripts/extract_knobs.py); plans are drawn
from the knob cases (each knob each launcher can emit, knob_cases.py), the ``--fallback nccl`` plans,
and hypothesis-generated price tables on nodes of every capability row and group class the route
models tell apart.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from knob_cases import CASES, LADDER, NCCL, KnobCase, fused_of

from topo_gate.launchers import PINNED, PLANNERS, LaunchPlan, plan_without_profile
from topo_gate.launchers.command.merge import split_flags
from topo_gate.launchers.knobs import manifest

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
    assert_knobs_exist(plan_without_profile(launcher, "test"))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_each_knob_case_emits_known_knobs(case: KnobCase) -> None:
    plan = case.plan()
    assert not plan.fallback and (plan.args or plan.env or plan.config), case.why
    assert_knobs_exist(plan)


#: The measured names each launcher's routes use, plain and fused (composites are added for the plain).
LAUNCHER_BACKENDS = {
    "sglang": (
        ("custom_v2_sglang", "vllm_custom", "pcie_ipc", "trtllm_oneshot_sglang", "trtllm_twoshot_sglang"),
        ("trtllm_fused_oneshot_sglang", "trtllm_fused_twoshot_sglang"),
    ),
    "vllm": (
        ("vllm_custom", "trtllm_oneshot_vllm", "trtllm_twoshot_vllm"),
        ("trtllm_fused_oneshot_vllm", "trtllm_fused_twoshot_vllm"),
    ),
    "trtllm": (("trtllm_oneshot", "trtllm_twoshot"), ("trtllm_fused_oneshot", "trtllm_fused_twoshot")),
}
FACTORS = st.sampled_from([None, 0.4, 0.8, 1.0, 1.5])


@st.composite
def curve(draw: st.DrawFn) -> list[float] | None:
    """NCCL's curve times one factor up to a drawn token count and another above; None: not timed."""
    small, large = draw(FACTORS), draw(FACTORS)
    if small is None or large is None:
        return None
    cut = draw(st.sampled_from(LADDER))
    return [round(v * (small if t <= cut else large), 6) for v, t in zip(NCCL, LADDER, strict=True)]


@st.composite
def priced_nodes(draw: st.DrawFn) -> KnobCase:
    launcher = draw(st.sampled_from(sorted(PLANNERS)))
    plain_names, fused_names = LAUNCHER_BACKENDS[launcher]
    plain: dict = {"nccl": NCCL}
    fused: dict = {"nccl": fused_of(NCCL)}
    for name in plain_names:
        drawn = draw(curve())
        if drawn is not None:
            plain[name] = drawn
            fused[name + "+rmsnorm"] = fused_of(drawn)
    for name in fused_names:
        drawn = draw(curve())
        if drawn is not None:
            fused[name] = drawn
    user_env = draw(
        st.sampled_from(
            {
                "sglang": [{}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}],
                "vllm": [{}, {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}],
                "trtllm": [{}, {"TLLM_DISABLE_ALLREDUCE_AUTOTUNE": "1"}],
            }[launcher]
        )
    )
    return KnobCase(
        "drawn",
        launcher,
        {"allreduce": plain, "allreduce_rmsnorm": fused},
        model=draw(st.sampled_from(["llama-3.1-70b", "deepseek-v3", "qwen3-32b"])),
        user_env=user_env,
        tp=draw(st.sampled_from([2, 4])),
        sm=draw(st.sampled_from(["9.0", "10.0", "12.0"])),
        group_class=draw(st.sampled_from(["nvswitch", "nvlink-mesh", "pcie-switch"])),
    )


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=priced_nodes())
def test_generated_plans_emit_only_known_knobs(case: KnobCase) -> None:
    plan = case.plan()
    assert not plan.fallback, plan.reason
    assert_knobs_exist(plan)
