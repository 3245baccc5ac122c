"""Fleet simulator speed: chat requests on 32 Llama-3.1-8B replicas on H100s, Poisson at ~80% of
the fleet's capacity, routed by least-outstanding and by prefix-affinity.

Prints simulated requests per wall-clock second and simulated time / wall time for each router
and workload, and whether the simulator's modules are compiled (mypyc) or pure Python. Two
workloads: ``chat`` is the one of ``benchmarks/sim_speed.py`` (log-normal chat lengths), and
``chat+prefix`` adds 16 shared 1,024-token system prompts on half the requests, so
prefix-affinity has something to find (it costs the engines more: every cached block is looked
up, held and let go per request, and the router indexes each request's blocks). Each row is
compared with ``--requests`` requests through one replica at the same per-replica load (the
engines' own work, which a fleet cannot beat: the rest is the fleet's routing and bookkeeping).

``--stream`` runs the fleet on the streaming path (outcomes folded into mergeable sketches as
they finish, no per-request arrays: what ``fleet simulate`` does above 1,000,000 requests) and
prints its peak memory beside the rate.

    .venv/bin/python benchmarks/fleet_speed.py [--requests 1000000] [--replicas 32] [--seed 0] [--stream]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.sim import engine, engine_setup_from_plan, simulate
from servecap.specs import RequestShape
from servecap.workload import generate_arrays, workload_from_dict

CHAT = {  # chat-like lengths: log-normal prompts (median 512) and answers (median 200)
    "prompt_tokens": {"kind": "lognormal", "median": 512, "sigma": 0.8, "max": 6000},
    "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.7, "max": 2000},
}
WORKLOADS = {"chat": CHAT, "chat+prefix": {**CHAT, "prefix": {"groups": 16, "tokens": 1024, "share": 0.5}}}
RUNS = (("least-outstanding", "chat"), ("least-outstanding", "chat+prefix"), ("prefix-affinity", "chat+prefix"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--load", type=float, default=0.8, help="fraction of the simulated capacity")
    ap.add_argument("--runs", default=",".join(f"{r}:{w}" for r, w in RUNS), help="ROUTER:WORKLOAD,...")
    ap.add_argument("--skip-single", action="store_true", help="skip the one-replica reference runs")
    ap.add_argument("--stream", action="store_true", help="the streaming path (sketches, bounded memory)")
    args = ap.parse_args()

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    setup = engine_setup_from_plan(plan(dep, request=RequestShape(1024 + 512, 256)))
    compiled = not engine.__file__.endswith(".py")
    print(
        f"simulator engine: {'compiled by mypyc' if compiled else 'pure Python'}; path: {'streaming' if args.stream else 'exact'}"
    )
    single: dict[str, float] = {}
    for item in args.runs.split(","):
        router, name = item.split(":")
        body = WORKLOADS[name]
        # one replica's capacity: the throughput of a saturated run
        sat = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": 200.0}, **body, "num_requests": 5000})
        capacity = simulate(setup, sat, np.random.default_rng(args.seed)).summary.throughput_req_s
        rate = args.load * capacity * args.replicas
        spec = workload_from_dict(
            {"arrival": {"kind": "poisson", "rate_per_s": rate}, **body, "num_requests": args.requests}
        )
        arrays = generate_arrays(spec, np.random.default_rng(args.seed))
        if name not in single and not args.skip_single:
            one = workload_from_dict(
                {
                    "arrival": {"kind": "poisson", "rate_per_s": rate / args.replicas},
                    **body,
                    "num_requests": args.requests,
                }
            )
            one_arrays = generate_arrays(one, np.random.default_rng(args.seed))
            t0 = time.perf_counter()
            simulate(setup, one_arrays, np.random.default_rng(args.seed))
            single[name] = args.requests / (time.perf_counter() - t0)
            print(
                f"{name}: one replica saturates at {capacity:.1f} req/s; the fleet gets Poisson {rate:,.0f} req/s "
                f"({args.load:.0%}); one replica alone at {rate / args.replicas:.1f} req/s simulates "
                f"{single[name]:,.0f} req/s"
            )
        fleet = FleetSpec((Pool("h100", setup, replicas=args.replicas, cold_start=INSTANT),), router=router)
        t0 = time.perf_counter()
        res = simulate_fleet(fleet, arrays, args.seed, stream=args.stream)
        wall = time.perf_counter() - t0
        s = res.summary
        hit = "-" if s.prefix_cache_hit_rate is None else f"{s.prefix_cache_hit_rate:.1%}"
        ratio = f" ({args.requests / wall / single[name]:.2f}x one replica's)" if name in single else ""
        print(
            f"{router:>18} on {name:<11}: {args.requests / wall:>9,.0f} simulated req/s{ratio}, sim/wall "
            f"{res.horizon_s / wall:7.1f}x ({wall:.1f} s wall for {res.horizon_s:,.0f} s simulated); "
            f"p99 TTFT {s.ttft_s.p99 * 1e3:,.0f} ms, prefix hits {hit}, outcomes {res.outcomes}; "
            f"peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"
        )


if __name__ == "__main__":
    main()
