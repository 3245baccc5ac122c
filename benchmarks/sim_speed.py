"""Simulator speed: 100,000 chat requests, Llama-3.1-8B on one H100, Poisson at ~80% of capacity.

Prints simulated requests per wall-clock second and simulated time / wall time, for the default
(fast-forward of decode-only runs, affine step-time read-off) and the step-by-step reference,
and the percentiles of both (they must be identical).

    .venv/bin/python benchmarks/sim_speed.py [--requests 100000] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.sim import engine_setup_from_plan, simulate
from servecap.sim.capacity import planner_rate
from servecap.specs import RequestShape
from servecap.workload import generate_arrays, workload_from_dict

CHAT = {  # chat-like lengths: log-normal prompts (median 512) and answers (median 200)
    "prompt_tokens": {"kind": "lognormal", "median": 512, "sigma": 0.8, "max": 6000},
    "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.7, "max": 2000},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--load", type=float, default=0.8, help="fraction of the simulated capacity")
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args()

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    probe = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": 1.0}, **CHAT, "num_requests": 1})
    mean_prompt, mean_out = 512 * np.exp(0.8**2 / 2), 200 * np.exp(0.7**2 / 2)
    the_plan = plan(dep, request=RequestShape(round(mean_prompt), round(mean_out)))
    setup = engine_setup_from_plan(the_plan)
    # capacity: the throughput of a saturated run (the planner's figure is a ceiling above it)
    sat = workload_from_dict(
        {"arrival": {"kind": "poisson", "rate_per_s": 2 * planner_rate(the_plan, probe)}, **CHAT, "num_requests": 5000}
    )
    capacity = simulate(setup, sat, np.random.default_rng(args.seed)).summary.throughput_req_s
    rate = args.load * capacity
    spec = workload_from_dict(
        {"arrival": {"kind": "poisson", "rate_per_s": rate}, **CHAT, "num_requests": args.requests}
    )
    t0 = time.perf_counter()
    arrays = generate_arrays(spec, np.random.default_rng(args.seed))
    t_gen = time.perf_counter() - t0
    print(
        f"Llama-3.1-8B on 1x H100: planner ceiling {planner_rate(the_plan, probe):.1f} req/s, "
        f"simulated capacity {capacity:.1f} req/s; Poisson at {rate:.1f} req/s ({args.load:.0%})"
    )
    print(f"workload: {args.requests:,} requests drawn in {t_gen:.3f} s")
    runs = [("fast (decode runs + affine step time)", {"fast_forward": True})]
    if not args.skip_reference:
        runs.append(("step by step (one event per step)", {"fast_forward": False}))
    results = []
    for name, kw in runs:
        t0 = time.perf_counter()
        res = simulate(setup, arrays, **kw)  # type: ignore[arg-type]
        wall = time.perf_counter() - t0
        results.append(res)
        s = res.summary
        print(f"\n{name}: {wall:.2f} s wall for {res.horizon_s:,.0f} s simulated")
        print(
            f"  {args.requests / wall:,.0f} simulated requests per wall-clock second; "
            f"simulated/wall time {res.horizon_s / wall:,.0f}x; {res.steps:,} steps, "
            f"{res.decode_runs:,} decode runs covering {res.decode_run_steps:,} steps"
        )
        print(
            f"  mean batch {s.mean_batch_size:.1f}, throughput {s.throughput_req_s:.2f} req/s, "
            f"preemptions {s.preemptions}"
        )
        for label, p in (("TTFT", s.ttft_s), ("TPOT", s.tpot_s), ("ITL", s.itl_s), ("E2E", s.e2e_s)):
            print(f"  {label:5s} p50 {p.p50 * 1e3:9.3f} ms  p90 {p.p90 * 1e3:9.3f} ms  p99 {p.p99 * 1e3:9.3f} ms")
    if len(results) == 2:
        same = all(
            getattr(results[0].summary, k) == getattr(results[1].summary, k)
            for k in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_time_s")
        )
        print(f"\nfast and step-by-step percentiles identical: {same}")


if __name__ == "__main__":
    main()
