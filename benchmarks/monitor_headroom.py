"""Does `servecap monitor`'s headroom say where the SLOs really break? (issue 20, defect 1)

On 127.0.0.1 only, bounded (about 8 minutes): an emulator of Llama-3.1-8B on an H100 at 8K;

1. `bench --rate 25` against it and, once it runs steadily, `monitor --once --json` over a
   ``--window`` second window: the engine-model headroom's SLO break rate and its 95% interval;
2. `capacity --rate` for the same model and mix (1,024/128 tokens): the simulated break rate and
   its search bracket;
3. `bench` at rising rates (``--rates``), ``--duration`` s each, until one breaks an SLO (p99
   TTFT > 1 s or p99 TPOT > 50 ms): the load at which the emulator first breaks one.

Prints the three and two checks: capacity's rate within monitor's interval, and monitor's rate
within 25% of the rate at which bench first broke an SLO.

    PYTHONPATH=src python benchmarks/monitor_headroom.py [--rates 26,28,...] [--duration 40]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

MODEL, GPU, LEN = "meta-llama/Llama-3.1-8B", "H100", "8192"
SLO = ["--ttft-slo-ms", "1000", "--tpot-slo-ms", "50"]
TTFT_SLO_S, TPOT_SLO_S = 1.0, 0.05
BENCH = [sys.executable, "-m", "servecap", "bench"]


def servecap(*args: str, timeout: float = 300) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "servecap", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if res.returncode != 0:
        raise SystemExit(f"servecap {' '.join(args)} failed: {res.stderr.strip()[-500:]}")
    return res.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, timeout_s: float = 60) -> None:
    import httpx

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the emulator at {url} did not come up")


def bench(url: str, rate: float, duration_s: float) -> dict[str, Any]:
    out = servecap("bench", url, "--rate", f"{rate:g}", "--duration-s", f"{duration_s:g}", "--no-store", "--json", *SLO)
    run: dict[str, Any] = json.loads(out)["runs"][0]["summary"]
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="26,28,30,32,34,36,38,40", help="bench rates to sweep, req/s")
    ap.add_argument("--duration", type=float, default=40.0, help="seconds of each bench run")
    ap.add_argument("--window", type=float, default=30.0, help="monitor's window, seconds")
    args = ap.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    emu = subprocess.Popen(
        [sys.executable, "-m", "servecap", "emulate", "-m", MODEL, "-g", GPU, "-l", LEN, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_up(url)
        # 1. monitor while bench runs at 25 req/s
        load = subprocess.Popen(
            [*BENCH, url, "--rate", "25", "--no-store", "--duration-s", f"{args.window + 30:g}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(15)
        t0 = time.perf_counter()
        mon = json.loads(
            servecap(
                "monitor",
                url,
                "--once",
                "--json",
                "--no-store",
                "--interval-s",
                f"{args.window:g}",
                "-m",
                MODEL,
                "-g",
                GPU,
                "-l",
                LEN,
                *SLO,
            )
        )
        mon_s = time.perf_counter() - t0 - args.window
        load.wait(timeout=args.window + 120)
        h = mon["headroom"]
        if h is None:
            raise SystemExit(f"monitor gave no headroom: {mon['notes']}")
        # 2. capacity --rate for the same model and mix
        cap = json.loads(
            servecap(
                "capacity",
                "--rate",
                "--json",
                "-m",
                MODEL,
                "-g",
                GPU,
                "-l",
                LEN,
                *SLO,
                "-p",
                f"{round(h['prompt_tokens'])}",
                "-o",
                f"{round(h['output_tokens'])}",
            )
        )
        # 3. bench until an SLO breaks
        first_break = None
        rows = []
        for rate in (float(r) for r in args.rates.split(",")):
            s = bench(url, rate, args.duration)
            ttft, tpot = s["ttft_s"]["p99"], s["tpot_s"]["p99"]
            broke = ttft is None or ttft > TTFT_SLO_S or (tpot is not None and tpot > TPOT_SLO_S)
            rows.append((rate, s["throughput_req_s"], ttft, tpot, broke))
            if broke:
                first_break = rate
                break
    finally:
        os.killpg(emu.pid, signal.SIGTERM)
        emu.wait(timeout=30)

    lo, hi = h["capacity_interval"]
    print(
        f"monitor  (window {h['load_interval'][0]:.1f}-{h['load_interval'][1]:.1f} req/s observed, "
        f"{h['load_per_replica']:.2f} point; engine model {mon_s:.1f} s of CPU+wall):"
    )
    print(
        f"  SLOs break at {h['capacity_per_replica']:.2f} req/s per replica, 95% {lo:.2f}-{hi:.2f} "
        f"({h['limited_by']}); headroom {h['traffic_headroom']:+.0%}; step time x{h['step_time_scale']:.3f}"
    )
    bracket = cap["max_load_bracket"]
    print(f"capacity --rate: {cap['max_rate_req_s']:.2f} req/s (missed at {bracket[1]})")
    print("bench sweep: rate, achieved req/s, p99 TTFT ms, p99 TPOT ms, broke")
    for rate, thr, ttft, tpot, broke in rows:
        print(
            f"  {rate:6.1f} {thr:8.2f} {ttft * 1e3 if ttft else float('nan'):9.1f} "
            f"{tpot * 1e3 if tpot else float('nan'):8.1f}  {'BROKE' if broke else 'ok'}"
        )
    inside = lo <= cap["max_rate_req_s"] <= hi
    print(f"check: capacity's {cap['max_rate_req_s']:.2f} within monitor's interval {lo:.2f}-{hi:.2f}: {inside}")
    if first_break is None:
        print("check: bench met the SLOs at every rate swept: widen --rates")
    else:
        err = h["capacity_per_replica"] / first_break - 1
        print(
            f"check: monitor's {h['capacity_per_replica']:.2f} vs bench's first break at {first_break:g} req/s: "
            f"{err:+.1%} (within 25%: {abs(err) <= 0.25})"
        )


if __name__ == "__main__":
    main()
