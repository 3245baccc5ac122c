"""Corpus rows from one model's sweep results: each run's saved ``vllm bench serve`` JSON
(``benchmarks/data/vllm_sweep_<gpu>/<model>/<run>.json``) becomes one ``[[rows]]`` table of the
validation corpus's TOML (``src/servecap/validation/schema.py``), printed on stdout.

    python3 benchmarks/vllm_sweep/to_corpus.py benchmarks/data/vllm_sweep_h200/qwen3-30b-a3b \\
        --id-prefix qwen3-30b-a3b-h200-bf16 --gpu H200-SXM --model Qwen/Qwen3-30B-A3B \\
        --weights-dtype bf16 > rows.toml

Each value is the JSON's number rounded to two decimals, which is what the client prints
(``printed`` keeps that text). The warm-up run is skipped: its first requests meet a cold
server. The workload is the one ``run.sh`` sends: random 1,024-token prompts and exactly 128
output tokens; a run named ``cN`` is closed-loop at concurrency N, ``rR`` open-loop Poisson at R
requests/s.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

PROMPT_TOKENS = 1024
OUTPUT_TOKENS = 128
# (metric, statistic, key in the client's JSON, unit)
MEASURED = [
    ("output_throughput", "total", "output_throughput", "tok/s"),
    ("request_throughput", "total", "request_throughput", "req/s"),
    ("ttft", "mean", "mean_ttft_ms", "ms"),
    ("ttft", "median", "median_ttft_ms", "ms"),
    ("ttft", "p99", "p99_ttft_ms", "ms"),
    ("tpot", "mean", "mean_tpot_ms", "ms"),
    ("tpot", "median", "median_tpot_ms", "ms"),
    ("tpot", "p99", "p99_tpot_ms", "ms"),
    ("e2e", "mean", "mean_e2el_ms", "ms"),
    ("e2e", "median", "median_e2el_ms", "ms"),
]
RUN_NAME = re.compile(r"^(?P<kind>[cr])(?P<load>\d+(?:\.\d+)?)$")


def run_order(path: Path) -> tuple[str, float]:
    match = RUN_NAME.match(path.stem)
    assert match is not None
    return (match["kind"], float(match["load"]))


def rows_toml(run_dir: Path, *, id_prefix: str, gpu: str, model: str, weights_dtype: str) -> str:
    runs = sorted((p for p in run_dir.glob("*.json") if RUN_NAME.match(p.stem)), key=run_order)
    if not runs:
        raise SystemExit(f"{run_dir}: no cN.json or rR.json run results")
    out: list[str] = []
    for path in runs:
        result = json.loads(path.read_text())
        match = RUN_NAME.match(path.stem)
        assert match is not None
        closed = match["kind"] == "c"
        num = int(result["num_prompts"])
        if closed:
            load_flag = f"--max-concurrency {int(result['max_concurrency'])}"
            workload = f'mode = "closed"\nconcurrency = {int(result["max_concurrency"])}'
        else:
            load_flag = f"--request-rate {float(result['request_rate']):g}"
            workload = f'mode = "open"\nrate_per_s = {float(result["request_rate"])}'
        if int(result["completed"]) != num or int(result.get("failed", 0)) != 0:
            raise SystemExit(f"{path}: {result['completed']} of {num} requests completed; not a row")
        rel = path.as_posix()
        rel = rel[rel.index("benchmarks/") :] if "benchmarks/" in rel else rel
        out.append(
            f"""[[rows]]
id = "{id_prefix}-{path.stem}-{PROMPT_TOKENS}-{OUTPUT_TOKENS}"
gpu = "{gpu}"
model = "{model}"
weights_dtype = "{weights_dtype}"
kv_cache_dtype = "bf16"
tp = 1
where = "{rel} (run '{path.stem}': {load_flag}, --num-prompts {num})"
assumptions = []
[rows.workload]
prompt_tokens = {PROMPT_TOKENS}
output_tokens = {OUTPUT_TOKENS}
lengths = "fixed"
{workload}
num_requests = {num}
"""
        )
        for metric, statistic, key, unit in MEASURED:
            printed = f"{float(result[key]):.2f}"
            out.append(
                f"""[[rows.measured]]
metric = "{metric}"
statistic = "{statistic}"
value = {float(printed)}
unit = "{unit}"
printed = "{printed}"
"""
            )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--id-prefix", required=True)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--weights-dtype", required=True, choices=["bf16", "fp8"])
    args = parser.parse_args()
    print(
        rows_toml(
            args.run_dir,
            id_prefix=args.id_prefix,
            gpu=args.gpu,
            model=args.model,
            weights_dtype=args.weights_dtype,
        )
    )


if __name__ == "__main__":
    main()
