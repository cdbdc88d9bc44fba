#!/usr/bin/env bash
# Type-check the package with mypy as configured in pyproject.toml ([tool.mypy]): strict on the
# modules listed in its strict override, mypy's default strictness on the rest of topo_gate/.
# Run inside the dev environment (pip install -e ".[test]", which pins mypy and the PyYAML stubs).
# Extra arguments go to mypy, e.g. scripts/typecheck.sh --no-incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m mypy --version
python -m mypy "$@"
