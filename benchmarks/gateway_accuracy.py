"""Measured vs simulated gateway: LiteLLM's proxy (``litellm[proxy]``, offline) in front of two
emulator pools on 127.0.0.1 — a ``primary`` that runs 2 requests and queues 2 (the rest refused
with 503) and a ``fallback`` — with a per-key limit of ``--rpm`` requests per ``--window-s``
window and ``fallbacks: [{primary: [fallback]}]``, configured by ``servecap export litellm``
from the fleet file, driven by ``servecap bench`` with a trace; next to ``servecap fleet
simulate`` of the same fleet file and trace, with the limit as LiteLLM counts it (``window:
fixed``) and as a token bucket of the same rpm (the gateway's default).

Rows: the integration test's bursts (10 at 0 s, 3 at 2.5 s, 10 at 6 s), then Poisson arrivals at
each of ``--rates`` (``--requests`` a row, seeded). Each row uses its own API key (fresh
counters). Prints the 429s (measured / simulated fixed window / simulated token bucket), the
requests each pool served and the fallbacks (measured / simulated), and TTFT p50 of the served
requests. The harness is the test's (``tests/integration/test_litellm_gateway.py``).

    .venv/bin/python benchmarks/gateway_accuracy.py [--rates 2,4,8] [--requests 40] [--rpm 8] [--window-s 5]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import test_litellm_gateway as harness  # noqa: E402

from servecap.emulator.server import ServerProcess  # noqa: E402


def _fleet(rpm: int, window_s: int, window: str) -> dict[str, Any]:
    fleet = copy.deepcopy(harness.FLEET)
    limit: dict[str, Any] = {"rpm": rpm}
    if window == "fixed":
        limit |= {"window": "fixed", "window_s": window_s}
    fleet["gateway"]["rate_limits"]["default"] = limit
    return fleet


def _poisson(rate_per_s: float, n: int, seed: int) -> list[float]:
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_per_s, n)
    return [round(float(t), 4) for t in np.cumsum(gaps) - gaps[0]]


def _ms(summary: dict[str, Any]) -> str:
    ttft = summary.get("ttft_s") or {}
    p50 = ttft.get("p50")
    return "-" if p50 is None else f"{p50 * 1e3:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="2,4,8", help="Poisson requests/s, a comma list")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--rpm", type=int, default=8, help="requests per window, per key")
    ap.add_argument("--window-s", type=int, default=5, help="LITELLM_RATE_LIMIT_WINDOW_SIZE")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows: list[tuple[str, list[float]]] = [("bursts 10/3/10", harness.ARRIVALS_S)]
    rates = [float(r) for r in args.rates.split(",")]
    rows += [(f"poisson {r:g}/s", _poisson(r, args.requests, args.seed)) for r in rates]
    fixed, bucket = _fleet(args.rpm, args.window_s, "fixed"), _fleet(args.rpm, args.window_s, "bucket")
    start = time.perf_counter()
    primary = ["--max-num-seqs", "2", "--waiting-queue-limit", "2"]
    with (
        tempfile.TemporaryDirectory() as d,
        ServerProcess([*harness.EMULATOR, *primary]) as p,
        ServerProcess(harness.EMULATOR) as f,
    ):
        tmp = Path(d)
        pools = {"primary": p.url, "fallback": f.url}
        fleet_file = tmp / "fleet.json"
        fleet_file.write_text(json.dumps(fixed))
        config, _ = harness.proxy_config(fleet_file, pools, tmp)
        proxy, proc = harness.start_proxy(config, args.window_s)
        print(f"LiteLLM proxy, per-key limit {args.rpm} requests per {args.window_s} s window, primary + fallback pool")
        print(
            "arrivals         n | 429 real/fixed/bucket | primary real/sim | fallback real/sim | TTFT p50 ms real/sim"
        )
        try:
            for i, (name, arrivals) in enumerate(rows):
                trace = harness.write_trace(tmp / f"trace{i}.jsonl", arrivals)
                real, real_summary = harness.measure(proxy, pools, trace, tmp, key=f"sk-row-{i}")
                sim, sim_summary = harness.simulate(fixed, trace)
                sim_bucket, _ = harness.simulate(bucket, trace)
                print(
                    f"{name:15s} {len(arrivals):2d} | {real['rate_limited']:3d} {sim['rate_limited']:3d} "
                    f"{sim_bucket['rate_limited']:3d}         | {real['primary']:3d} {sim['primary']:3d}"
                    f"          | {real['fallback']:3d} {sim['fallback']:3d} (fell back {sim['fell_back']})"
                    f" | {_ms(real_summary)} {_ms(sim_summary)}"
                )
        finally:
            harness.stop(proc)
    print(f"wall {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
