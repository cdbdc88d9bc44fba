"""Shared helpers for the trial-harness tests: plans on gloo, and the no-orphan guarantee."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gloo_helpers import end_groups, processes_mentioning


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A folder for one test's trials; after the test, no worker started under it may be alive. The
    survivors are ended before the test fails (each worker leads its own process group), so a failing
    test leaves none running."""
    yield tmp_path
    survivors = processes_mentioning(str(tmp_path))
    end_groups(survivors)
    assert not survivors, f"worker processes left behind: {survivors}"
