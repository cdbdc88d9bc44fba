"""The preflight (``probe/preflight.py``): before any trial, each launcher's default path here at each
token range, whether this run times it, and if not why and what makes it measurable. Pure, so it is
computed on recorded nodes: the bundled real 2x H200 capture (TP2; its TP4 is skipped, the node has
two GPUs) and the synthetic 8x H100 NVSwitch capture (TP4), with and without SGLang's kernels.

The actions are checked on the route models themselves: the env each one names turns the untimed
path into a trial backend this run's plans time.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from topo_gate.launchers.plan.unmeasured import SGLANG_INSTALL
from topo_gate.launchers.routes import route
from topo_gate.launchers.routes.base import Context, Knobs
from topo_gate.launchers.routes.defaults import default_routes
from topo_gate.launchers.routes.nccl import nccl_path
from topo_gate.probe.installed import unavailable_up_front
from topo_gate.probe.node import cpu_node, facts_from_topology
from topo_gate.probe.preflight import NO_SM_WHY, PreflightRow, preflight
from topo_gate.profile.schema import PATTERNS
from topo_gate.topology.capture import capture_from_dict, load_capture
from topo_gate.topology.model import build_node
from topo_gate.trials.plan import default_backends

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json"
H100_X8 = REPO / "tests" / "fixtures" / "captures" / "h100-sxm-nvswitch-x8.synthetic.json"
NAMES = sorted({name for pattern in PATTERNS for name in default_backends(pattern, "cuda")})
NO_SGLANG = "SGLang 0.5.23's kernels are not importable here (sglang not installed)"


def _bundled_facts():
    capture = json.loads(BUNDLED.read_text())["node"]["capture"]
    return facts_from_topology(build_node(capture_from_dict(capture, "node.capture")), command=None)


def _rows(
    facts, tps, *, sglang: bool, model: str | None = None, max_tokens: int = 8192
) -> list[PreflightRow]:
    backends = {name: None for name in NAMES}
    if not sglang:
        backends.update({name: NO_SGLANG for name in NAMES if name.startswith("custom_v2_sglang")})
    rows = preflight(
        facts, tps, hidden=7168, itemsize=2, model=model, patterns=PATTERNS, backends=backends,
        routes=default_routes, max_tokens=dict.fromkeys(tps, max_tokens), device="cuda",
    )  # fmt: skip
    return list(rows)


def _brief(rows, launcher, variant=None):
    return [
        (r.pattern, r.min_tokens, r.max_tokens, r.path, r.timed)
        for r in rows
        if r.launcher == launcher and (variant is None or variant in r.variants)
    ]


@pytest.mark.parametrize("sglang", [True, False], ids=["sglang-installed", "no-sglang"])
def test_the_bundled_h200_node_at_tp2(sglang: bool) -> None:
    rows = _rows(_bundled_facts(), [2], sglang=sglang)
    assert {(r.tp, r.group_class) for r in rows} == {(2, "nvswitch")}
    assert _brief(rows, "sglang", "LlamaForCausalLM") == [
        ("allreduce", 1, 1170, "custom_v2_sglang", sglang),
        ("allreduce", 1171, None, "nccl", True),
        ("allreduce_rmsnorm", 1, 1170, "custom_v2_sglang+rmsnorm", sglang),
        ("allreduce_rmsnorm", 1171, None, "nccl", True),
    ]
    assert _brief(rows, "sglang", "DeepseekV3ForCausalLM") == [
        ("allreduce", 1, 2048, "trtllm_oneshot_sglang", True),
        ("allreduce", 2049, None, "nccl", True),
        ("allreduce_rmsnorm", 1, 2048, "trtllm_fused_oneshot_sglang", True),
        ("allreduce_rmsnorm", 2049, None, "nccl", True),
    ]
    assert _brief(rows, "vllm", "LlamaForCausalLM") == [
        ("allreduce", 1, 4681, "mnnvl_vllm", False),
        ("allreduce", 4682, None, "nccl", True),
        ("allreduce_rmsnorm", 1, 4681, "mnnvl_fused_vllm", False),
        ("allreduce_rmsnorm", 4682, None, "nccl", True),
    ]
    assert _brief(rows, "trtllm") == [
        ("allreduce", 1, None, "trtllm_autotuned", False),
        ("allreduce_rmsnorm", 1, None, "trtllm_autotuned_fused", False),
    ]
    v2 = next(r for r in rows if r.path == "custom_v2_sglang")
    if sglang:
        assert (v2.why, v2.action) == (None, None)
    else:
        assert (v2.why, v2.action) == (NO_SGLANG, SGLANG_INSTALL)
    vllm = next(r for r in rows if r.path == "mnnvl_vllm")
    assert "multicast" in vllm.why and vllm.action.startswith("VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm")
    trtllm = next(r for r in rows if r.path == "trtllm_autotuned")
    assert trtllm.action.startswith("TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1")


def test_the_bundled_node_has_no_tp4_group_so_no_tp4_rows() -> None:
    assert _rows(_bundled_facts(), [2, 4], sglang=True) == _rows(_bundled_facts(), [2], sglang=True)


@pytest.mark.parametrize("sglang", [True, False], ids=["sglang-installed", "no-sglang"])
def test_an_nvswitch_node_at_tp4(sglang: bool) -> None:
    facts = facts_from_topology(build_node(load_capture(H100_X8)), command=None)
    rows = [r for r in _rows(facts, [4], sglang=sglang) if r.pattern == "allreduce"]
    assert _brief(rows, "sglang", "LlamaForCausalLM") == [
        ("allreduce", 1, 64, "custom_v2_sglang", sglang),
        ("allreduce", 65, 1170, "custom_v2_multicast_sglang", False),
        ("allreduce", 1171, None, "nccl", True),
    ]
    assert _brief(rows, "vllm", "LlamaForCausalLM") == [
        ("allreduce", 1, 146, "mnnvl_vllm", False),
        ("allreduce", 147, 585, "vllm_custom", True),
        ("allreduce", 586, 2340, "symm_mem_multimem", False),
        ("allreduce", 2341, None, "nccl_nvls", False),
    ]
    nvls = next(r for r in rows if r.path == "nccl_nvls")
    assert nvls.action.startswith("NCCL_NVLS_ENABLE=0")


def test_a_named_model_routes_its_own_architecture_only() -> None:
    rows = _rows(_bundled_facts(), [2], sglang=False, model="deepseek-v3")
    sglang = [r for r in rows if r.launcher == "sglang"]
    assert {r.variants for r in sglang} == {("DeepseekV3ForCausalLM",)}
    assert all(r.timed for r in sglang)  # its default is FlashInfer's fusion, which needs no SGLang kernels


def test_a_range_above_the_ladder_is_not_timed_and_names_the_max_tokens_that_would_reach_it() -> None:
    rows = _rows(_bundled_facts(), [2], sglang=True, max_tokens=1024)
    nccl = next(r for r in rows if r.launcher == "sglang" and r.path == "nccl")
    assert (nccl.min_tokens, nccl.timed, nccl.action) == (1171, False, "--max-tokens 2048")
    assert "largest size (1024 tokens)" in nccl.why


def test_a_group_without_a_known_sm_gets_one_row_per_pattern_saying_so() -> None:
    facts = _bundled_facts()
    blind = type(facts)(**{**facts.__dict__, "capabilities": {}})
    rows = _rows(blind, [2], sglang=True)
    assert [(r.launcher, r.pattern, r.timed, r.why) for r in rows] == [
        ("any launcher", p, False, NO_SM_WHY) for p in PATTERNS
    ]


def test_the_cpu_harness_says_no_launcher_is_timed() -> None:
    rows = preflight(
        cpu_node([2]), [2], hidden=64, itemsize=2, model=None, patterns=("allreduce",),
        backends={"gloo": None, "gloo_ring": None}, routes=default_routes, max_tokens={2: 8}, device="cpu",
    )  # fmt: skip
    assert [(r.tp, r.group_class, r.pattern, r.timed, r.action) for r in rows] == [
        (2, "cpu-gloo", "allreduce", False, "probe a GPU node")
    ]


def test_a_launcher_that_refuses_the_group_gets_a_row_saying_why() -> None:
    def refusing(**_: object) -> list[dict[str, object]]:
        return [{"launcher": "vllm", "release": "0.33.0", "variants": [], "refused": "no P2P"}]

    rows = preflight(
        _bundled_facts(), [2], hidden=7168, itemsize=2, model=None, patterns=("allreduce",), backends={},
        routes=refusing, max_tokens={2: 8192}, device="cuda",
    )  # fmt: skip
    assert [(r.path, r.timed, r.why) for r in rows] == [
        ("refused", False, "vllm refuses this group with no knobs: no P2P")
    ]


def test_rows_are_the_evidence_form() -> None:
    row = _rows(_bundled_facts(), [2], sglang=False)[0]
    assert row.to_dict() == {
        "tp": 2, "group_class": "nvswitch", "launcher": "sglang", "release": "0.5.23",
        "variants": ["LlamaForCausalLM", "MiMoV2FlashForCausalLM"], "pattern": "allreduce", "min_tokens": 1,
        "max_tokens": 1170, "path": "custom_v2_sglang", "timed": False, "why": NO_SGLANG, "action": SGLANG_INSTALL,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("launcher", "tp", "untimed", "env"),
    [
        ("vllm", 2, "mnnvl_vllm", {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}),
        ("trtllm", 2, "trtllm_autotuned", {"TLLM_DISABLE_ALLREDUCE_AUTOTUNE": "1"}),
        ("sglang", 4, "custom_v2_multicast_sglang", {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}),
    ],
)
def test_each_named_action_turns_the_untimed_path_into_a_timed_one(
    launcher: str, tp: int, untimed: str, env: dict[str, str]
) -> None:
    ctx = Context(
        tp, (9, 0), "nvswitch", 7168, 2, architecture="LlamaForCausalLM" if launcher != "trtllm" else None
    )
    before = {b for _, b in route(launcher, Knobs(), ctx)["allreduce"]}
    after = {b for _, b in route(launcher, Knobs(env=env), ctx)["allreduce"]}
    assert untimed in before and untimed not in after
    assert after - {None} <= set(NAMES)  # every path left is a trial backend


def test_nccl_nvls_off_is_the_nccl_the_trials_time() -> None:
    ctx = Context(4, (9, 0), "nvswitch", 7168, 2)
    assert nccl_path("vllm", Knobs(), ctx) == "nccl_nvls"
    assert nccl_path("vllm", Knobs(env={"NCCL_NVLS_ENABLE": "0"}), ctx) == "nccl"


def test_what_this_machine_cannot_run_is_known_up_front() -> None:
    # The test environment: CPU torch, no FlashInfer, no SGLang (a GPU node's would differ).
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("needs the test environment: torch without FlashInfer")
    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("an sglang is installed here")
    reasons = unavailable_up_front(NAMES, "cuda", environ={})
    assert "nccl" not in reasons and "symm_mem_twoshot_vllm" not in reasons
    assert reasons["trtllm_oneshot"] == reasons["pcie_ipc+rmsnorm"] == "flashinfer not installed"
    assert reasons["custom_v2_sglang"] == reasons["custom_v2_sglang+rmsnorm"] == NO_SGLANG
    assert unavailable_up_front(NAMES, "cpu") == {}
