"""Simulator speed on block-hash traffic: synthetic agent sessions (servecap.workload.agentic,
prompts carried as 512-token hash ids and keyed onto the engines' 16-token blocks) through one
replica and through a fleet routed by the blocks replicas hold (precise-prefix) and by
least-outstanding.

Prints simulated requests per CPU-second (``time.process_time``) for each run and, as the
reference in the same process, the same requests (same arrival times and lengths) with their
hashes dropped: the ratio is what keying every block of every prompt costs. Also prints whether
the simulator's modules are compiled (mypyc) or pure Python, the hit rates and peak memory.

    .venv/bin/python benchmarks/block_hash_speed.py [--requests 1000000] [--replicas 32]
        [--session-rate-per-replica 0.1] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.sim import engine, engine_setup_from_plan, simulate
from servecap.specs import RequestShape
from servecap.workload import RequestArrays
from servecap.workload.agentic import generate_agentic
from servecap.workload.agentic_spec import AgenticArrival


def _without_hashes(a: RequestArrays) -> RequestArrays:
    empty = np.zeros(0, dtype=np.int64)
    return dataclasses.replace(a, hash_ids=empty, hash_offsets=empty)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--session-rate-per-replica", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=131072)
    setup = engine_setup_from_plan(plan(dep, request=RequestShape(8192, 256)))
    compiled = not engine.__file__.endswith(".py")
    print(f"simulator engine: {'compiled by mypyc' if compiled else 'pure Python'}")

    def sessions(replicas: int) -> RequestArrays:
        # about 8 turns a session (plus sub-agents'): enough sessions for the requests asked
        spec = AgenticArrival(
            sessions=max(1, args.requests // 8),
            session_rate_per_s=args.session_rate_per_replica * replicas,
            max_context_tokens=65536,
        )
        t0 = time.process_time()
        a = generate_agentic(spec, np.random.default_rng(args.seed), max_requests=args.requests)
        print(f"  drew {len(a):,} requests of {spec.sessions:,} sessions in {time.process_time() - t0:.1f} CPU s")
        return a

    one = sessions(1)
    for label, arrays in (("block hashes", one), ("no hashes (reference)", _without_hashes(one))):
        t0 = time.process_time()
        one_res = simulate(setup, arrays)
        cpu = time.process_time() - t0
        s = one_res.summary
        print(
            f"one replica, {label:>22}: {len(arrays) / cpu:>9,.0f} simulated req/s per CPU-second "
            f"({cpu:.1f} CPU s), hit rate {s.prefix_cache_hit_rate or 0:.1%}, p99 TTFT {(s.ttft_s.p99 or 0.0) * 1e3:,.0f} ms"
        )
    fleet_arrays = sessions(args.replicas)
    for router in ("precise-prefix", "least-outstanding"):
        for label, arrays in (("block hashes", fleet_arrays), ("no hashes (reference)", _without_hashes(fleet_arrays))):
            fleet = FleetSpec((Pool("h100", setup, replicas=args.replicas, cold_start=INSTANT),), router=router)
            t0 = time.process_time()
            res = simulate_fleet(fleet, arrays, args.seed)
            cpu = time.process_time() - t0
            fs = res.summary
            print(
                f"{args.replicas} replicas, {router:>17}, {label:>22}: {len(arrays) / cpu:>9,.0f} simulated req/s "
                f"per CPU-second ({cpu:.1f} CPU s), hit rate {fs.prefix_cache_hit_rate or 0:.1%}, p99 TTFT "
                f"{(fs.ttft_s.p99 or 0.0) * 1e3:,.0f} ms; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"
            )


if __name__ == "__main__":
    main()
