"""The bundled 2x H200 evidence, loaded once for the report tests (each load re-decides: ~1 s)."""

from __future__ import annotations

import json

import pytest
from report_inputs import RUN1, RUN2

from topo_gate.probe import DecideSettings
from topo_gate.report.figures import FigureSpec, figure_specs
from topo_gate.report.sources import Source, load_sources


@pytest.fixture(scope="session")
def both_runs() -> list[Source]:
    return load_sources([RUN1, RUN2], DecideSettings())


@pytest.fixture(scope="session")
def both_specs(both_runs: list[Source]) -> dict[str, FigureSpec]:
    """The figure specs of both runs by name (the bootstrap behind the speed-ups takes a second)."""
    specs, notes = figure_specs(both_runs)
    assert notes == []  # every in-context and transition measurement of the bundled evidence is read
    return {spec.name: spec for spec in specs}


@pytest.fixture(scope="session")
def run1_evidence() -> dict:
    return json.loads(RUN1.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def both_evidence(run1_evidence: dict) -> list[dict]:
    return [run1_evidence, json.loads(RUN2.read_text(encoding="utf-8"))]
