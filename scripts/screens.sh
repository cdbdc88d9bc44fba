#!/usr/bin/env bash
# What a person sees at 80 and 200 columns, saved as text under docs/screens/ (reviewed in a diff):
# the probe's closing summary (a replay of the bundled 2x H200 evidence), its refusal on the real
# one-GPU H100 capture (no requested TP size fits), its preflight on the synthetic 8x H100 NVSwitch
# capture, and recommend --explain on the bundled H200 profile (vLLM, untimed default) and the
# synthetic PCIe profile (vLLM, no knobs: the fused kernels are refused on SM 12.0).
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
  COLUMNS=$columns topo-gate probe --from tests/fixtures/captures/h100-x1.real.json --model llama-3.1-70b \
    --out "$scratch/p.yaml" >"$out/probe-refusal-$columns.txt" 2>&1 || true
  # The preflight is what the probe prints before its first trial. No GPU is visible to the trials
  # (CUDA_VISIBLE_DEVICES=""), so none runs here, on a GPU node either: the screen ends where the
  # trials would start, after the planner's time estimate. It says what this machine has installed.
  (cd "$scratch" && CUDA_VISIBLE_DEVICES="" COLUMNS=$columns topo-gate probe \
    --from "$OLDPWD/tests/fixtures/captures/h100-sxm-nvswitch-x8.synthetic.json" --model llama-3.1-70b \
    --out p8.yaml 2>&1 || true) | awk '{ print } /rounds are timed\)/ { exit }' \
    >"$out/probe-preflight-nvswitch-$columns.txt"
  sed -i "s|$PWD/||g" "$out/probe-preflight-nvswitch-$columns.txt"
  COLUMNS=$columns topo-gate recommend "$h200.yaml" --tp 2 --launcher vllm --model llama-3-70b --explain \
    >"$out/recommend-explain-h200-vllm-$columns.txt" 2>&1
  COLUMNS=$columns topo-gate recommend "$pcie" --tp 2 --launcher vllm --model qwen3-32b --explain \
    >"$out/recommend-explain-pcie-vllm-$columns.txt" 2>&1
done
echo "wrote $out/"
