"""What a streamed day's TTFT windows hold: a QuantileSketch (the ddsketch package's store, a
Python list of floats) per window against a WindowSketch (one numpy array per window), fed the
same values, measured with tracemalloc; and the quantiles of both, which must be equal.

    .venv/bin/python benchmarks/window_sketch_memory.py                 # a day of 15 s windows
    .venv/bin/python benchmarks/window_sketch_memory.py --windows 600
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=5_760, help="windows (a day of 15 s: 5,760)")
    ap.add_argument("--per-window", type=int, default=1_500, help="TTFTs per window (100 req/s x 15 s)")
    ap.add_argument("--batches", type=int, default=4, help="batches each window is fed in")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from servecap.results.sketch import QuantileSketch
    from servecap.results.window_sketch import WindowSketch

    rng = np.random.default_rng(args.seed)
    # TTFTs: a lognormal body around 150 ms, and a tail to tens of seconds in a cold start's backlog
    data = [
        [np.concatenate([rng.lognormal(-1.9, 0.6, args.per_window // args.batches), rng.lognormal(1.0, 1.2, 4)])
         for _ in range(args.batches)]
        for _ in range(args.windows)
    ]  # fmt: skip
    figures = {}
    kept: dict[str, dict[int, object]] = {}
    for name, cls in (("QuantileSketch", QuantileSketch), ("WindowSketch", WindowSketch)):
        tracemalloc.start()
        t0 = time.process_time()
        windows: dict[int, object] = {}
        for k, batches in enumerate(data):
            w = windows[k] = cls()
            for b in batches:
                w.add_array(b)  # type: ignore[attr-defined]
        cpu = time.process_time() - t0
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        figures[name] = held
        kept[name] = windows
        print(f"{name:15s} {args.windows:,} windows: held {held / 2**20:7.2f} MiB "
              f"({held / args.windows:,.0f} B per window), fed in {cpu:.2f} s CPU")  # fmt: skip
    print(f"ratio: {figures['QuantileSketch'] / figures['WindowSketch']:.1f}x less held by WindowSketch")
    same = all(
        kept["QuantileSketch"][k].quantile(q) == kept["WindowSketch"][k].quantile(q)  # type: ignore[attr-defined]
        for k in range(0, args.windows, max(1, args.windows // 50))
        for q in (0.5, 0.9, 0.99)
    )
    print(f"quantiles identical on a sample of windows: {same}")


if __name__ == "__main__":
    main()
