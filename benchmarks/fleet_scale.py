"""A busy fleet at scale, on the streaming path: wall time, CPU time and peak memory per size.

Sizes (each in a child process of its own, so its peak RSS is its own: ``resource.getrusage``):

- ``1e6``, ``1e7`` (any number): that many chat requests (the issue's workload: log-normal
  prompts, median 512, sigma 0.8; answers median 200, sigma 0.7) Poisson at ``--rate`` on
  ``--replicas`` Llama-3.1-8B replicas on H100s behind least-outstanding;
- ``day``: one simulated day (86,400 s) of ``--day-requests`` requests (35M by default, a
  10,000-user service) on a diurnal curve (peak three times the trough, peak at noon) into one
  autoscaled pool of up to ``--max-replicas`` replicas (target 64 in-flight requests per
  replica, every 30 s, default cold starts).

Every run streams into sketches (``simulate_fleet(..., stream=True)``): the workload is drawn
chunk by chunk and no per-request array is kept, so the peak RSS should not grow with the
number of requests. Prints one row per size: requests, simulated seconds, wall seconds, CPU
seconds, simulated requests per CPU-second, peak RSS (MB), p99 TTFT, peak replicas.

    .venv/bin/python benchmarks/fleet_scale.py                       # 1e6, 1e7, day
    .venv/bin/python benchmarks/fleet_scale.py --sizes 1e5,1e6       # quick
    .venv/bin/python benchmarks/fleet_scale.py --sizes 1e6 --baseline-src /tmp/old/src   # against another tree

With ``--baseline-src`` each size runs ``--repeat`` times (3 by default) on this tree and on the
other checkout's ``src/``, alternating, and prints the ratio of the median CPU times. Compare
trees this way, in the same minutes on the same machine: CPU time on the shared machine varies
with the machine (the same source ran 2-3x slower on the machine of 28 November than on that of
22-25 November: docs/fleet.md), so a figure from another day is no reference.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

CHAT = {
    "prompt_tokens": {"kind": "lognormal", "median": 512, "sigma": 0.8, "max": 6000},
    "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.7, "max": 2000},
}


def run_one(size: str, args: argparse.Namespace) -> dict[str, Any]:
    """One size, in this process; the figures as a dict."""
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan
    from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
    from servecap.policy.autoscalers import AutoscalerSettings
    from servecap.sim import engine, engine_setup_from_plan
    from servecap.specs import RequestShape
    from servecap.workload import workload_from_dict

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    setup = engine_setup_from_plan(plan(dep, request=RequestShape(1024 + 512, 256)))
    if size == "day":
        n = int(float(args.day_requests))
        rate = n / 86_400.0
        wl = workload_from_dict(
            {
                "arrival": {"kind": "diurnal", "rate_per_s": rate, "peak_to_trough": 3.0, "peak_at_s": 43_200.0},
                **CHAT,
                "num_requests": n,
            }
        )
        scaler = AutoscalerSettings(
            signal="inflight", target=64.0, interval_s=30.0, min_replicas=4, max_replicas=args.max_replicas
        )
        pool = Pool("h100", setup, replicas=4, autoscaler=scaler)
        fleet = FleetSpec((pool,), router="least-outstanding")
    else:
        n = int(float(size))
        wl = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": args.rate}, **CHAT, "num_requests": n})
        fleet = FleetSpec(
            (Pool("h100", setup, replicas=args.replicas, cold_start=INSTANT),), router="least-outstanding"
        )
    t0 = time.perf_counter()
    c0 = time.process_time()
    res = simulate_fleet(fleet, wl, args.seed, stream=True)
    cpu = time.process_time() - c0
    wall = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    s = res.summary
    return {
        "size": size,
        "requests": s.num_requests,
        "completed": s.completed,
        "simulated_s": res.horizon_s,
        "wall_s": wall,
        "cpu_s": cpu,
        "req_per_cpu_s": s.num_requests / cpu if cpu > 0 else 0.0,
        "peak_rss_mb": peak_kb / 1024.0,
        "p99_ttft_ms": None if s.ttft_s.p99 is None else s.ttft_s.p99 * 1e3,
        "peak_replicas": max(res.timeseries.ready, default=0),
        "replicas_started": len(res.replicas),
        "compiled": not engine.__file__.endswith(".py"),
    }


def _run_child(size: str, passthrough: list[str], src: str | None) -> dict[str, Any] | str:
    """One size in a child process (its own peak RSS), importing servecap from ``src`` when
    given (another checkout's ``src/``); the figures, or the child's last error line."""
    env = os.environ.copy()
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    out = subprocess.run(
        [sys.executable, __file__, f"--child={size}", *passthrough],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        return out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit status {out.returncode}"
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def _row(label: str, size: str, r: dict[str, Any] | str) -> str:
    if isinstance(r, str):
        return f"{label}{size:>6} failed: {r}"
    p99 = "-" if r["p99_ttft_ms"] is None else f"{r['p99_ttft_ms']:,.0f}"
    return (
        f"{label}{size:>6} {r['requests']:>12,} {r['simulated_s']:>12,.0f} {r['wall_s']:>8,.1f} {r['cpu_s']:>8,.1f} "
        f"{r['req_per_cpu_s']:>10,.0f} {r['peak_rss_mb']:>11,.0f} {p99:>11} {r['peak_replicas']:>13}"
        f"{'' if r['compiled'] else '  (pure Python)'}"
    )


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e6,1e7,day", help="comma-separated: request counts and/or 'day'")
    ap.add_argument("--rate", type=float, default=900.0, help="req/s of the fixed-size runs")
    ap.add_argument("--replicas", type=int, default=32, help="replicas of the fixed-size runs")
    ap.add_argument("--day-requests", default="35e6", help="requests in the simulated day")
    ap.add_argument("--max-replicas", type=int, default=64, help="the day's autoscaler maximum")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--baseline-src",
        default=None,
        help="another checkout's src/ (e.g. a `git worktree add` of an older commit, built in place to "
        "compare compiled builds): each size also runs on it, alternating with this tree, and the ratio "
        "of the median CPU times is printed",
    )
    ap.add_argument(
        "--repeat", type=int, default=None, help="runs of each size per tree (default 1; 3 with --baseline-src)"
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(run_one(args.child, args)), flush=True)
        return
    base = args.baseline_src
    if base is not None:
        base = os.path.abspath(base)
        if not os.path.isfile(os.path.join(base, "servecap", "__init__.py")):
            sys.exit(
                f"fleet_scale.py: --baseline-src {args.baseline_src!r}: no servecap package there (give a checkout's src/)"
            )
    repeat = args.repeat if args.repeat is not None else (3 if base is not None else 1)
    if repeat < 1:
        sys.exit(f"fleet_scale.py: --repeat {repeat}: must be at least 1")
    passthrough = [
        f"--rate={args.rate}",
        f"--replicas={args.replicas}",
        f"--day-requests={args.day_requests}",
        f"--max-replicas={args.max_replicas}",
        f"--seed={args.seed}",
    ]
    trees: list[tuple[str, str | None]] = [("this", None)] + ([("base", base)] if base is not None else [])
    label_w = 5 if base is not None else 0
    header = (
        f"{'tree' if label_w else '':<{label_w}}{'size':>6} {'requests':>12} {'simulated s':>12} {'wall s':>8} {'CPU s':>8} "
        f"{'req/CPU-s':>10} {'peak RSS MB':>11} {'p99 TTFT ms':>11} {'peak replicas':>13}"
    )
    if base is not None:
        print(f"this: {os.path.dirname(os.path.abspath(__file__))}/..; base: {base}", flush=True)
    print(header, flush=True)
    for size in args.sizes.split(","):
        cpu: dict[str, list[float]] = {name: [] for name, _ in trees}
        for _ in range(repeat):  # alternated, so that both trees see the same minutes of a shared machine
            for name, src in trees:
                r = _run_child(size, passthrough, src)
                print(_row(f"{name:<{label_w}}" if label_w else "", size, r), flush=True)
                if not isinstance(r, str):
                    cpu[name].append(r["cpu_s"])
        if base is not None and cpu["this"] and cpu["base"]:
            this_s, base_s = _median(cpu["this"]), _median(cpu["base"])
            print(
                f"{size}: median CPU {this_s:,.2f} s this tree, {base_s:,.2f} s base "
                f"(this / base {this_s / base_s:.3f}; {len(cpu['this'])} and {len(cpu['base'])} runs)",
                flush=True,
            )


if __name__ == "__main__":
    main()
