"""The bundled 2x H200 evidence, loaded once for the report tests (each load re-decides: ~1 s)."""

from __future__ import annotations

import json

import pytest
from report_inputs import RUN1, RUN2

from topo_gate.probe import DecideSettings
from topo_gate.report.sources import Source, load_sources


@pytest.fixture(scope="session")
def both_runs() -> list[Source]:
    return load_sources([RUN1, RUN2], DecideSettings())


@pytest.fixture(scope="session")
def run1_evidence() -> dict:
    return json.loads(RUN1.read_text(encoding="utf-8"))
