"""Fixtures for fleet tests; the synthetic nodes themselves are built in ``synthetic_fleet``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def write_fleet(tmp_path: Path) -> Callable[..., list[Path]]:
    """``write_fleet(evidences)`` -> the files ``n<i>.evidence.json`` in a fresh folder."""

    def write(evidences: list[dict[str, Any]], folder: str = "evidence") -> list[Path]:
        target = tmp_path / folder
        target.mkdir(exist_ok=True)
        paths = []
        for index, evidence in enumerate(evidences):
            path = target / f"n{index}.evidence.json"
            path.write_text(json.dumps(evidence), encoding="utf-8")
            paths.append(path)
        return paths

    return write
