#!/usr/bin/env bash
# First-party vLLM measurements for servecap's corpus (docs/validation.md, "First-party vLLM rows"):
# Llama-3.1-8B (BF16, random dummy weights: the step times are the real model's) on one GPU,
# vLLM's own client (`vllm bench serve`), random 1,024-token prompts and 128 output tokens
# (--ignore-eos: every request generates exactly 128), a single stream, a concurrency sweep and
# two Poisson rates. Needs vLLM installed; writes the server log and one JSON per run to OUT_DIR.
#
#   OUT_DIR=/tmp/out bash benchmarks/vllm_sweep/run.sh
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT_DIR="${OUT_DIR:?set OUT_DIR}"
MODEL_DIR="${MODEL_DIR:-/tmp/servecap-model}"
PORT="${PORT:-8000}"
PY="${PY:-python3}"
mkdir -p "$OUT_DIR"
"$PY" "$HERE/make_model_dir.py" meta-llama--Llama-3.1-8B "$MODEL_DIR" || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT_DIR/gpu.csv" 2>&1
"$PY" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" > "$OUT_DIR/versions.txt" 2>&1
"$PY" -m vllm.entrypoints.cli.main serve "$MODEL_DIR" --load-format dummy --max-model-len 8192 \
  --port "$PORT" --seed 0 --no-enable-prefix-caching > "$OUT_DIR/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 1 360); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "vllm serve exited"; tail -40 "$OUT_DIR/server.log"; exit 1; }
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "vllm serve not ready"; tail -40 "$OUT_DIR/server.log"; exit 1; }
echo "server ready after ${SECONDS}s"
bench() {  # name, then vllm bench serve arguments
  local name=$1; shift
  "$PY" -m vllm.entrypoints.cli.main bench serve --backend vllm --model "$MODEL_DIR" --port "$PORT" \
    --dataset-name random --random-input-len 1024 --random-output-len 128 --ignore-eos \
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
    --save-result --result-dir "$OUT_DIR" --result-filename "$name.json" "$@" > "$OUT_DIR/$name.txt" 2>&1
  echo "$name rc=$? $(grep -E 'Output token throughput|Median TTFT|Median TPOT' "$OUT_DIR/$name.txt" | tr -s ' ' | tr '\n' ';')"
}
# a seed per run: runs never repeat a prompt (prefix caching is off as well)
bench warmup --seed 100 --num-prompts 8 --max-concurrency 8
bench c1 --seed 1 --num-prompts 16 --max-concurrency 1
bench c4 --seed 2 --num-prompts 48 --max-concurrency 4
bench c16 --seed 3 --num-prompts 160 --max-concurrency 16
bench c64 --seed 4 --num-prompts 384 --max-concurrency 64
bench c256 --seed 5 --num-prompts 512 --max-concurrency 256
bench r8 --seed 6 --num-prompts 160 --request-rate 8
bench r24 --seed 7 --num-prompts 240 --request-rate 24
echo "done after ${SECONDS}s"
