"""fleet simulate, fleet plan, sweep (one request each, three interfaces).

The CLI rows build their fleet and workload from flags where the API takes the same fleet and
workload inline, so each row also checks that the flags and the files name the same fleet. The
sweep has no HTTP endpoint (it stores runs and spawns worker processes), so it has no row here.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.interfaces.harness import Case

MODEL = "meta-llama/Llama-3.1-8B"
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 8.0},
    "prompt_tokens": {"kind": "fixed", "value": 512},
    "output_tokens": {"kind": "fixed", "value": 64},
    "num_requests": 200,
}
PD_FLEET = {
    "pools": [
        {"name": "prefill", "model": MODEL, "gpu": "H100", "role": "prefill", "replicas": 1},
        {"name": "decode", "model": MODEL, "gpu": "H100", "role": "decode", "replicas": 1},
    ],
    "kv_link": {"kind": "roce"},
    "slo": {"ttft_ms": 500.0, "tpot_ms": None},
}
_DIR = Path(tempfile.mkdtemp(prefix="servecap-cases-fleet-"))
(_DIR / "pd.json").write_text(json.dumps(PD_FLEET), encoding="utf-8")
(_DIR / "workload.json").write_text(json.dumps(WORKLOAD), encoding="utf-8")

CASES: list[Case] = [
    Case(
        name="fleet-simulate-flags",
        cli=[
            "fleet",
            "simulate",
            "-m",
            MODEL,
            "-g",
            "H100",
            "--replicas",
            "2",
            "--router",
            "least-kv",
            "--rate",
            "8",
            "-p",
            "512",
            "-o",
            "64",
            "--num-requests",
            "200",
            "--seed",
            "3",
            "--ttft-slo-ms",
            "800",
        ],
        api=(
            "POST",
            "/api/v1/fleet/simulate",
            {
                "fleet": {
                    "pools": [{"model": MODEL, "gpu": "H100", "replicas": 2}],
                    "router": "least-kv",
                    "slo": {"ttft_ms": 800.0},
                },
                "workload": WORKLOAD,
                "seed": 3,
            },
        ),
    ),
    Case(
        name="fleet-simulate-pd-file",
        cli=[
            "fleet",
            "simulate",
            "--fleet",
            str(_DIR / "pd.json"),
            "--workload",
            str(_DIR / "workload.json"),
            "--seed",
            "5",
        ],
        api=("POST", "/api/v1/fleet/simulate", {"fleet": PD_FLEET, "workload": WORKLOAD, "seed": 5}),
    ),
    Case(
        name="fleet-simulate-autoscaled-flags",
        cli=[
            *("fleet", "simulate", "-m", MODEL, "-g", "H100", "--autoscaler", "keda-vllm", "--max-replicas", "3"),
            *("--cold-start", "instant", "--price-per-gpu-hour", "2", "--rate", "8", "-p", "512", "-o", "64"),
            *("--num-requests", "200", "--seed", "4"),
        ],
        api=(
            "POST",
            "/api/v1/fleet/simulate",
            {
                "fleet": {
                    "pools": [
                        {
                            "model": MODEL,
                            "gpu": "H100",
                            "autoscaler": {"preset": "keda-vllm", "min_replicas": 1, "max_replicas": 3},
                            "price_per_gpu_hour": 2.0,
                            "cold_start": "instant",
                        }
                    ]
                },
                "workload": WORKLOAD,
                "seed": 4,
            },
        ),
    ),
    Case(
        name="fleet-simulate-cache-replay",
        cli=[
            *(
                "fleet",
                "simulate",
                "-m",
                "Qwen/Qwen3-0.6B",
                "-g",
                "H100",
                "--replicas",
                "2",
                "--router",
                "precise-prefix",
            ),
            *("--trace", "sample:mooncake-conversation", "--time-scale", "0.5", "--fidelity", "cache-replay"),
        ],
        api=(
            "POST",
            "/api/v1/fleet/simulate",
            {
                "fleet": {
                    "pools": [{"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 2}],
                    "router": "precise-prefix",
                },
                "workload": {"arrival": {"kind": "trace", "path": "sample:mooncake-conversation", "time_scale": 0.5}},
                "fidelity": "cache-replay",
            },
        ),
    ),
    Case(
        name="fleet-plan-no-levers",
        cli=["fleet", "plan", "-m", MODEL, "-g", "H100", "--peak-rps", "4", "--levers", "none", "--seed", "1"],
        api=(
            "POST",
            "/api/v1/fleet/plan",
            {
                "plan": {
                    "model": MODEL,
                    "candidates": [{"gpu": "H100", "kv_cache_dtype": "auto"}],
                    "traffic": {"peak_rps": 4.0},
                    "levers": [],
                    "seed": 1,
                }
            },
        ),
    ),
    Case(
        name="fleet-plan-router-lever",
        cli=[
            "fleet",
            "plan",
            "-m",
            MODEL,
            "-g",
            "H100",
            "--peak-rps",
            "3",
            "--levers",
            "router,fp8-kv",
            "--router",
            "round-robin",
            "--slo-ttft-p99-s",
            "1.5",
        ],
        api=(
            "POST",
            "/api/v1/fleet/plan",
            {
                "plan": {
                    "model": MODEL,
                    "candidates": [{"gpu": "H100"}],
                    "traffic": {"peak_rps": 3.0},
                    "router": "round-robin",
                    "slo": {"ttft_s": {"p99": 1.5}},
                    "levers": ["router", "fp8-kv"],
                }
            },
        ),
    ),
]
