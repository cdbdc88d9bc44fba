"""The bundled v1.2 evidence example that the evidence checks' tests edit one field at a time.

``profiles/examples/synthetic-h200x2.evidence.json`` holds what a probe writes since v1.2 (a shared
worker session per run, ``after_sizes`` with the v1.1 ``after_larger_us`` beside them); the checks must
accept it as it is, so a refusal in a test is the edit's doing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.evidence.json"
BASE: dict[str, Any] = json.loads(EXAMPLE.read_text(encoding="utf-8"))


def transitioned(evidence: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The first result of run 0 with at least two ``after_sizes`` entries (and its index)."""
    results = evidence["runs"][0]["results"]
    return next((i, r) for i, r in enumerate(results) if len(r.get("after_sizes", [])) >= 2)


def written(tmp_path: Path, evidence: dict[str, Any]) -> Path:
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence), encoding="utf-8")
    return path
