#!/usr/bin/env bash
# The GPU runs behind profiles/h200-x2/ and profiles/h200-x1/, in one command per machine, so they can
# be repeated: `bash scripts/gpu_validation.sh x2` on 2x H200 (two back-to-back probes through
# benchmarks/probe_wall.py, then the decode-step benchmark on the first new profile), `... x2-decode` there
# (the decode-step benchmark alone, on the bundled profile), `... x2-tests` there (the GPU tests and one
# probe), `... x1` on 1x H200. Expects the offline FlashInfer bundle under .gpu/ (see ../shared/gpu/README.md)
# and, for SGLang's custom all-reduce v2, the bundle of scripts/sglang_v2_bundle.py under build/sglang-v2/;
# writes everything under $OUT/run, packed as $OUT/results.tgz, with a summary table last.
set -u
mode=${1:?usage: gpu_validation.sh x2|x2-decode|x2-tests|x1}
# Never NVLink multicast on a shared host (DESIGN.md principle 5); the runner sets these for its
# workers too, this covers every other process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/apache_tvm_ffi-*.whl \
  && tar -xJf .gpu/flashinfer-*.tar.xz -C /tmp/site || exit 1
export PYTHONPATH=/tmp/site:$PWD
if [ -d build/sglang-v2 ]; then  # custom_v2_sglang finds SGLang's kernels here (docs/backends.md)
  export TOPO_GATE_SGLANG_BUNDLE=$PWD/build/sglang-v2 SGLANG_JIT_CACHE_DIR=/tmp/sglang-jit
fi
run=${OUT:?}/run
mkdir -p "$run"

step() {  # step LIMIT_S NAME CMD...: run CMD (killed after LIMIT_S), log to $run/NAME.log, record exit and wall
  local limit=$1 name=$2 start status
  shift 2
  start=$EPOCHREALTIME
  timeout --kill-after=10 "$limit" "$@" >"$run/$name.log" 2>&1
  status=$?
  awk -v n="$name" -v s="$status" -v a="$start" -v b="$EPOCHREALTIME" \
    'BEGIN { printf "| %s | %s | %.1f |\n", n, s, b - a }' >>"$run/summary.md"
  tar -czf "$OUT/results.tgz" -C "$run" .  # after every step: a call cut off at its limit keeps the rest
}

decode_steps() {  # decode_steps PROFILE: benchmarks/decode_step.py (docs/trials.md "Decode-step benchmark")
  local bench=(python3 -m torch.distributed.run --nproc-per-node 2 benchmarks/decode_step.py --profile "$1" --nccl)
  if [ -n "${TOPO_GATE_SGLANG_BUNDLE:-}" ]; then
    step 120 sglang-v2-prebuild python3 scripts/sglang_v2_bundle.py prebuild --world-sizes 2 --with-flashinfer
  fi
  # One process pair for the three launchers on DeepSeek-V3 (start-up paid once), vLLM and TensorRT-LLM
  # on their measurable chains; then SGLang on a Llama, whose default is custom all-reduce v2.
  step 300 decode-step-dsv3 "${bench[@]}" --launcher sglang,vllm,trtllm --model deepseek-v3 \
    --env vllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm --env trtllm:TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1 \
    --out "$run/decode-step-dsv3.json"
  step 180 decode-step-llama "${bench[@]}" --launcher sglang --model llama-3.1-70b --out "$run/decode-step-llama.json"
}

printf '| step | exit | wall s |\n|---|---:|---:|\n' >"$run/summary.md"
nvidia-smi topo -m >"$run/nvidia-smi-topo.txt" 2>&1
step 60 capture python3 -m topo_gate capture "$run/capture.json" --note "Recorded by topo-gate capture on the lent $mode H200 machine."
step 30 topo python3 -m topo_gate topo --from "$run/capture.json"
if [ "$mode" = x2 ]; then
  # Two back-to-back probes (wall time, phases, agreement), then the benchmark's profiles renamed.
  step 300 probes python3 benchmarks/probe_wall.py probe --runs 2 --prefix h7168-run --out "$run" -- --tp 2 --hidden 7168
  profile=$run/h7168-run1.yaml
  [ -f "$profile" ] || profile=profiles/h200-x2/h7168-run1.yaml
  decode_steps "$profile"
elif [ "$mode" = x2-decode ]; then
  decode_steps profiles/h200-x2/h7168-run1.yaml
elif [ "$mode" = x2-tests ]; then
  step 240 gpu-tests python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider -x
  step 150 probe-1 python3 -m topo_gate probe --tp 2 --hidden 7168 --out "$run/h7168-run1.yaml" --evidence "$run/h7168-run1.evidence.json"
else
  step 120 probe-tp12 python3 -m topo_gate probe --tp 1,2 --hidden 7168 --out "$run/tp1-2.yaml" --evidence "$run/tp1-2.evidence.json"
fi
cat "$run/summary.md"
tail -n 3 "$run"/*.log
