"""The launchers' default paths reach the layer graphs: from the route models, per (TP, group class,
pattern), through ``ProbeOptions.default_paths`` (the probe imports no launcher). Pure."""

from __future__ import annotations

from pathlib import Path

from topo_gate.cli.probe import default_paths as cli_default_paths
from topo_gate.launchers.routes.defaults import default_paths
from topo_gate.probe import ProbeOptions, context_paths, cpu_node, facts_from_topology, plan_trials
from topo_gate.topology.capture import load_capture
from topo_gate.topology.model import build_node
from topo_gate.trials.plan import default_backends

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


def facts(capture: str):
    return facts_from_topology(build_node(load_capture(CAPTURES / f"{capture}.json")), command=None)


def test_the_cli_passes_the_launchers_default_paths() -> None:
    assert cli_default_paths is default_paths


def test_a_pcie_node_confirms_vllm_and_sglang_defaults_in_context(tmp_path) -> None:
    node = facts("rtx-pro-6000-pcie-x8.synthetic")  # SM 12.0, PCIe switches
    options = ProbeOptions(out=tmp_path / "p.yaml", hidden=7168, tps=(2,), default_paths=default_paths)
    paths = context_paths(node, options)
    group_class = node.planner.tp_groups(2)[0].group_class
    # SGLang's and vLLM's default custom all-reduce (vLLM's own up to 8 MiB at TP2); in the fused
    # pattern the plain path + norm, since neither fuses there by default.
    assert paths[(2, group_class, "allreduce")] == ("vllm_custom",)
    assert paths[(2, group_class, "allreduce_rmsnorm")] == ("vllm_custom+rmsnorm",)
    sessions, _ = plan_trials(node, options)
    assert [plan.context_backends for plan in sessions[0].plans] == [
        ("vllm_custom",),
        ("vllm_custom+rmsnorm",),
    ]


def test_every_default_path_is_a_backend_the_trials_measure() -> None:
    for capability in ((9, 0), (10, 0), (12, 0)):
        for group_class in ("nvswitch", "nvlink-bridge", "pix", "no-p2p"):
            for pattern in ("allreduce", "allreduce_rmsnorm"):
                names = default_paths(
                    tp=2,
                    capability=capability,
                    group_class=group_class,
                    hidden=7168,
                    itemsize=2,
                    pattern=pattern,
                )
                assert names <= set(default_backends(pattern, "cuda")), (capability, group_class, pattern)


def test_the_cpu_harness_has_no_launcher_default(tmp_path) -> None:
    options = ProbeOptions(
        out=tmp_path / "p.yaml", hidden=64, device="cpu", tps=(2,), default_paths=default_paths
    )
    assert context_paths(cpu_node((2,)), options) == {}
