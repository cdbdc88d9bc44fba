"""What the CLI hands the probe for its ladder and its preflight reaches them: the launchers' buffer
caps become each TP size's ladder rungs and transition priors, and the preflight is computed from
this run's plans with what this machine is known up front not to run. Pure (no trial runs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from topo_gate.cli import probe as cli_probe
from topo_gate.launchers.plan.unmeasured import TRIALS_INSTALL
from topo_gate.launchers.routes.buffer_caps import buffer_caps
from topo_gate.launchers.routes.defaults import default_routes
from topo_gate.probe import ProbeOptions, cpu_node, facts_from_topology, plan_trials
from topo_gate.probe.run import cap_tokens, preflight_rows
from topo_gate.topology.capture import load_capture
from topo_gate.topology.model import build_node

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "h200-x2.real.json"


def _options(tmp_path: Path, **extra: object) -> ProbeOptions:
    return ProbeOptions(out=tmp_path / "p.yaml", hidden=7168, tps=(2, 4), **extra)  # type: ignore[arg-type]


def test_the_cli_passes_the_launchers_caps_and_routes() -> None:
    assert cli_probe.buffer_caps is buffer_caps and cli_probe.default_routes is default_routes


def test_the_caps_reach_the_ladder_of_each_tp_the_node_can_run(tmp_path: Path) -> None:
    node = facts_from_topology(build_node(load_capture(CAPTURE)), command=None)
    options = _options(tmp_path, buffer_caps=buffer_caps)
    assert cap_tokens(node, options) == {2: (1170, 2048, 2340, 4681)}  # the node has no TP4 group
    sessions, skipped = plan_trials(node, options)
    assert [s.tp for s in sessions] == [2] and [s.tp for s in skipped] == [4]
    for plan in sessions[0].plans:
        assert {1170, 2048, 2340, 4681} <= set(plan.tokens) and plan.buffer_caps == (1170, 2048, 2340, 4681)
        assert {1170, 2340, 4681, 512} <= set(plan.after_tokens)


def test_the_cpu_harness_gets_no_caps(tmp_path: Path) -> None:
    options = _options(tmp_path, device="cpu", buffer_caps=buffer_caps, max_tokens=8)
    assert cap_tokens(cpu_node((2,)), options) == {}


def test_the_preflight_of_a_run_names_what_this_machine_cannot_run(tmp_path: Path) -> None:
    if importlib.util.find_spec("flashinfer") is not None or importlib.util.find_spec("torch") is None:
        pytest.skip("needs the test environment: torch without FlashInfer")
    node = facts_from_topology(build_node(load_capture(CAPTURE)), command=None)
    options = _options(tmp_path, buffer_caps=buffer_caps, default_routes=default_routes, model="deepseek-v3")
    sessions, _ = plan_trials(node, options)
    rows = preflight_rows(node, sessions, options)
    fused = next(r for r in rows if r.path == "trtllm_fused_oneshot_sglang")
    assert (fused.timed, fused.why, fused.action) == (False, "flashinfer not installed", TRIALS_INSTALL)
    assert next(r for r in rows if r.launcher == "sglang" and r.path == "nccl").timed


def test_without_the_launchers_routes_a_gpu_run_has_no_preflight(tmp_path: Path) -> None:
    node = facts_from_topology(build_node(load_capture(CAPTURE)), command=None)
    sessions, _ = plan_trials(node, _options(tmp_path))
    assert preflight_rows(node, sessions, _options(tmp_path)) == ()
