"""Where the topology tests' captures live (a plain module: conftest names collide across test folders)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
CAPTURES = HERE.parent / "fixtures" / "captures"
ALL_CAPTURES = sorted(CAPTURES.glob("*.json"))
