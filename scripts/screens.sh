#!/usr/bin/env bash
# What a person sees at 80 and 200 columns, saved as text under docs/screens/ (reviewed in a diff):
# the probe's closing summary (a replay of the bundled 2x H200 evidence), its refusal on the real
# one-GPU H100 capture (no requested TP size fits), its preflight on the synthetic 8x H100 NVSwitch
# capture, and recommend --explain on the bundled H200 profile (vLLM, untimed default) and the
# synthetic PCIe profile (vLLM, no knobs: the fused kernels are refused on SM 12.0),
# and an `ab` run with an env arm (--arm trtllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm, no profile).
# The ab screen's benchmark is the tests' stand-in (tests/ab/data/fake_bench.py) under the name
# `vllm`, writing vLLM 0.33.0's latency result: its numbers are the scenario's below, not a measurement.
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
# The stand-in as `vllm bench latency`: the arm it is in follows from the variable it sees.
mkdir -p "$scratch/bin"
printf '#!/bin/sh\nexec python3 "%s" "$@"\n' "$PWD/tests/ab/data/fake_bench.py" >"$scratch/bin/vllm"
chmod +x "$scratch/bin/vllm"
ab_scenario() {
  cat >"$scratch/scenario.json" <<EOF
{"state": "$scratch/state-$1.json", "pidfile": "$scratch/bench.pid",
 "arms": [{"arm": "trtllm", "env": {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}}],
 "values": {"default": [1.842, 1.838, 1.846, 1.835, 1.841, 1.844],
            "trtllm": [1.897, 1.893, 1.901, 1.889, 1.896, 1.899]},
 "template": "$PWD/tests/ab/data/vllm-latency.json", "set": ["avg_latency"], "result_flag": "--output-json"}
EOF
}
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
  ab_scenario "$columns"
  # Exit 1 is the verdict (a regression), not a failure of the script.
  (cd "$scratch" && COLUMNS=$columns PATH="$scratch/bin:$PATH" FAKE_BENCH_SCENARIO="$scratch/scenario.json" \
    topo-gate ab --arm trtllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm --out "ab-$columns.json" -- \
    vllm bench latency --model meta-llama/Llama-3.1-70B-Instruct -tp 8 --batch-size 8 --output-len 128) \
    >"$out/ab-env-arm-$columns.txt" 2>&1 || [ $? -eq 1 ]
  sed -i "s|$scratch/|./|g" "$out/ab-env-arm-$columns.txt"
done
echo "wrote $out/"
