"""Shared fixtures: the recorded and hand-written captures, and the replay binding on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from capture_paths import ALL_CAPTURES

HERE = Path(__file__).resolve().parent
# replay_pynvml is imported by name, here and by child processes of collect_isolated.
sys.path.insert(0, str(HERE))


@pytest.fixture(params=ALL_CAPTURES, ids=lambda p: p.stem)
def capture_path(request: pytest.FixtureRequest) -> Path:
    return request.param
