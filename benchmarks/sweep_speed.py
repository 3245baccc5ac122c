"""Sweep speed: the same sweep file run in this process, on a local process pool and on a local
Ray instance, with the wall time of each and its speed-up over one process (the points'
results are checked equal across executors).

    .venv/bin/python benchmarks/sweep_speed.py [--sweep examples/sweep-fleet.yaml] [--requests 20000] [--workers 2]

Ray's start-up (a few seconds) is timed separately from the sweep: a cluster is started once
and runs many sweeps.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

from servecap.app.fleet_sweep import load_sweep_file, run_sweep, sweep_points
from servecap.distributed import make_executor

ROOT = Path(__file__).resolve().parents[1]


def _noop(x: int) -> int:
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sweep", type=Path, default=ROOT / "examples" / "sweep-fleet.yaml")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--requests", type=int, default=20_000, help="requests per point (the file's own when 0)")
    args = ap.parse_args()
    sf = load_sweep_file(args.sweep)
    points = sweep_points(sf, args.sweep.resolve().parent)
    if args.requests:
        points = [replace(p, workload={**p.workload, "num_requests": args.requests}) for p in points]
    n = points[0].workload.get("num_requests") if points else 0
    print(
        f"{args.sweep.name}: {len(points)} points of {n} requests; {os.cpu_count()} CPUs here, {args.workers} workers"
    )
    kinds = ["serial", "process"] + ([] if args.skip_ray else ["ray"])
    base: float | None = None
    rows: list[dict[str, object]] | None = None
    for kind in kinds:
        ex = make_executor(kind, workers=args.workers)
        try:
            if kind == "ray":
                t0 = time.perf_counter()
                ex.map(_noop, [0])  # start the local Ray instance
                print(f"  ray start-up: {time.perf_counter() - t0:.1f} s (not counted below)")
            t0 = time.perf_counter()
            run = run_sweep(points, ex)
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        got = [None if r is None else r.row for r in run.results]
        if rows is None:
            rows = got
        same = "identical results" if got == rows else "RESULTS DIFFER"
        base = base or wall
        print(f"  {kind:>7}: {wall:6.1f} s, speed-up {base / wall:.2f}x over one process ({same})")


if __name__ == "__main__":
    main()
