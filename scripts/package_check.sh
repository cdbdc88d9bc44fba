#!/usr/bin/env bash
# What a user installs: build the sdist and the wheel (the wheel from the sdist), check both with
# twine, check the wheel holds the knob manifests and py.typed, then install the wheel alone (no
# extras) into a fresh venv and run the README's replay quickstart there.
# Needs build and twine (the test extra pins them); the fresh venv installs the runtime dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
python -m twine check --strict "$work"/dist/*
wheels=("$work"/dist/*.whl)
[ ${#wheels[@]} -eq 1 ] || { echo "package_check: expected one wheel, found ${#wheels[@]}" >&2; exit 1; }
wheel=${wheels[0]}

# Every knob manifest in the source tree, and py.typed, must be in the wheel.
python - "$wheel" <<'PY'
import sys
import zipfile
from pathlib import Path

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
wanted = {p.as_posix() for p in Path("topo_gate/launchers/data").glob("*.json")} | {"topo_gate/py.typed"}
missing = sorted(wanted - names)
if missing or len(wanted) < 2:
    sys.exit(f"package_check: the wheel lacks {missing or 'the knob manifests'}")
print(f"wheel holds {len(wanted) - 1} knob manifests and py.typed")
PY

python -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel"
# The README's quickstart, read from the README so the check follows it: the first
# "topo-gate probe --replay EVIDENCE --out PROFILE" in its "## Quickstart" section.
quickstart=$(python - <<'PY'
import re
from pathlib import Path

readme = Path("README.md").read_text(encoding="utf-8")
section = readme.split("\n## Quickstart", 1)[1].split("\n## ", 1)[0]
match = re.search(r"topo-gate probe --replay (\S+) --out (\S+)", section)
if match is None:
    raise SystemExit("package_check: no 'topo-gate probe --replay EVIDENCE --out PROFILE' in the README's Quickstart")
print(match.group(1), match.group(2))
PY
)
read -r evidence out <<<"$quickstart"
# Run outside the checkout, so nothing can be imported from the source tree.
cd "$work"
venv_bin="$work/venv/bin"
location=$("$venv_bin/python" -c "import topo_gate; print(topo_gate.__file__)")
case "$location" in
  "$work/venv/"*) ;;
  *) echo "package_check: topo_gate imported from $location, not the wheel" >&2; exit 1 ;;
esac
if "$venv_bin/python" -c "import pytest" 2>/dev/null; then
  echo "package_check: the fresh venv has the test extra" >&2
  exit 1
fi
version=$("$venv_bin/python" -c "import topo_gate; print(topo_gate.__version__)")
[ "$("$venv_bin/topo-gate" --version)" = "topo-gate, version $version" ]
[ "$(basename "$wheel")" = "topo_gate-$version-py3-none-any.whl" ]
echo "+ topo-gate probe --replay $evidence --out $out"
"$venv_bin/topo-gate" probe --replay "$repo/$evidence" --out "$work/$out"
"$venv_bin/topo-gate" validate "$work/$out"
echo "package_check: OK (topo-gate $version: sdist, wheel, twine check, quickstart from the wheel)"
