"""Simulator speed of a wide-EP replica: DeepSeek-V3 (FP8) on 16 H200 as attention DP 16 + EP 16
over 2 nodes (two-batch overlap, 32 redundant experts, and with MTP), against one node of 8 H200
at TP 8, the same chat requests at ~70% of each replica's simulated capacity. Prints simulated
requests per wall-clock second of each and the wall time per request of the wide replica over
the one-node replica (issue 30: within 2x).

    PYTHONPATH=src .venv/bin/python benchmarks/wide_ep_speed.py [--requests 20000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.core.spec_decode import spec_config_from_flags
from servecap.sim import engine_setup_from_plan, simulate
from servecap.sim.setup import EngineSetup
from servecap.specs import RequestShape
from servecap.workload import generate_arrays, workload_from_dict

CHAT = {
    "prompt_tokens": {"kind": "lognormal", "median": 1024, "sigma": 0.7, "max": 8000},
    "output_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.6, "max": 2000},
}


def _setup(**kw: object) -> EngineSetup:
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    spec = kw.pop("spec", None)
    dep = build_deployment(m, lookup_gpu("H200"), weights_dtype="fp8", max_model_len=16384, **kw)  # type: ignore[arg-type]
    if spec:
        dep = replace(dep, speculative=spec_config_from_flags(m, str(spec), None, None, None))
    return engine_setup_from_plan(plan(dep, request=RequestShape(1300, 360)))


def _run(setup: EngineSetup, rate: float, n: int, repeat: int) -> tuple[float, float]:
    """(best wall seconds per request, output tok/s simulated)."""
    wl = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": rate}, **CHAT, "num_requests": n})
    arrays = generate_arrays(wl, np.random.default_rng(0))
    best = float("inf")
    tok_s = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = simulate(setup, arrays, np.random.default_rng(0))
        best = min(best, time.perf_counter() - t0)
        tok_s = res.summary.output_tokens_per_s
    return best / n, tok_s


def _capacity(setup: EngineSetup) -> float:
    """Requests/s of a saturated run (2,000 requests arriving at once)."""
    wl = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": 1e4}, **CHAT, "num_requests": 2000})
    res = simulate(setup, generate_arrays(wl, np.random.default_rng(1)), np.random.default_rng(1))
    return res.summary.throughput_req_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    layouts = {
        "one node, TP 8": _setup(tp=8),
        "2 nodes, DP 16 + EP 16": _setup(tp=1, dp=16, ep=16, redundant_experts=32, two_batch_overlap=True),
        "2 nodes, DP 16 + EP 16, MTP": _setup(
            tp=1, dp=16, ep=16, redundant_experts=32, two_batch_overlap=True, spec="mtp"
        ),
    }
    base = None
    for name, setup in layouts.items():
        rate = 0.7 * _capacity(setup)
        per_req, tok_s = _run(setup, rate, args.requests, args.repeat)
        if base is None:
            base = per_req
        print(
            f"{name:30s} {rate:7.1f} req/s simulated, {tok_s:9.0f} output tok/s; "
            f"{1 / per_req:9.0f} requests per wall second; {per_req / base:.2f}x the one-node replica per request"
        )


if __name__ == "__main__":
    main()
