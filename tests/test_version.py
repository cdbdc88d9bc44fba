"""One version: the distribution's metadata, ``topo_gate.__version__`` and ``topo-gate --version``."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import topo_gate

REPO = Path(__file__).resolve().parents[1]


def test_package_cli_and_metadata_agree() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "topo_gate", "--version"], capture_output=True, text=True, check=True
    )
    assert result.stdout == f"topo-gate, version {topo_gate.__version__}\n"
    assert importlib.metadata.version("topo-gate") == topo_gate.__version__


def test_pyproject_does_not_write_a_second_version() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert re.search(r"^version\s*=", project, re.MULTILINE) is None
    assert 'dynamic = ["version"]' in project
    assert 'version = {attr = "topo_gate._version.__version__"}' in pyproject
