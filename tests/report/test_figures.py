"""The figure specs of the bundled H200 evidence: which figures, which lines, which shaded ranges.

Asserted on the plotting data (``FigureSpec``), not on pixels: the renderer only draws a spec.
"""

from __future__ import annotations

import dataclasses
import statistics

from hypothesis import given
from hypothesis import strategies as st
from report_inputs import PROFILE1

from topo_gate.profile import load_profile
from topo_gate.report.figures import LATENCY, SPEEDUP, figure_specs
from topo_gate.report.series import median_interval

KiB, MiB = 1024, 1024 * 1024

# What profiles/h200-x2/README.md says both runs decided (TP2, hidden 7168).
EXPECTED_RANGES = {
    "allreduce": [
        (0, 28 * KiB, "pcie_ipc"),
        (28 * KiB, 7 * MiB, "trtllm_oneshot"),
        (7 * MiB, 28 * MiB, "vllm_custom"),
        (28 * MiB, None, "nccl"),
    ],
    "allreduce_rmsnorm": [(0, 28 * MiB, "trtllm_fused_oneshot"), (28 * MiB, None, "nccl")],
}
ALLREDUCE_BACKENDS = [
    "nccl",
    "pcie_ipc",
    "symm_mem_oneshot",
    "symm_mem_twoshot",
    "trtllm_oneshot",
    "trtllm_twoshot",
    "vllm_custom",
]
FUSED_BACKENDS = ["nccl", "trtllm_fused_oneshot", "trtllm_fused_twoshot"]


def test_two_figures_per_pattern_with_fixed_names(both_specs) -> None:
    assert list(both_specs) == [
        "latency-tp2-nvswitch-allreduce",
        "speedup-tp2-nvswitch-allreduce",
        "latency-tp2-nvswitch-allreduce_rmsnorm",
        "speedup-tp2-nvswitch-allreduce_rmsnorm",
    ]


def test_latency_figures_show_every_backend_of_both_runs_nccl_emphasised(both_specs) -> None:
    specs = both_specs
    for name, backends in (
        ("latency-tp2-nvswitch-allreduce", ALLREDUCE_BACKENDS),
        ("latency-tp2-nvswitch-allreduce_rmsnorm", FUSED_BACKENDS),
    ):
        spec = specs[name]
        assert spec.backends == backends
        assert spec.sources == ["h7168-run1", "h7168-run2"]
        assert {(line.backend, line.source) for line in spec.lines} == {
            (b, s) for b in backends for s in ("h7168-run1", "h7168-run2")
        }
        assert {line.backend for line in spec.lines if line.emphasis} == {"nccl"}
        for line in spec.lines:
            assert line.source_index == (0 if line.source == "h7168-run1" else 1)
            assert all(p.low <= p.value <= p.high for p in line.points)
            # 14 sizes, 14 KiB .. 112 MiB; two-shot is not admitted at 1 and 2 tokens (tokens <= TP).
            assert len(line.points) == (
                12 if line.backend.startswith("trtllm") and line.backend.endswith("twoshot") else 14
            )
            assert [p.nbytes for p in line.points] == sorted(p.nbytes for p in line.points)


def test_shaded_ranges_are_the_decided_rules_labelled_with_backend_and_speedup(both_specs) -> None:
    specs = both_specs
    committed = load_profile(PROFILE1)
    for pattern, expected in EXPECTED_RANGES.items():
        rules = committed.find(2, pattern, "nvswitch").rules
        for kind in (LATENCY, SPEEDUP):
            spec = specs[f"{kind}-tp2-nvswitch-{pattern}"]
            assert [(s.min_bytes, s.max_bytes, s.backend) for s in spec.shades] == expected
            assert spec.shades_from == "h7168-run1"
            for shade, rule in zip(spec.shades, rules, strict=True):
                assert shade.label.startswith(shade.backend)
                if rule.speedup is not None:
                    assert shade.label == f"{rule.backend} {rule.speedup:.2f}x"
            assert "h7168-run2 decided the same" in spec.notes[0]


def test_speedup_figure_agrees_with_the_decision_at_each_rules_weakest_size(both_runs, both_specs) -> None:
    spec = both_specs["speedup-tp2-nvswitch-allreduce"]
    assert "nccl" not in spec.backends
    assert [ref.value for ref in spec.ref_lines] == [1.0, 1.05]
    rules = both_runs[0].profile.find(2, "allreduce", "nvswitch").rules
    lower = 0
    for rule in rules:
        if rule.backend != "nccl":
            (line,) = [ln for ln in spec.lines if ln.backend == rule.backend and ln.source == "h7168-run1"]
            inside = [p for p in line.points if lower < p.nbytes <= rule.max_bytes]
            weakest = min(inside, key=lambda p: p.value)
            assert round(weakest.value, 3) == rule.speedup
            assert (round(weakest.low, 3), round(weakest.high, 3)) == rule.ci
        lower = rule.max_bytes or lower


def test_speedup_figure_marks_the_refused_cells_with_why(both_specs) -> None:
    specs = both_specs
    for pattern, twoshot in (("allreduce", "trtllm_twoshot"), ("allreduce_rmsnorm", "trtllm_fused_twoshot")):
        spec = specs[f"speedup-tp2-nvswitch-{pattern}"]
        assert {(m.backend, m.nbytes, m.status) for m in spec.marks} == {
            (twoshot, 14 * KiB, "unavailable"),
            (twoshot, 28 * KiB, "unavailable"),
        }
        assert all("two-shot needs tokens > TP" in m.reason for m in spec.marks)
        assert any(note.startswith(f"{twoshot} unavailable at 14 KiB: two-shot") for note in spec.notes)


def test_latency_point_is_the_median_of_the_recorded_samples(both_specs, run1_evidence) -> None:
    spec = both_specs["latency-tp2-nvswitch-allreduce"]
    (nccl,) = [ln for ln in spec.lines if ln.backend == "nccl" and ln.source == "h7168-run1"]
    cell = next(
        r for r in run1_evidence["runs"][0]["results"] if r["backend"] == "nccl" and r["nbytes"] == 14 * KiB
    )
    assert nccl.points[0].nbytes == 14 * KiB
    assert nccl.points[0].value == statistics.median(cell["samples_us"])
    ordered = sorted(cell["samples_us"])
    assert (nccl.points[0].low, nccl.points[0].high) == (ordered[3], ordered[11])  # 15 rounds: x(4), x(12)


@given(st.lists(st.floats(min_value=0.1, max_value=1e6), min_size=1, max_size=60))
def test_median_interval_contains_the_median(samples: list[float]) -> None:
    low, high = median_interval(samples)
    assert min(samples) <= low <= statistics.median(samples) <= high <= max(samples)


def test_median_interval_widens_to_the_range_when_too_few_samples() -> None:
    assert median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) == (1.0, 5.0)  # n=5: no order statistic covers 95%
    assert median_interval(list(range(1, 16))) == (4, 12)


def test_inputs_from_different_node_classes_are_called_out(both_runs) -> None:
    first, second = both_runs
    node = dataclasses.replace(second.profile.node, fingerprint="sha256:" + "0" * 64)
    other = dataclasses.replace(second, profile=dataclasses.replace(second.profile, node=node))
    _, notes = figure_specs([first, other])
    assert notes == [
        "the inputs come from 2 node classes (hardware fingerprints differ): overlaid lines compare different hardware"
    ]
