#!/usr/bin/env bash
# First-party vLLM measurements for servecap's corpus (docs/validation.md, "First-party vLLM rows"):
# one catalog model (random dummy weights: the step times are the real model's) on one GPU,
# vLLM's own client (`vllm bench serve`), random 1,024-token prompts and 128 output tokens
# (--ignore-eos: every request generates exactly 128), a single stream, a concurrency sweep and
# Poisson rates. Needs vLLM installed; writes the GPU line, versions, the server log and one JSON
# (and the client's text output) per run to OUT_DIR.
#
#   OUT_DIR=/tmp/out bash benchmarks/vllm_sweep/run.sh            # the H100 sweep (Llama-3.1-8B)
#   OUT_DIR=/tmp/out MODEL=meta-llama--Llama-3.1-70B QUANT=fp8 \
#     RUNS="warmup:100:8:c8 c1:1:6:c1 c64:4:128:c64 r2:6:64:r2" bash benchmarks/vllm_sweep/run.sh
#
# MODEL: a catalog model (src/servecap/catalog/data/models/<MODEL>.json); QUANT: bf16 or fp8
# (make_model_dir.py); SERVE_ARGS: extra `vllm serve` arguments; RUNS: space-separated runs
# NAME:SEED:PROMPTS:LOAD with LOAD cN (N concurrent users) or rR (Poisson, R requests/s), one
# seed per run so runs never repeat a prompt; AFTER_RUN: a command run after each run (to save
# what is done so far).
# DATASET_ARGS: `vllm bench serve` dataset arguments in place of the random 1,024/128 prompts (e.g.
# the prefix-repetition dataset for a prefix-cache or KV-offload run); PREFIX_CACHING=1 keeps vLLM's
# prefix cache on (off by default, so that random prompts measure compute only); METRICS=1 saves the
# server's Prometheus /metrics before the first run (metrics-start.txt) and after each run
# (NAME.metrics.txt): real captures for `servecap monitor`'s readers. ONLY_RUNS: run only these
# names (and the warm-up) of RUNS, to finish a sweep that a lease cut short.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT_DIR="${OUT_DIR:?set OUT_DIR}"
MODEL="${MODEL:-meta-llama--Llama-3.1-8B}"
QUANT="${QUANT:-bf16}"
SERVE_ARGS="${SERVE_ARGS:-}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-8192}"
MODEL_DIR="${MODEL_DIR:-/tmp/servecap-model}"
PORT="${PORT:-8000}"
PY="${PY:-python3}"
AFTER_RUN="${AFTER_RUN:-true}"
DATASET_ARGS="${DATASET_ARGS:---dataset-name random --random-input-len 1024 --random-output-len 128}"
PREFIX_CACHING="${PREFIX_CACHING:-0}"
METRICS="${METRICS:-0}"
if [ "$PREFIX_CACHING" = 1 ]; then CACHE_ARG=--enable-prefix-caching; else CACHE_ARG=--no-enable-prefix-caching; fi
# the H100 sweep of 2026-11-25 (docs/validation.md)
RUNS="${RUNS:-warmup:100:8:c8 c1:1:16:c1 c4:2:48:c4 c16:3:160:c16 c64:4:384:c64 c256:5:512:c256 r8:6:160:r8 r24:7:240:r24}"
mkdir -p "$OUT_DIR"
# vLLM 0.26.0 imports FlashInfer at engine start to decide on its top-p/top-k sampler; without
# FlashInfer installed that import fails the engine. The benchmark's requests use neither top-p
# nor top-k, so the PyTorch sampler serves them the same: turn the FlashInfer one off then.
"$PY" -c "import flashinfer" 2>/dev/null || export VLLM_USE_FLASHINFER_SAMPLER=0
"$PY" "$HERE/make_model_dir.py" "$MODEL" "$MODEL_DIR" "$QUANT" || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT_DIR/gpu.csv" 2>&1
"$PY" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" > "$OUT_DIR/versions.txt" 2>&1
echo "model $MODEL quant $QUANT max_model_len $MAX_MODEL_LEN serve_args $SERVE_ARGS VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-}" >> "$OUT_DIR/versions.txt"
# shellcheck disable=SC2086  # SERVE_ARGS is a list of arguments
"$PY" -m vllm.entrypoints.cli.main serve "$MODEL_DIR" --load-format dummy --max-model-len "$MAX_MODEL_LEN" \
  --port "$PORT" --seed 0 $CACHE_ARG $SERVE_ARGS > "$OUT_DIR/server.log" 2>&1 &
SERVER=$!
stop_server() {  # SIGTERM, up to 30 s for a clean shutdown, then SIGKILL the server and its children
  kill "$SERVER" 2>/dev/null || return 0
  for _ in $(seq 1 30); do kill -0 "$SERVER" 2>/dev/null || break; sleep 1; done
  pkill -KILL -P "$SERVER" 2>/dev/null
  kill -KILL "$SERVER" 2>/dev/null
  wait "$SERVER" 2>/dev/null
}
trap stop_server EXIT
trap 'exit 143' TERM INT  # so that a timeout still stops the server
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "vllm serve exited"; tail -40 "$OUT_DIR/server.log"; exit 1; }
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "vllm serve not ready"; tail -40 "$OUT_DIR/server.log"; exit 1; }
echo "$MODEL: server ready after ${SECONDS}s"
save_metrics() { [ "$METRICS" = 1 ] && curl -sf "http://127.0.0.1:$PORT/metrics" > "$OUT_DIR/$1"; return 0; }
save_metrics metrics-start.txt
# shellcheck disable=SC2086  # DATASET_ARGS is a list of arguments
bench() {  # name, then vllm bench serve arguments
  local name=$1; shift
  "$PY" -m vllm.entrypoints.cli.main bench serve --backend vllm --model "$MODEL_DIR" --port "$PORT" \
    $DATASET_ARGS --ignore-eos \
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
    --save-result --result-dir "$OUT_DIR" --result-filename "$name.json" "$@" > "$OUT_DIR/$name.txt" 2>&1
  echo "$name rc=$? at ${SECONDS}s $(grep -E 'Output token throughput|Median TTFT|Median TPOT' "$OUT_DIR/$name.txt" | tr -s ' ' | tr '\n' ';')"
}
for run in $RUNS; do
  IFS=: read -r name seed prompts load <<< "$run"
  if [ -n "${ONLY_RUNS:-}" ] && [ "$name" != warmup ]; then
    case " $ONLY_RUNS " in *" $name "*) ;; *) continue ;; esac
  fi
  case "$load" in
    c*) bench "$name" --seed "$seed" --num-prompts "$prompts" --max-concurrency "${load#c}" ;;
    r*) bench "$name" --seed "$seed" --num-prompts "$prompts" --request-rate "${load#r}" ;;
    *) echo "run $run: load $load is neither cN nor rR"; exit 1 ;;
  esac
  save_metrics "$name.metrics.txt"
  eval "$AFTER_RUN"
done
echo "$MODEL: done after ${SECONDS}s"
