"""The figure specs of the bundled H200 evidence: which figures, which lines, which shaded ranges.

Asserted on the plotting data (``FigureSpec``), not on pixels: the renderer only draws a spec.
"""

from __future__ import annotations

import dataclasses
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st
from report_inputs import PROFILE1

from topo_gate.evidence.stats import median_interval
from topo_gate.profile import load_profile
from topo_gate.report.changes import ranges
from topo_gate.report.figures import LATENCY, SPEEDUP, figure_specs

pytestmark = pytest.mark.slow

KiB, MiB = 1024, 1024 * 1024
SOURCES = ("h7168-run1", "h7168-run2")


def measured_ok(evidence: dict, pattern: str) -> dict[str, list[int]]:
    """Per backend, the sizes it measured ok in ``pattern``'s run: what its latency line plots."""
    run = next(r for r in evidence["runs"] if r["pattern"] == pattern)
    sizes: dict[str, list[int]] = {}
    for result in run["results"]:
        if result["status"] == "ok" and result["samples_us"]:
            sizes.setdefault(result["backend"], []).append(result["nbytes"])
    return {backend: sorted(found) for backend, found in sorted(sizes.items())}


def test_four_figures_per_pattern_with_fixed_names(both_specs) -> None:
    """The bundled runs have in-context graphs and transitions: context and transition figures too."""
    assert list(both_specs) == [
        f"{kind}-tp2-nvswitch-{pattern}"
        for pattern in ("allreduce", "allreduce_rmsnorm")
        for kind in ("latency", "speedup", "context", "transition")
    ]


def test_latency_figures_show_every_backend_of_both_runs_nccl_emphasised(both_specs, both_evidence) -> None:
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        spec = both_specs[f"latency-tp2-nvswitch-{pattern}"]
        per_run = [measured_ok(evidence, pattern) for evidence in both_evidence]
        assert spec.backends == sorted(set().union(*per_run))
        assert spec.sources == list(SOURCES)
        assert {(line.backend, line.source) for line in spec.lines} == {
            (backend, source) for source, sizes in zip(SOURCES, per_run, strict=True) for backend in sizes
        }
        assert {line.backend for line in spec.lines if line.emphasis} == {"nccl"}
        for line in spec.lines:
            index = SOURCES.index(line.source)
            assert line.source_index == index
            assert all(p.low <= p.value <= p.high for p in line.points)
            assert [p.nbytes for p in line.points] == per_run[index][line.backend]


def test_shaded_ranges_are_the_decided_rules_labelled_with_backend_and_speedup(both_runs, both_specs) -> None:
    committed = load_profile(PROFILE1)
    second = both_runs[1].profile
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        entry = committed.find(2, pattern, "nvswitch")
        expected = [(lower, rule.max_bytes, rule.backend) for lower, rule in ranges(entry)]
        same = [(r.max_bytes, r.backend) for r in second.find(2, pattern, "nvswitch").rules] == [
            (r.max_bytes, r.backend) for r in entry.rules
        ]
        for kind in (LATENCY, SPEEDUP):
            spec = both_specs[f"{kind}-tp2-nvswitch-{pattern}"]
            assert [(s.min_bytes, s.max_bytes, s.backend) for s in spec.shades] == expected
            assert spec.shades_from == "h7168-run1"
            for shade, rule in zip(spec.shades, entry.rules, strict=True):
                assert shade.label.startswith(shade.backend)
                if rule.speedup is not None:
                    assert shade.label == f"{rule.backend} {rule.speedup:.2f}x"
            if same:
                assert "h7168-run2 decided the same" in spec.notes[0]
            else:
                assert spec.notes[0].startswith("h7168-run2 decided differently: ")


def test_the_runs_differ_only_where_the_bundled_readme_says(both_runs) -> None:
    """27 of 28 buckets agree; at 224 KiB run 1 chose trtllm_oneshot_sglang, run 2 trtllm_oneshot_vllm."""
    differ = [
        (entry.pattern, nbytes)
        for entry in both_runs[0].profile.decisions
        for nbytes in (14 * KiB * 2**i for i in range(14))
        if entry.rule_for(nbytes)[1].backend
        != both_runs[1].profile.find(2, entry.pattern, "nvswitch").rule_for(nbytes)[1].backend
    ]
    assert differ == [("allreduce", 224 * KiB)]


def test_speedup_figure_agrees_with_the_decision_at_each_rules_weakest_size(both_runs, both_specs) -> None:
    """Speed-ups are decide's own, size transitions charged: each rule states its weakest point."""
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        spec = both_specs[f"speedup-tp2-nvswitch-{pattern}"]
        assert "nccl" not in spec.backends
        assert [ref.value for ref in spec.ref_lines] == [1.0, 1.05]
        lower = 0
        for rule in both_runs[0].profile.find(2, pattern, "nvswitch").rules:
            if rule.backend != "nccl":
                (line,) = [
                    ln for ln in spec.lines if ln.backend == rule.backend and ln.source == "h7168-run1"
                ]
                inside = [p for p in line.points if lower < p.nbytes <= rule.max_bytes]
                weakest = min(inside, key=lambda p: p.value)
                assert round(weakest.value, 3) == rule.speedup
                assert (round(weakest.low, 3), round(weakest.high, 3)) == rule.ci
            lower = rule.max_bytes or lower


def test_speedup_figure_marks_the_refused_cells_with_why(both_specs, both_evidence) -> None:
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        spec = both_specs[f"speedup-tp2-nvswitch-{pattern}"]
        refused = {
            (source, r["backend"], r["nbytes"], r["status"], r["reason"])
            for source, evidence in zip(SOURCES, both_evidence, strict=True)
            for run in evidence["runs"]
            if run["pattern"] == pattern
            for r in run["results"]
            if r["status"] != "ok"
        }
        assert {(m.source, m.backend, m.nbytes, m.status, m.reason) for m in spec.marks} == refused
        twoshot = "trtllm_twoshot" if pattern == "allreduce" else "trtllm_fused_twoshot"
        assert f"{twoshot} unavailable at 14 KiB: two-shot needs tokens > TP (tokens 1, TP 2)" in spec.notes


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
