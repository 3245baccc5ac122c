"""``/health`` while the heaviest jobs run: a real ``servecap serve`` on 127.0.0.1 with
``--max-jobs 8``, eight jobs at the API's limits started at once (monitor replays of an 11-hour,
20,000-sample recording, and fleet simulations of 200,000 requests), ``/health`` asked every
50 ms from before the first submit until ``--seconds`` have passed. Prints ``/health``'s p50, p99
and max with no job (the reference, same server), and while the jobs are submitted and run.
Target (issue 33): p99 under 100 ms.

    .venv/bin/python benchmarks/api_health_under_jobs.py [--seconds 30] [--jobs 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from servecap.monitor.store import MonitorStore
from servecap.monitor.window import WindowStats
from servecap.results.stats import percentile

POOL = {"name": "main", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "cold_start": "instant"}
REPLAY_FLEET = {"pools": [{**POOL, "replicas": 2, "autoscaler": {"preset": "keda-vllm", "max_replicas": 16}}]}
FLEET = {
    "fleet": {"pools": [{**POOL, "replicas": 16}]},
    "workload": {
        "arrival": {"kind": "poisson", "rate_per_s": 50},
        "num_requests": 200_000,
        "prompt_tokens": 512,
        "output_tokens": 128,
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _recording(db: Path, samples: int) -> None:
    """What ``servecap monitor --db`` writes for one replica every 2 s over ``samples`` ticks: a
    rate that moves every tick (no two neighbours equal)."""
    store = MonitorStore(db, ["http://a/metrics"])
    store._con.execute("PRAGMA synchronous = OFF")  # a throw-away file: no fsync per sample
    store._con.execute("PRAGMA journal_mode = MEMORY")
    for i in range(1, samples + 1):
        t = 2.0 * i
        rate = 3.0 + 2.0 * ((i * 7919) % 100) / 100
        for url in ("http://a/metrics", "fleet"):
            store.add_up(WindowStats(url, 2.0, 5, 0, 0.1, rate, rate * 512, rate * 128, 0.0, 0.0, {}), t)
    store.close()


async def _health(url: str, until: float, out: list[float]) -> None:
    async with httpx.AsyncClient(timeout=30) as c:
        while time.monotonic() < until:
            t0 = time.perf_counter()
            r = await c.get(f"{url}/api/v1/health")
            assert r.status_code == 200
            out.append((time.perf_counter() - t0) * 1e3)
            await asyncio.sleep(0.05)


def _line(label: str, ms: list[float]) -> str:
    return (
        f"{label}: {len(ms)} requests, p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
        f"max {max(ms):.1f} ms"
    )


async def _run(url: str, seconds: float, jobs: int) -> None:
    idle: list[float] = []
    await _health(url, time.monotonic() + 5, idle)
    print(_line("no job (reference)", idle))
    submitting: list[float] = []
    running: list[float] = []
    async with httpx.AsyncClient(timeout=900) as c:
        bodies = [
            ("/api/v1/monitor/replay", {"fleet": REPLAY_FLEET, "seed": i}) if i % 2 == 0 else ("/api/v1/fleet/simulate", FLEET)
            for i in range(jobs)
        ]  # fmt: skip
        watch = asyncio.ensure_future(_health(url, time.monotonic() + 3600, submitting))
        t0 = time.perf_counter()
        answers = await asyncio.gather(*(c.post(url + path, json=body) for path, body in bodies))
        submit_s = time.perf_counter() - t0
        watch.cancel()
        accepted = sum(1 for r in answers if r.status_code == 202)
        for r in answers:
            if r.status_code != 202:
                print(f"refused: {r.status_code} {r.text[:200]}")
        await _health(url, time.monotonic() + seconds, running)
        states = [j["state"] for j in (await c.get(url + "/api/v1/jobs")).json()]
        print(f"{accepted} of {jobs} jobs accepted in {submit_s:.1f} s (their checks in threads); "
              f"after {seconds:g} s more: {states.count('running')} running, {states.count('done')} done")  # fmt: skip
        for j in (await c.get(url + "/api/v1/jobs")).json():
            await c.delete(f"{url}/api/v1/jobs/{j['id']}")
    if submitting:
        print(_line("while the 8 bodies were checked", submitting))
    print(_line(f"while {jobs} heavy jobs ran", running))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--samples", type=int, default=20_000)
    args = ap.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.sqlite"
        _recording(db, args.samples)
        cmd = [sys.executable, "-m", "servecap", "serve", "--port", str(port), "--data-dir", tmp, "--db", str(db)]
        cmd += ["--plan-workers", "0", "--max-jobs", str(args.jobs)]
        proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=os.environ.copy())
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"{url}/api/v1/health", timeout=2)
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise SystemExit("servecap serve did not start") from None
                    time.sleep(0.1)
            print(f"cores: {os.cpu_count()}, recording: {args.samples:,} samples of 2 s")
            asyncio.run(_run(url, args.seconds, args.jobs))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
