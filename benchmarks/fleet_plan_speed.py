"""Fleet planner speed: the cheapest fleet for a one-day diurnal curve at ~1,000 requests/s peak.

Llama-3.1-8B on H100 or H200, chat lengths with 16 shared 1,024-token system prompts on half the
requests, a diurnal day (peak 1,000 req/s at 14:00, trough 250), p99 TTFT <= 1 s and p99 TPOT
<= 50 ms. The planner simulates the peak window per candidate (bisection from the closed form),
verifies the winner, and checks the autoscaler on the steepest ramp; ``--levers`` adds the lever
table (``--levers default``: the plan's default table, split-or-not included). Prints the answer,
wall time, simulations run and simulated requests, each lever's simulations, and whether the
simulator's modules are compiled (mypyc) or pure Python.

``--executors serial,process,ray`` plans once on each (``--workers`` each for the process pool
and the local Ray instance) and prints each one's wall time, its speed-up over the first, and
whether its answer is the serial one (it must be: the parallel search runs the serial search's
simulations, some of them ahead of need).

    .venv/bin/python benchmarks/fleet_plan_speed.py [--peak-rps 1000] [--levers router,fp8-kv | default]
    .venv/bin/python benchmarks/fleet_plan_speed.py --executors serial,process,ray --workers 2
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from servecap.app.fleet_plan import fleet_plan, plan_request_from_dict
from servecap.progress import Progress
from servecap.sim import engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--peak-rps", type=float, default=1000.0)
    ap.add_argument("--gpus", default="H100,H200")
    ap.add_argument("--levers", default="", help="comma-separated, or 'default' (default: none, the plan alone)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--executors", default="serial", help="comma-separated: serial, process, ray")
    ap.add_argument("--workers", type=int, default=2, help="workers of the process pool and of Ray")
    args = ap.parse_args()
    raw: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B",
        "candidates": [{"gpu": g, "max_model_len": 8192} for g in args.gpus.split(",")],
        "traffic": {
            "peak_rps": args.peak_rps,
            "workload": {
                "arrival": {
                    "kind": "schedule",
                    "rate": {"kind": "diurnal", "peak_per_s": 1.0, "trough_per_s": 0.25, "peak_at_s": 50400},
                },
                "prompt_tokens": {"kind": "lognormal", "median": 512, "sigma": 0.8, "max": 6000},
                "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.7, "max": 2000},
                "prefix": {"groups": 16, "tokens": 1024, "share": 0.5},
                "duration_s": 86400,
            },
        },
        "slo": {"ttft_s": {"p99": 1.0}, "tpot_s": {"p99": 0.05}},
        "levers": None if args.levers == "default" else [x for x in args.levers.split(",") if x],
        "seed": args.seed,
    }
    compiled = engine.__file__.endswith((".so", ".pyd"))
    print(f"simulator: {'compiled (mypyc)' if compiled else 'pure Python'}")
    first: tuple[float, Any] | None = None
    for kind in args.executors.split(","):
        t0 = time.perf_counter()

        def progress(p: Progress, t0: float = t0) -> None:
            print(f"  [{time.perf_counter() - t0:6.1f} s] {p.message}", flush=True)

        workers = None if kind == "serial" else args.workers
        r = fleet_plan(plan_request_from_dict(raw), progress=progress, executor=kind, workers=workers)
        wall = time.perf_counter() - t0
        simulated = sum(c.best.requests for c in r.candidates if c.best is not None)
        a = r.autoscaler
        print(f"[{kind}{'' if workers is None else f', {workers} workers'}]")
        print(f"answer: {r.chosen.replicas} x {r.chosen.name} at the peak, ${r.chosen.usd_per_month:,.0f}/month fixed")
        if a is not None:
            print(
                f"autoscaler: min {a.min_replicas}, max {a.max_replicas}, ~${a.usd_per_month:,.0f}/month over the day"
            )
        print(f"peak window: {r.window['duration_s']:,.0f} s, {r.window['scored_requests']:,.0f} scored requests")
        print(f"wall time: {wall:.1f} s, simulations: {r.simulations} (scored requests of the answers: {simulated:,})")
        for lv in r.levers:
            print(f"lever {lv.name}: {lv.simulations} simulations, {lv.change}" + (f"; {lv.note}" if lv.note else ""))
        if r.levers:
            print(f"levers' simulations: {sum(lv.simulations for lv in r.levers)} of {r.simulations}")
        if first is None:
            first = (wall, r)
        else:
            same = (r.chosen, r.fleet, r.verify, r.candidates, r.levers, r.simulations) == (
                first[1].chosen,
                first[1].fleet,
                first[1].verify,
                first[1].candidates,
                first[1].levers,
                first[1].simulations,
            )
            print(f"speed-up over the first: {first[0] / wall:.2f}x; same answer and evidence: {same}")


if __name__ == "__main__":
    main()
