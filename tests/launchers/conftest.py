"""Fixtures for launcher tests: profile files written through the real profile API."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_profiles import build_profile

from topo_gate.profile import dump_profile


@pytest.fixture
def write_profile(tmp_path: Path):
    """``write_profile(ladders, **build_profile_kwargs) -> Path`` of a sealed profile YAML."""

    def write(ladders: dict, **kwargs) -> Path:
        path = tmp_path / "profile.yaml"
        dump_profile(build_profile(ladders, **kwargs), path)
        return path

    return write
