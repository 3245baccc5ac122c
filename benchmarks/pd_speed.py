"""Disaggregated fleet speed: 32 Llama-3.1-8B replicas on H100s, co-located (32 x both) against
split (8 prefill + 24 decode, KV over InfiniBand), the same Poisson chat traffic at ``--load`` of
the co-located fleet's capacity.

Prints simulated requests per wall-clock second for each and their ratio (the issue asks the
split fleet to run at least half as fast as the co-located one), and whether the simulator is
compiled (mypyc) or pure Python.

    .venv/bin/python benchmarks/pd_speed.py [--requests 200000] [--replicas 32] [--prefill 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.kv_transfer import kv_footprint
from servecap.core.plan import plan
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.sim import engine, engine_setup_from_plan, simulate
from servecap.specs import RequestShape
from servecap.workload import generate_arrays, workload_from_dict

CHAT = {  # benchmarks/fleet_speed.py's chat lengths
    "prompt_tokens": {"kind": "lognormal", "median": 512, "sigma": 0.8, "max": 6000},
    "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.7, "max": 2000},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--prefill", type=int, default=8, help="prefill replicas of the split fleet")
    ap.add_argument("--load", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    model, gpu = resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100")
    dep = build_deployment(model, gpu, max_model_len=8192)
    p = plan(dep, request=RequestShape(512, 256))
    setup = engine_setup_from_plan(p)
    fp = kv_footprint(model, 1, dep.kv_dtype, gpu.hbm_bandwidth_tb_s * 1e12)
    print(f"simulator engine: {'compiled by mypyc' if not engine.__file__.endswith('.py') else 'pure Python'}")
    sat = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": 200.0}, **CHAT, "num_requests": 5000})
    capacity = simulate(setup, sat, np.random.default_rng(args.seed)).summary.throughput_req_s
    rate = args.load * capacity * args.replicas
    body = {"arrival": {"kind": "poisson", "rate_per_s": rate}, **CHAT, "num_requests": args.requests}
    arrays = generate_arrays(workload_from_dict(body), np.random.default_rng(args.seed))
    both = Pool("both", setup, replicas=args.replicas, cold_start=INSTANT, kv=fp)
    colocated = FleetSpec((both,), router="least-outstanding")
    split = FleetSpec(
        (
            replace(both, name="prefill", replicas=args.prefill, role="prefill"),
            replace(both, name="decode", replicas=args.replicas - args.prefill, role="decode"),
        )
    )
    speeds = {}
    for name, spec in (("co-located", colocated), ("split", split)):
        t0 = time.perf_counter()
        res = simulate_fleet(spec, arrays, args.seed)
        wall = time.perf_counter() - t0
        speeds[name] = args.requests / wall
        s = res.summary
        print(
            f"{name:10s} {args.replicas} replicas, {rate:,.0f} req/s offered: {speeds[name]:,.0f} simulated req/s "
            f"({wall:.1f} s wall); p99 TTFT {s.ttft_s.p99 * 1e3:,.0f} ms, p99 TPOT {s.tpot_s.p99 * 1e3:,.1f} ms"
        )
        if res.pd is not None:
            from servecap.fleet.pd.stats import pd_rows

            print("  " + "; ".join(f"{k}: {v}" for k, v in pd_rows(res.pd)))
    print(f"split / co-located speed: {speeds['split'] / speeds['co-located']:.2f}")


if __name__ == "__main__":
    main()
