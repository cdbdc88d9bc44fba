"""Shared fixtures: the committed example profile, and writing (sealed) profile files."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo_gate.profile import compute_digest
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.yaml"


@pytest.fixture(autouse=True)
def _no_ambient_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    # gate() reads TOPO_GATE_NODE_FINGERPRINT; a developer's shell must not change test outcomes.
    monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)


@pytest.fixture
def example_path() -> Path:
    return EXAMPLE


@pytest.fixture
def example_data() -> dict[str, Any]:
    """The example profile as plain data (a fresh copy per test), without its price table: a test
    edits its rules by hand, and the table would contradict the edit (profile/semantics.py)."""
    data = copy.deepcopy(parse_yaml(EXAMPLE.read_text(encoding="utf-8")))
    del data["measurements"]
    return data


@pytest.fixture
def priced(example_path: Path) -> dict[str, Any]:
    """The example profile with its price tables (which ``example_data`` leaves out), unsealed:
    decisions[0] is TP 2 ``allreduce`` (one-shot to 448 KiB, two-shot to 7 MiB, then NCCL), priced by
    measurements[0]."""
    data = parse_yaml(example_path.read_text(encoding="utf-8"))
    data.pop("digest", None)
    return data


@pytest.fixture
def write_profile(tmp_path: Path) -> Callable[..., Path]:
    """``write_profile(data, name="profile.yaml", seal=True)``: YAML file in tmp_path, digest fixed
    up unless ``seal=False`` (so a test can change content without tripping the digest check)."""

    def write(data: Any, name: str = "profile.yaml", seal: bool = True) -> Path:
        if seal:
            data = {**data, "digest": compute_digest(data)}
        path = tmp_path / name
        path.write_text(to_yaml(data), encoding="utf-8")
        return path

    return write
