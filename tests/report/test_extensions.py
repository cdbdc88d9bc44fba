"""In-context and size-transition figures appear when the evidence has those measurements.

The bundled H200 evidence has neither, so these tests extend a copy of it by hand: the added numbers
are made up from the recorded samples (scaled), marked as such in the file, and never written as
measured anywhere.
"""

from __future__ import annotations

import copy
import json

import pytest

from topo_gate.probe import DecideSettings
from topo_gate.report.figures import CONTEXT, TRANSITION, figure_specs
from topo_gate.report.render import render_png
from topo_gate.report.sources import load_sources

KiB, MiB = 1024, 1024 * 1024
HAND_MADE = (
    "HAND-MADE for tests: in_context and transitions are scaled copies of recorded samples, not measured"
)


def _cell(run: dict, backend: str, nbytes: int) -> dict:
    return next(r for r in run["results"] if r["backend"] == backend and r["nbytes"] == nbytes)


def _scaled(cell: dict, factor: float) -> dict:
    return {**cell, "samples_us": [s * factor for s in cell["samples_us"]], "per_rank_us": []}


def _extended(evidence: dict) -> dict:
    extended = copy.deepcopy(evidence)
    extended["node"]["provenance"]["note"] = HAND_MADE
    run = extended["runs"][0]  # TP2 allreduce
    sizes = (14 * KiB, 7 * MiB)
    context = [_scaled(_cell(run, "nccl", n), 1.0) for n in sizes]
    context += [_scaled(_cell(run, "trtllm_oneshot", n), 1.2) for n in sizes]  # the win shrinks in context
    context.append({**_cell(run, "pcie_ipc", 14 * KiB), "status": "failed", "reason": "hand-made failure"})
    run["in_context"] = {"description": "hand-made: GEMM before each all-reduce", "results": context}
    steady = _cell(run, "trtllm_oneshot", 14 * KiB)["samples_us"]
    run["transitions"] = [
        {
            "backend": "trtllm_oneshot",
            "from_nbytes": 56 * MiB,
            "to_nbytes": 14 * KiB,
            "status": "ok",
            "reason": None,
            "samples_us": [s * 3 for s in steady],
        },
        {
            "backend": "vllm_custom",
            "from_nbytes": 56 * MiB,
            "to_nbytes": 14 * KiB,
            "status": "timeout",
            "reason": "hand-made timeout",
            "samples_us": [],
        },
    ]
    return extended


@pytest.fixture(scope="module")
def extended_specs(tmp_path_factory, run1_evidence):
    path = tmp_path_factory.mktemp("ext") / "hand-made.evidence.json"
    path.write_text(json.dumps(_extended(run1_evidence)), encoding="utf-8")
    sources = load_sources([path], DecideSettings(bootstrap=200))
    return figure_specs(sources)


def test_extended_evidence_adds_a_context_and_a_transition_figure(extended_specs) -> None:
    specs, notes = extended_specs
    assert notes == []
    assert [spec.name for spec in specs] == [
        "latency-tp2-nvswitch-allreduce",
        "speedup-tp2-nvswitch-allreduce",
        "context-tp2-nvswitch-allreduce",
        "transition-tp2-nvswitch-allreduce",
        "latency-tp2-nvswitch-allreduce_rmsnorm",
        "speedup-tp2-nvswitch-allreduce_rmsnorm",
    ]


def test_context_figure_puts_the_in_context_speedup_beside_the_isolated_one(extended_specs) -> None:
    spec = next(s for s in extended_specs[0] if s.kind == CONTEXT)
    in_context = {ln.backend: ln for ln in spec.lines if ln.variant == "in context"}
    isolated = {ln.backend: ln for ln in spec.lines if ln.variant == "isolated"}
    assert set(in_context) == {"trtllm_oneshot"}
    assert set(isolated) == {"trtllm_oneshot"}  # only the backends measured in context, to compare
    for point in in_context["trtllm_oneshot"].points:
        alone = next(p for p in isolated["trtllm_oneshot"].points if p.nbytes == point.nbytes)
        assert point.value == pytest.approx(alone.value / 1.2)
    assert [(m.backend, m.status, m.reason) for m in spec.marks] == [
        ("pcie_ipc", "failed", "hand-made failure")
    ]
    assert "context: hand-made: GEMM before each all-reduce" in spec.notes


def test_transition_figure_plots_the_slowdown_and_marks_what_did_not_run(extended_specs) -> None:
    spec = next(s for s in extended_specs[0] if s.kind == TRANSITION)
    (line,) = spec.lines
    assert line.backend == "trtllm_oneshot" and not line.connect
    assert [(p.nbytes, round(p.value, 6)) for p in line.points] == [(14 * KiB, 3.0)]
    assert [(m.backend, m.status, m.reason) for m in spec.marks] == [
        ("vllm_custom", "timeout", "hand-made timeout")
    ]
    assert [ref.value for ref in spec.ref_lines] == [1.0]
    assert spec.notes[0] == "trtllm_oneshot 56 MiB -> 14 KiB: 3.00x steady"


def test_unreadable_extension_is_a_note_and_the_rest_still_renders(tmp_path, run1_evidence) -> None:
    garbled = copy.deepcopy(run1_evidence)
    garbled["runs"][0]["in_context"] = {"results": "not a list"}
    garbled["runs"][0]["transitions"] = [{"backend": "nccl"}, "nonsense"]
    path = tmp_path / "garbled.evidence.json"
    path.write_text(json.dumps(garbled), encoding="utf-8")
    specs, notes = figure_specs(load_sources([path], DecideSettings(bootstrap=200)))
    assert {spec.kind for spec in specs} == {"latency", "speedup"}
    assert len(specs) == 4
    assert any("in_context is not a list of result cells" in note for note in notes)
    assert any("2 transitions entries not understood" in note for note in notes)


def test_a_backend_name_this_schema_does_not_know_gets_a_latency_line_only(tmp_path, run1_evidence) -> None:
    newer = copy.deepcopy(run1_evidence)
    fused = newer["runs"][1]  # TP2 allreduce_rmsnorm
    comparator = [
        {**cell, "backend": "vllm_custom+rmsnorm"} for cell in fused["results"] if cell["backend"] == "nccl"
    ]
    fused["results"] += comparator
    path = tmp_path / "newer.evidence.json"
    path.write_text(json.dumps(newer), encoding="utf-8")
    specs = {s.name: s for s in figure_specs(load_sources([path], DecideSettings(bootstrap=200)))[0]}
    assert "vllm_custom+rmsnorm" in specs["latency-tp2-nvswitch-allreduce_rmsnorm"].backends
    assert "vllm_custom+rmsnorm" not in specs["speedup-tp2-nvswitch-allreduce_rmsnorm"].backends
    assert render_png(specs["latency-tp2-nvswitch-allreduce_rmsnorm"]).startswith(b"\x89PNG")
