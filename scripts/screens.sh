#!/usr/bin/env bash
# What a person sees at 80 and 200 columns, saved as text under docs/screens/ (reviewed in a diff):
# the probe's closing summary (a replay of the bundled 2x H200 evidence) and recommend --explain on
# the bundled H200 profile (vLLM, untimed default) and the synthetic PCIe profile (vLLM, a plan).
#
#   bash scripts/screens.sh [OUT_DIR]      # default docs/screens
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/screens}"
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
h200=profiles/h200-x2/h7168-run1
pcie=profiles/examples/synthetic-rtxpro6000-pcie-x4.yaml
for columns in 80 200; do
  COLUMNS=$columns topo-gate probe --replay "$h200.evidence.json" --out "$scratch/h200.yaml" \
    >"$out/probe-summary-$columns.txt" 2>&1
  # The scratch path is this run's own: say what it stands for instead.
  sed -i "s|$scratch/|./|g" "$out/probe-summary-$columns.txt"
  COLUMNS=$columns topo-gate recommend "$h200.yaml" --tp 2 --launcher vllm --model llama-3-70b --explain \
    >"$out/recommend-explain-h200-vllm-$columns.txt" 2>&1
  COLUMNS=$columns topo-gate recommend "$pcie" --tp 2 --launcher vllm --model qwen3-32b --explain \
    >"$out/recommend-explain-pcie-vllm-$columns.txt" 2>&1
done
echo "wrote $out/"
