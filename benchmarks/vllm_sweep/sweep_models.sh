#!/usr/bin/env bash
# The H200 sweep (docs/validation.md, "First-party vLLM rows (H200)"): run.sh for each model in
# priority order, shorter sweeps than the H100 one, until DEADLINE_S seconds after the start;
# each model's results are packed into RESULTS/<name>.tgz after every run, so a model cut off
# by the deadline keeps the runs it finished. A model is skipped when less time is left than it
# needs to start and run a few points (start-up alone: 224 s for the 70B FP8 model, 105 s of it
# torch.compile, on a bare machine).
#
#   RESULTS=/tmp/out bash benchmarks/vllm_sweep/sweep_models.sh 560
#   RESULTS=/tmp/out MODELS="qwen3-30b-a3b llama31-8b-fp8" bash benchmarks/vllm_sweep/sweep_models.sh 500
#
# MODELS: the names to run, in the order below (default: all three).
# ONLY_RUNS (run.sh): the run names to do, e.g. the ones a lease cut short.
set -uo pipefail
DEADLINE_S="${1:?deadline in seconds}"
HERE="$(cd "$(dirname "$0")" && pwd)"
RESULTS="${RESULTS:?set RESULTS}"
WORK="${WORK:-/tmp/servecap-sweep}"
MODELS="${MODELS:-llama31-70b-fp8 qwen3-30b-a3b llama31-8b-fp8}"  # llama31-8b-fp8-offload: by name
mkdir -p "$RESULTS" "$WORK"
gpu_free() {  # wait until the GPU's memory is released by the last server (at most 40 s)
  local used=""
  for _ in $(seq 1 40); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    [ "${used:-99999}" -lt 2000 ] && return 0
    sleep 1
  done
  echo "GPU memory still in use: ${used} MiB"
}
model() {  # name, seconds it needs at least, then run.sh's settings
  local name=$1 need=$2; shift 2
  case " $MODELS " in *" $name "*) ;; *) return ;; esac
  local left=$((DEADLINE_S - SECONDS))
  if [ "$left" -lt "$need" ]; then echo "skip $name: ${left}s left, needs $need"; return; fi
  echo "=== $name at ${SECONDS}s (${left}s left)"
  gpu_free
  env "$@" OUT_DIR="$WORK/$name" MODEL_DIR="$WORK/model-$name" \
    AFTER_RUN="tar -czf $RESULTS/$name.tgz -C $WORK $name" \
    timeout -k 10 $((left - 5)) bash "$HERE/run.sh"
  echo "$name rc=$? at ${SECONDS}s"
  tar -czf "$RESULTS/$name.tgz" -C "$WORK" "$name"
}
model llama31-70b-fp8 200 PORT=8000 MODEL=meta-llama--Llama-3.1-70B QUANT=fp8 \
  RUNS="warmup:100:8:c8 c1:1:6:c1 c4:2:16:c4 c16:3:48:c16 c64:4:128:c64 r2:6:64:r2 c256:5:256:c256"
model qwen3-30b-a3b 130 PORT=8001 MODEL=Qwen--Qwen3-30B-A3B QUANT=bf16 \
  RUNS="warmup:100:8:c8 c1:1:8:c1 c16:3:64:c16 c64:4:128:c64 r8:6:96:r8 c256:5:256:c256 c4:2:16:c4"
model llama31-8b-fp8 110 PORT=8002 MODEL=meta-llama--Llama-3.1-8B QUANT=fp8 \
  RUNS="warmup:100:8:c8 c1:1:8:c1 c16:3:64:c16 c64:4:128:c64 c256:5:256:c256 r8:6:96:r8"
# Vllm's CPU KV offloading (--kv-offloading-size, the native connector) behind a small GPU cache
# (--gpu-memory-utilization 0.2: ~15 GiB of KV, ~115k tokens) with the prefix cache on: 48 shared
# 4,096-token prefixes (197k tokens: more than the GPU holds, less than the 32 GiB CPU tier), each
# sent 6 times with its own 256-token suffix in shuffled order. /metrics after the run carries
# vllm:prompt_tokens_by_source (local_compute, local_cache_hit, external_kv_transfer).
model llama31-8b-fp8-offload 100 PORT=8003 MODEL=meta-llama--Llama-3.1-8B QUANT=fp8 PREFIX_CACHING=1 \
  METRICS=1 SERVE_ARGS="--gpu-memory-utilization 0.2 --kv-offloading-size 32" \
  DATASET_ARGS="--dataset-name prefix_repetition --prefix-repetition-prefix-len 4096 --prefix-repetition-suffix-len 256 --prefix-repetition-num-prefixes 48 --prefix-repetition-output-len 64" \
  RUNS="p16:7:288:c16"
echo "all done at ${SECONDS}s"
