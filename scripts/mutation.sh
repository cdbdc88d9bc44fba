#!/usr/bin/env bash
# Mutation testing of the fail-closed core (docs/mutation.md). Needs cosmic-ray in the active env:
#   pip install -e ".[mutation]"
# Usage: scripts/mutation.sh [--jobs N] [--min-rate 90] [MODULE-SUBSTRING ...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec python scripts/mutation.py "$@"
