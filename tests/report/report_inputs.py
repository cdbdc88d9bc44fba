"""Paths of the bundled 2x H200 runs the report tests render."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "profiles" / "h200-x2"
RUN1 = H200 / "h7168-run1.evidence.json"
RUN2 = H200 / "h7168-run2.evidence.json"
PROFILE1 = H200 / "h7168-run1.yaml"
