"""The ``bench`` fixture: the stand-in benchmark in a fresh folder (see ab_helpers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ab_helpers import Bench


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Bench:
    monkeypatch.chdir(tmp_path)
    return Bench(tmp_path, monkeypatch)
