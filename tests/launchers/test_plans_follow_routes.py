"""A plan's knobs, run through the launcher's route model, send every size the launcher can send for
the served model to a backend the profile measured faster than NCCL there, or to NCCL.

Checked over generated profiles of the kinds a probe writes -- NVSwitch ladders, PCIe SM 12.0 nodes
where TP2 wins and TP4 loses, symm-mem wins, fused-only wins, v1.0 profiles without alternatives --
and over the bundled real and synthetic profiles, for all three launchers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from launcher_profiles import FINGERPRINT, build_profile

from topo_gate.launchers import PLANNERS
from topo_gate.launchers.explain import explain_profile
from topo_gate.launchers.planning import CAPABILITY_VARIANTS, GROUP_VARIANTS
from topo_gate.launchers.routes import Context, Knobs, route
from topo_gate.launchers.routes.check import measured_from_rules, violations
from topo_gate.profile.io import load_profile

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"
PCIE = REPO / "profiles" / "examples" / "synthetic-rtxpro6000-pcie-x4.yaml"

PLAIN = (
    "trtllm_oneshot",
    "trtllm_twoshot",
    "trtllm_oneshot_sglang",
    "trtllm_twoshot_sglang",
    "trtllm_oneshot_vllm",
    "trtllm_twoshot_vllm",
    "symm_mem_twoshot_vllm",
    "vllm_custom",
    "pcie_ipc",
)
FUSED = tuple(name.replace("trtllm_", "trtllm_fused_") for name in PLAIN if name.startswith("trtllm_"))
SIZES = st.integers(1, 1 << 28)


@st.composite
def ladder(draw: st.DrawFn, pool: tuple[str, ...], alternatives: bool = True) -> list[list]:
    """A measured ladder: ascending rung ends, each rung a backend of ``pool`` or nccl."""
    cuts = sorted(draw(st.sets(SIZES, max_size=4)))
    rungs = []
    for cut in [*cuts, None]:
        backend = "nccl" if cut is None else draw(st.sampled_from(("nccl", *pool)))
        others = [b for b in pool if b != backend]
        extra = draw(st.lists(st.sampled_from(others), unique=True, max_size=3)) if alternatives else []
        rungs.append([cut, backend, [] if backend == "nccl" else extra])
    return rungs


@st.composite
def profiles(draw: st.DrawFn) -> tuple[object, int]:
    """(profile, TP) of one of the kinds listed in the module docstring."""
    kind = draw(st.sampled_from(("nvswitch", "pcie-sm120", "symm-mem", "fused-only", "v1.0")))
    hidden = draw(st.sampled_from((2048, 5120, 7168, 8192)))
    tp = draw(st.sampled_from((2, 4, 8)))
    sm = draw(st.sampled_from(("9.0", "10.0", "10.3", None)))
    options = {"hidden": hidden, "tp": tp, "sm": sm}
    if kind == "nvswitch":
        ladders = {"allreduce": draw(ladder(PLAIN)), "allreduce_rmsnorm": draw(ladder(FUSED))}
    elif kind == "pcie-sm120":
        tp = draw(st.sampled_from((2, 4)))
        wins = {"allreduce": draw(ladder(PLAIN)), "allreduce_rmsnorm": draw(ladder(FUSED))}
        loses = {"allreduce": [[None, "nccl"]], "allreduce_rmsnorm": [[None, "nccl"]]}
        ladders = wins if tp == 2 else loses
        options.update(
            tp=tp, sm="12.0", group_class=draw(st.sampled_from(("pcie-switch", "pcie-hostbridge")))
        )
    elif kind == "symm-mem":
        cut = draw(SIZES)
        ladders = {
            "allreduce": [[cut, "symm_mem_twoshot_vllm", ["vllm_custom"]], [None, "nccl"]],
            "allreduce_rmsnorm": [[None, "nccl"]],
        }
    elif kind == "fused-only":
        ladders = {"allreduce": [[None, "nccl"]], "allreduce_rmsnorm": draw(ladder(FUSED))}
    else:
        ladders = {
            "allreduce": draw(ladder(PLAIN, alternatives=False)),
            "allreduce_rmsnorm": draw(ladder(FUSED, alternatives=False)),
        }
        options["schema"] = "topo-gate/profile/v1"
    return build_profile(ladders, **options), options["tp"]


def assert_plan_follows_routes(launcher: str, profile, tp: int, served_hidden: int | None) -> None:
    plan = PLANNERS[launcher](profile, tp=tp, fingerprint=profile.node.fingerprint, hidden=served_hidden)
    assert not plan.fallback, plan.reason
    entries = [d for d in profile.decisions if d.tp == tp]
    measured = {d.pattern: measured_from_rules(d.rules) for d in entries}
    sm = profile.node.hardware["gpus"][0].get("sm")
    capabilities = [tuple(int(p) for p in sm.split("."))] if sm else list(CAPABILITY_VARIANTS)
    classes = [entries[0].group_class] if entries[0].group_class else list(GROUP_VARIANTS)
    hidden = served_hidden or profile.trials.hidden
    for capability in capabilities:
        for group_class in classes:
            ctx = Context(tp=tp, capability=capability, group_class=group_class, hidden=hidden)
            routes = route(launcher, Knobs(plan.args, plan.env, plan.config), ctx)
            assert violations(routes, measured, ctx.row_bytes) == [], (plan.args, dict(plan.env), ctx)


@settings(max_examples=60)
@given(profiles(), st.sampled_from(sorted(PLANNERS)), st.sampled_from((None, 4096, 16384)))
def test_every_routed_size_lands_on_a_measured_winner_or_nccl(case, launcher: str, served_hidden) -> None:
    profile, tp = case
    assert_plan_follows_routes(launcher, profile, tp, served_hidden)


@pytest.mark.parametrize("launcher", sorted(PLANNERS))
@pytest.mark.parametrize(("path", "tp"), [(H200, 2), (PCIE, 2), (PCIE, 4)])
def test_bundled_profiles_explain_no_violation(launcher: str, path: Path, tp: int) -> None:
    plan = PLANNERS[launcher](
        path, tp=tp, fingerprint=load_profile(path).node.fingerprint, model="llama-3-70b"
    )
    rows = explain_profile(
        launcher,
        plan,
        path,
        tp=tp,
        hidden=None,
        model="llama-3-70b",
        fingerprint=load_profile(path).node.fingerprint,
    )
    assert rows, "a plan that follows the profile explains itself"
    assert not [r for r in rows if r.verdict.startswith("VIOLATION")]
    assert_plan_follows_routes(launcher, load_profile(path), tp, 8192)


@pytest.mark.parametrize("launcher", sorted(PLANNERS))
def test_pcie_sm120_tp4_loses_so_every_launcher_stays_on_nccl(launcher: str) -> None:
    plan = PLANNERS[launcher](PCIE, tp=4, fingerprint=load_profile(PCIE).node.fingerprint)
    routes = route(
        launcher, Knobs(plan.args, plan.env, plan.config), Context(4, (12, 0), "pcie-hostbridge", 5120)
    )
    assert all(r == ((None, None),) for r in routes.values())


def test_pcie_sm120_tp2_never_gets_sglang_fusion_or_trtllm_strategies() -> None:
    fingerprint = load_profile(PCIE).node.fingerprint
    sglang = PLANNERS["sglang"](PCIE, tp=2, fingerprint=fingerprint)
    assert "--flashinfer-allreduce-fusion-backend" not in sglang.args  # SGLang refuses fusion on SM 12.x
    assert sglang.env["SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2"] == "0"  # the measured legacy kernel, to 8 MiB
    trtllm = PLANNERS["trtllm"](PCIE, tp=2, fingerprint=fingerprint)
    assert trtllm.config == {"allreduce_strategy": "NCCL"}
    assert any("without NVLink" in note for note in trtllm.notes)


def test_nvls_is_switched_off_only_where_a_fast_path_is_compared_with_nccl() -> None:
    ladders = {
        "allreduce": [[64 << 20, "trtllm_oneshot"], [None, "nccl"]],
        "allreduce_rmsnorm": [[64 << 20, "trtllm_fused_oneshot"], [None, "nccl"]],
    }
    tp4 = PLANNERS["trtllm"](build_profile(ladders, tp=4), tp=4, fingerprint=FINGERPRINT)
    tp2 = PLANNERS["trtllm"](build_profile(ladders, tp=2), tp=2, fingerprint=FINGERPRINT)
    assert tp4.env.get("NCCL_NVLS_ENABLE") == "0"
    assert "NCCL_NVLS_ENABLE" not in tp2.env
