#!/usr/bin/env bash
# What a person sees at 80 and 200 columns, saved as text under docs/screens/ (reviewed in a diff).
# The screens are the golden cases of tests/golden/cases.yaml marked `docs`, rendered through the real
# CLI by the same command that writes the goldens, so the docs and the tests cannot drift apart.
#
#   bash scripts/screens.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tests/golden/regenerate.py
