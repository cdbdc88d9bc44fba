"""Render every golden screen (tests/golden/cases.yaml) and the docs' copies: ``python tests/golden/regenerate.py``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from golden_screens import REPO, write_all  # noqa: E402

if __name__ == "__main__":
    for path in write_all():
        print(f"wrote {path.relative_to(REPO)}")
