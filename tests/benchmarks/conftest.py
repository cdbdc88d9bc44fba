"""The decode-step benchmark's modules (``benchmarks/_decode_*.py``) and the launcher tests' price-table
builders (``tests/launchers``) on sys.path: the benchmark imports its helpers by name, as a script does."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "benchmarks", ROOT / "tests" / "launchers"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
