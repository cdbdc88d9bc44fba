#!/usr/bin/env bash
# Run every plan topo-gate emits through the pinned launchers' own argument parsers and env readers
# (scripts/launcher_parsers.py), then the plugin tests against the real launchers (tests/plugins).
#
# SGLang 0.5.23 and vLLM 0.33.0 go into their own venv (.venv-parsers) with --no-deps, next to the CPU
# build of torch and the pure-Python packages their argument parsing imports
# (scripts/launcher-parsers-requirements.txt): their full dependency sets pull CUDA builds. The venv is
# reused while that file is unchanged; PARSERS_VENV moves it. Needs only PyPI.
#
# Then the conformance run (scripts/conformance.py): each supported release's own dispatch code on CPU
# against topo-gate's route model -- vLLM 0.33.0 (the venv's), vLLM 0.34.0 and FlashInfer 0.7.2.post1 /
# 0.7.4 (each installed --no-deps into a folder of the venv and put first on PYTHONPATH), and SGLang
# 0.5.23 where scripts/conformance_sglang.py exists -- and the planted-bug tests it must catch.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${PARSERS_VENV:-.venv-parsers}"
requirements=scripts/launcher-parsers-requirements.txt
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

started=$SECONDS
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q --no-deps -r "$requirements"
  echo "$want" >"$stamp"
fi
# topo-gate itself, editable, so the entry points the plugin tests discover are this checkout's.
"$venv/bin/python" -m pip install -q --no-deps -e .
echo "launcher parsers: venv ready in $((SECONDS - started)) s"

# vLLM picks its platform from the installed packages unless told; the CPU one parses without a GPU.
export VLLM_TARGET_DEVICE=cpu
started=$SECONDS
"$venv/bin/python" scripts/launcher_parsers.py
echo "launcher parsers: plans checked in $((SECONDS - started)) s"
started=$SECONDS
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/plugins tests/launchers/test_real_parsers.py \
  tests/launchers/test_served_model_real.py
echo "launcher parsers: plugin tests in $((SECONDS - started)) s"

# The knob manifests the planners and route models read must be what scripts/extract_knobs.py reads
# from the pinned releases' own files (tests/launchers/test_manifests_current.py needs them on disk).
started=$SECONDS
sources="$venv/launcher-sources"
# Every modelled release (topo_gate/launchers/knobs.py), one download per release of a package.
for release in sglang==0.5.23 vllm==0.33.0 vllm==0.34.0 flashinfer-python==0.7.2.post1 flashinfer-python==0.7.4; do
  "$venv/bin/python" -m pip download -q --no-deps -d "$sources" "$release"
done
"$venv/bin/python" - "$sources" <<'PY'
import sys, zipfile
from pathlib import Path

sources = Path(sys.argv[1])
for wheel in sources.glob("flashinfer_python-*.whl"):  # each below a folder named for its release
    version = wheel.name.split("-")[1]
    zipfile.ZipFile(wheel).extract("flashinfer/comm/trtllm_ar.py", sources / f"flashinfer_python-{version}")
PY
TOPO_GATE_LAUNCHER_SOURCES="$sources" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  tests/launchers/test_manifests_current.py tests/launchers/test_cited_spans_current.py \
  tests/launchers/test_release_watch.py
echo "launcher parsers: manifests and cited spans checked against the releases in $((SECONDS - started)) s"

# The conformance run: every release's own dispatch code against the route model (docs/launchers.md, Conformance).
# Each release runs in its own interpreter (the adapters stand in modules of the launchers' packages).
release_dir() { # release_dir PACKAGE VERSION: the package installed --no-deps in a folder of the venv,
  # from the wheel downloaded above
  local dir="$venv/releases/$1-$2"
  if [[ ! -f "$dir/.installed" ]]; then
    rm -rf "$dir"
    "$venv/bin/python" -m pip install -q --no-deps --no-compile --target "$dir" \
      --no-index --find-links "$sources" "$1==$2" >&2
    touch "$dir/.installed"
  fi
  echo "$dir"
}
failed=0
conformance() { # conformance LABEL PYTHONPATH-PREFIX ADAPTER: run one release, keep going on failure
  local started=$SECONDS
  PYTHONPATH="$2" "$venv/bin/python" scripts/conformance.py "$3" || failed=1
  echo "conformance: $1 in $((SECONDS - started)) s"
}
started=$SECONDS
vllm_next="$(release_dir vllm 0.34.0)"
flashinfer_old="$(release_dir flashinfer-python 0.7.2.post1)"
flashinfer_new="$(release_dir flashinfer-python 0.7.4)"
echo "conformance: releases ready in $((SECONDS - started)) s"
all_started=$SECONDS
conformance "vLLM 0.33.0" "" vllm
conformance "vLLM 0.34.0" "$vllm_next" vllm
conformance "FlashInfer 0.7.2.post1" "$flashinfer_old" flashinfer
conformance "FlashInfer 0.7.4" "$flashinfer_new" flashinfer
if [[ -f scripts/conformance_sglang.py ]]; then
  conformance "SGLang 0.5.23" "" sglang
fi
planted() { # planted LABEL PYTHONPATH-PREFIX [PYTEST-ARGS]: the planted route-model bugs the run must report
  local started=$SECONDS
  PYTHONPATH="$2" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/launchers/test_conformance.py "${@:3}" \
    || failed=1
  echo "conformance: planted bugs with $1 in $((SECONDS - started)) s"
}
planted "vLLM 0.33.0" ""
planted "vLLM 0.34.0" "$vllm_next"
planted "FlashInfer 0.7.4" "$flashinfer_new" -k FlashInfer
if [[ -f tests/launchers/test_conformance_sglang.py ]]; then
  started=$SECONDS
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/launchers/test_conformance_sglang.py || failed=1
  echo "conformance: planted bugs with SGLang 0.5.23 in $((SECONDS - started)) s"
fi
echo "conformance: all in $((SECONDS - all_started)) s"

# The vLLM plugin inside vLLM 0.34.0: it plans with the 0.34.0 model there (0.33.0 ran above).
started=$SECONDS
PYTHONPATH="$vllm_next" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/plugins/test_real_launchers.py \
  -k "installed_release or does_not_model" || failed=1
echo "launcher parsers: the vLLM plugin inside vLLM 0.34.0 in $((SECONDS - started)) s"
exit "$failed"
