"""What an autoscaler's churn keeps in memory: a compressed day (the diurnal curve over
``--period-s``, repeated ``--periods`` times) into one autoscaled pool on the streaming path,
with the peak RSS and, under tracemalloc, the allocations still held when the run ends, largest
first, beside the replicas started. Run it at two ``--periods``: what grows with the replicas
started (and not with the requests) is what churn keeps.

    .venv/bin/python benchmarks/fleet_churn_memory.py --periods 1
    .venv/bin/python benchmarks/fleet_churn_memory.py --periods 3
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=120.0, help="mean req/s")
    ap.add_argument("--period-s", type=float, default=1800.0, help="the curve's period (a day: 86,400)")
    ap.add_argument("--periods", type=int, default=1)
    ap.add_argument("--max-replicas", type=int, default=32)
    ap.add_argument("--top", type=int, default=8, help="allocation sites to print")
    ap.add_argument("--no-trace", action="store_true", help="peak RSS without tracemalloc's overhead")
    args = ap.parse_args()

    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan
    from servecap.fleet import FleetSpec, Pool, simulate_fleet
    from servecap.policy.autoscalers import AutoscalerSettings
    from servecap.sim import engine_setup_from_plan
    from servecap.specs import RequestShape
    from servecap.workload import workload_from_dict

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    setup = engine_setup_from_plan(plan(dep, request=RequestShape(1024 + 512, 256)))
    n = int(args.rate * args.period_s * args.periods)
    wl = workload_from_dict(
        {
            "arrival": {"kind": "diurnal", "rate_per_s": args.rate, "peak_to_trough": 3.0, "period_s": args.period_s},
            "prompt_tokens": {"kind": "lognormal", "median": 512, "sigma": 0.8, "max": 6000},
            "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.7, "max": 2000},
            "num_requests": n,
        }
    )
    scaler = AutoscalerSettings(
        signal="inflight", target=32.0, interval_s=15.0, min_replicas=1, max_replicas=args.max_replicas
    )
    fleet = FleetSpec((Pool("h100", setup, replicas=1, autoscaler=scaler),), router="least-outstanding")
    if not args.no_trace:
        tracemalloc.start(4)
    c0 = time.process_time()
    res = simulate_fleet(fleet, wl, 0, stream=True)
    cpu = time.process_time() - c0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(
        f"requests {res.summary.num_requests:,}  simulated {res.horizon_s:,.0f} s  CPU {cpu:,.1f} s  "
        f"replicas started {len(res.replicas)}  scale events {len(res.scale_events)}  peak RSS {peak_mb:,.0f} MB"
        + ("" if args.no_trace else " (under tracemalloc)")
    )
    if not args.no_trace:
        held, peak = tracemalloc.get_traced_memory()
        print(f"held at the end {held / 2**20:,.1f} MiB, traced peak {peak / 2**20:,.1f} MiB; largest sites:")
        for stat in tracemalloc.take_snapshot().statistics("lineno")[: args.top]:
            print(f"  {stat.size / 2**20:8.2f} MiB  {stat.count:>9,}  {stat.traceback[0]}")


if __name__ == "__main__":
    main()
