"""In-context and size-transition figures come from the evidence's own ``context`` entries and
``after_larger_us`` samples, computed as ``decide`` uses them (the bundled 2x H200 runs have both)."""

from __future__ import annotations

import copy
import json
import re
from statistics import median

import pytest

from topo_gate.decide import transition_us
from topo_gate.evidence.bar import STEP_CALLS
from topo_gate.evidence.document import Result
from topo_gate.probe import DecideSettings
from topo_gate.report.figures import CONTEXT, TRANSITION, figure_specs
from topo_gate.report.render import render_png
from topo_gate.report.sources import ReportInputError, load_sources

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run1_specs(tmp_path_factory, run1_evidence):
    path = tmp_path_factory.mktemp("ext") / "run1.evidence.json"
    path.write_text(json.dumps(run1_evidence), encoding="utf-8")
    sources = load_sources([path], DecideSettings(bootstrap=200))
    return sources[0], *figure_specs(sources)


def test_each_pattern_gets_a_context_and_a_transition_figure(run1_specs) -> None:
    _, specs, notes = run1_specs
    assert notes == []
    assert [spec.name for spec in specs] == [
        f"{kind}-tp2-nvswitch-{pattern}"
        for pattern in ("allreduce", "allreduce_rmsnorm")
        for kind in ("latency", "speedup", "context", "transition")
    ]


@pytest.mark.parametrize("index", [0, 1])
def test_context_points_are_decides_in_context_speedups(run1_specs, run1_evidence, index) -> None:
    """Recomputed here from the raw layer samples: (NCCL layer - GEMM) / (backend layer - GEMM)."""
    run = run1_evidence["runs"][index]
    layers: dict[int, dict[str, float]] = {}
    for entry in run["context"]:
        if entry["samples_us"]:
            layers.setdefault(entry["nbytes"], {})[entry["backend"]] = median(entry["samples_us"])
    expected = {
        (name, nbytes): (at["nccl"] - at["gemm"]) / (value - at["gemm"])
        for nbytes, at in layers.items()
        if "gemm" in at and "nccl" in at
        for name, value in at.items()
        if name not in ("gemm", "nccl")
    }
    spec = next(s for s in run1_specs[1] if s.kind == CONTEXT and s.key[2] == run["pattern"])
    plotted = {
        (line.backend, p.nbytes): p.value
        for line in spec.lines
        if line.variant == "in context"
        for p in line.points
    }
    assert plotted == pytest.approx(expected)
    isolated = {line.backend for line in spec.lines if line.variant == "isolated"}
    assert isolated and isolated <= {backend for backend, _ in plotted}


def test_each_rules_in_context_figure_is_its_weakest_plotted_point(run1_specs) -> None:
    """The decided profile's ``in_context`` is the lowest in-context point of its backend in its range."""
    source, specs, _ = run1_specs
    checked = 0
    for entry in source.profile.decisions:
        spec = next(s for s in specs if s.kind == CONTEXT and s.key[2] == entry.pattern)
        lower = 0
        for rule in entry.rules:
            if rule.in_context is not None:
                points = [
                    p.value
                    for line in spec.lines
                    if line.variant == "in context" and line.backend == rule.backend
                    for p in line.points
                    if lower < p.nbytes <= (rule.max_bytes or p.nbytes)
                ]
                assert round(min(points), 3) == rule.in_context
                checked += 1
            lower = rule.max_bytes or lower
    assert checked >= 2  # both patterns have a rule confirmed in context


def test_transition_points_are_the_recorded_replays_after_the_largest_size(run1_specs, run1_evidence) -> None:
    run = run1_evidence["runs"][0]
    spec = next(s for s in run1_specs[1] if s.kind == TRANSITION and s.key[2] == run["pattern"])
    plotted = {(line.backend, p.nbytes): p.value for line in spec.lines for p in line.points}
    assert all(not line.connect for line in spec.lines)
    with_after = [r for r in run["results"] if r.get("after_larger_us")]
    assert plotted == pytest.approx(
        {
            (r["backend"], r["nbytes"]): median(r["after_larger_us"]) / median(r["samples_us"])
            for r in with_after
        }
    )
    first = min(with_after, key=lambda r: (r["backend"], r["nbytes"]))
    cost = transition_us(Result.from_record(first))
    assert spec.notes[0].startswith(f"{first['backend']} ")
    assert f"+{cost:.1f} us per replay (charged {cost / STEP_CALLS:.2f} us/call)" in spec.notes[0]


@pytest.mark.parametrize(
    ("garble", "field"),
    [
        (lambda run: run.__setitem__("context", [{"backend": "nccl"}]), "runs[0].context[0]: needs"),
        (
            lambda run: [
                r.__setitem__("after_larger_us", [-1.0]) for r in run["results"] if "after_larger_us" in r
            ],
            "after_larger_us: must be a list of positive numbers",
        ),
    ],
)
def test_a_garbled_extension_is_an_input_error_naming_the_field(
    tmp_path, run1_evidence, garble, field
) -> None:
    """The evidence loader checks the in-context and transition fields, so a report never draws (or
    decides) from a shape it does not understand: the input is refused in one line, exit 3."""
    garbled = copy.deepcopy(run1_evidence)
    garble(garbled["runs"][0])
    path = tmp_path / "garbled.evidence.json"
    path.write_text(json.dumps(garbled), encoding="utf-8")
    with pytest.raises(ReportInputError, match=re.escape(field)):
        load_sources([path], DecideSettings(bootstrap=200))


def test_a_backend_name_this_schema_does_not_know_gets_a_latency_line_only(tmp_path, run1_evidence) -> None:
    newer = copy.deepcopy(run1_evidence)
    fused = newer["runs"][1]  # TP2 allreduce_rmsnorm
    comparator = [{**cell, "backend": "warp_drive"} for cell in fused["results"] if cell["backend"] == "nccl"]
    fused["results"] += comparator
    path = tmp_path / "newer.evidence.json"
    path.write_text(json.dumps(newer), encoding="utf-8")
    specs = {s.name: s for s in figure_specs(load_sources([path], DecideSettings(bootstrap=200)))[0]}
    assert "warp_drive" in specs["latency-tp2-nvswitch-allreduce_rmsnorm"].backends
    assert "warp_drive" not in specs["speedup-tp2-nvswitch-allreduce_rmsnorm"].backends
    assert render_png(specs["latency-tp2-nvswitch-allreduce_rmsnorm"]).startswith(b"\x89PNG")


def test_context_and_transition_figures_render(run1_specs) -> None:
    for spec in run1_specs[1]:
        if spec.kind in (CONTEXT, TRANSITION):
            assert render_png(spec).startswith(b"\x89PNG")
