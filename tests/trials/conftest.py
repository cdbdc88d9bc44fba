"""Shared helpers for the trial-harness tests: plans on gloo, and the no-orphan guarantee."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gloo_helpers import processes_mentioning


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A folder for one test's trials; after the test, no worker started under it may be alive."""
    yield tmp_path
    survivors = processes_mentioning(str(tmp_path))
    assert not survivors, f"worker processes left behind: {survivors}"
