"""Simulator speed: 100,000 chat requests, Llama-3.1-8B on one H100 (``--model``, ``--gpu``, ``--tp``,
``--weights-dtype`` for another deployment), Poisson at ~80% of capacity.

Prints simulated requests per wall-clock second and simulated time / wall time, for the default
(the event loop driving one engine, runs of decode-only steps advanced at once) and step by step
(``fast_forward=False``: one ``Engine`` step per iteration), their ratio, and the percentiles of
both side by side (they must be identical, as must every per-request record). It says whether
the simulator's modules are compiled (mypyc, see setup.py) or pure Python.

    .venv/bin/python benchmarks/sim_speed.py [--requests 100000] [--seed 0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.sim import engine, engine_setup_from_plan, simulate
from servecap.sim.capacity_search import planner_rate
from servecap.specs import RequestShape
from servecap.specs.perf import Efficiency
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
    ap.add_argument("--repeat", type=int, default=1, help="runs of each path; the best wall time counts")
    ap.add_argument(
        "--step-model",
        choices=("roofline", "operations", "auto"),
        default="roofline",
        help="the step model (Efficiency; auto: the class's choice, specs.step_choice)",
    )
    ap.add_argument("--model", default="meta-llama/Llama-3.1-8B")
    ap.add_argument("--gpu", default="H100")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--weights-dtype", default=None, help="fp8, bf16, ... (default: the checkpoint's)")
    args = ap.parse_args()

    kw_dtype = {"weights_dtype": args.weights_dtype} if args.weights_dtype else {}
    dep = build_deployment(resolve_model(args.model), lookup_gpu(args.gpu), tp=args.tp, max_model_len=8192, **kw_dtype)
    probe = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": 1.0}, **CHAT, "num_requests": 1})
    mean_prompt, mean_out = 512 * np.exp(0.8**2 / 2), 200 * np.exp(0.7**2 / 2)
    eff = Efficiency(step_model=args.step_model)
    the_plan = plan(dep, request=RequestShape(round(mean_prompt), round(mean_out)), efficiency=eff)
    setup = engine_setup_from_plan(the_plan, efficiency=eff)  # auto: the plan's choice
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
        f"{args.model} on {args.tp}x {args.gpu}: planner ceiling {planner_rate(the_plan, probe):.1f} req/s, "
        f"simulated capacity {capacity:.1f} req/s; Poisson at {rate:.1f} req/s ({args.load:.0%})"
    )
    print(
        f"workload: {args.requests:,} requests drawn in {t_gen:.3f} s; step model {args.step_model} ({the_plan.efficiency.step_model})"
    )
    compiled = not engine.__file__.endswith(".py")  # a C extension built by mypyc (setup.py)
    name = engine.__file__.rsplit("/", 1)[-1]
    print(f"simulator engine: {'compiled by mypyc' if compiled else 'pure Python'} ({name})")
    runs = [("fast (decode runs at once, O(1) per step)", {"fast_forward": True})]
    if not args.skip_reference:
        runs.append(("step by step (one Engine step per iteration)", {"fast_forward": False}))
    results = []
    walls = []
    for name, kw in runs:
        wall = cpu = float("inf")
        for _ in range(args.repeat):  # the best of a few runs: wall time on a shared machine is noisy
            t0, c0 = time.perf_counter(), time.process_time()
            res = simulate(setup, arrays, **kw)  # type: ignore[arg-type]
            wall = min(wall, time.perf_counter() - t0)
            cpu = min(cpu, time.process_time() - c0)  # CPU time: steadier than wall on a shared machine
        results.append(res)
        walls.append(wall)
        s = res.summary
        print(f"\n{name}: {wall:.2f} s wall ({cpu:.2f} s CPU) for {res.horizon_s:,.0f} s simulated")
        print(
            f"  {args.requests / wall:,.0f} simulated requests per wall-clock second; "
            f"simulated/wall time {res.horizon_s / wall:,.0f}x; {res.steps:,} steps"
        )
        print(
            f"  mean batch {s.mean_batch_size:.1f}, throughput {s.throughput_req_s:.2f} req/s, "
            f"preemptions {s.preemptions}"
        )
    if len(results) == 2:
        fast, ref = results
        print(f"\nspeed-up of the fast path over step by step: {walls[1] / walls[0]:.2f}x")
        print(f"\n{'':6s}{'':5s}{'fast':>14s}{'step by step':>16s}")
        for label, key in (
            ("TTFT", "ttft_s"),
            ("TPOT", "tpot_s"),
            ("ITL", "itl_s"),
            ("E2E", "e2e_s"),
            ("queue", "queue_time_s"),
        ):
            a, b = getattr(fast.summary, key), getattr(ref.summary, key)
            for q in ("p50", "p90", "p99", "mean"):
                x, y = getattr(a, q), getattr(b, q)
                print(f"{label:6s}{q:5s}{x * 1e3:11.3f} ms{y * 1e3:13.3f} ms  {'same' if x == y else 'DIFFERENT'}")
        same = fast.summary == ref.summary and fast.records() == ref.records()
        print(f"\nfast and step-by-step summaries and per-request records identical: {same}")


if __name__ == "__main__":
    main()
