"""HTTP API latency: ``POST /api/v1/plan`` under 50 concurrent clients, and how fast a
simulation job is accepted, against a real ``servecap serve`` process on 127.0.0.1.

Prints the plan API's p50/p99/max latency and requests/s, and the accept latency of simulation
jobs (submit -> 202 with the job id), p50/p99. Targets (issue 12): plan p99 under 100 ms with 50
clients; a simulation job accepted in under 50 ms.

    .venv/bin/python benchmarks/api_latency.py [--clients 50] [--requests 2000] [--jobs 20] [--server-cpu 0] [--client raw|httpx] [--plan-workers 0,2]

``--server-cpu 0`` pins the server to CPU 0 and this client to the other CPUs, so the figures are
the server's own on one core rather than server and client sharing the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx

from servecap.results.stats import percentile

PLAN = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192, "tpot_slo_ms": 50}
SIM = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192, "rate": 5, "num_requests": 200}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_ready(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as c:
        while time.monotonic() < deadline:
            try:
                if (await c.get(f"{url}/api/v1/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("servecap serve did not start")


async def _plan_load(url: str, clients: int, total: int, distinct: bool) -> tuple[list[float], float]:
    """``total`` plans from ``clients`` concurrent clients; ``distinct``: every body differs (no
    cache hit: the cost of computing plans), else one body repeated (a shared link)."""
    latencies: list[float] = []
    sent = 0

    async def worker(c: httpx.AsyncClient) -> None:
        nonlocal sent
        while sent < total:
            sent += 1
            body = {**PLAN, "prompt_tokens": 100 + sent} if distinct else PLAN
            t0 = time.perf_counter()
            r = await c.post(f"{url}/api/v1/plan", json=body)
            latencies.append(time.perf_counter() - t0)
            r.raise_for_status()

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as c:
        await c.post(f"{url}/api/v1/plan", json=PLAN)  # warm the catalog caches
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for _ in range(clients)))
        wall = time.perf_counter() - t0
    return latencies, wall


async def _plan_load_raw(url: str, clients: int, total: int, distinct: bool) -> tuple[list[float], float]:
    """:func:`_plan_load` with the project's own HTTP/1.1 client (``servecap.measure.http1``),
    a fraction of httpx's CPU per request: the figures are the server's, not the client's."""
    from servecap.measure.http1 import RawClient

    latencies: list[float] = []
    sent = 0
    headers = {"content-type": "application/json"}

    async def post(c: RawClient, body: dict[str, object]) -> None:
        status: list[int] = []
        prepared = c.prepare("POST", f"{url}/api/v1/plan", json.dumps(body).encode(), headers)
        await c.stream(prepared, status.append, lambda _b: None, stall_timeout_s=60.0)
        if status != [200]:
            raise SystemExit(f"plan API answered {status}")

    async def worker(c: RawClient) -> None:
        nonlocal sent
        while sent < total:
            sent += 1
            body = {**PLAN, "prompt_tokens": 100 + sent} if distinct else PLAN
            t0 = time.perf_counter()
            await post(c, body)
            latencies.append(time.perf_counter() - t0)

    async with RawClient() as c:
        await post(c, PLAN)  # warm the catalog caches
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for _ in range(clients)))
        wall = time.perf_counter() - t0
    return latencies, wall


async def _job_accepts(url: str, jobs: int) -> list[float]:
    out: list[float] = []
    async with httpx.AsyncClient(timeout=60) as c:
        for _ in range(jobs):
            t0 = time.perf_counter()
            r = await c.post(f"{url}/api/v1/simulate", json=SIM)
            out.append(time.perf_counter() - t0)
            if r.status_code == 429:  # the queue is full: let it drain
                await asyncio.sleep(1.0)
                continue
            r.raise_for_status()
            job = r.json()["id"]
            while (await c.get(f"{url}/api/v1/jobs/{job}")).json()["state"] not in ("done", "failed", "cancelled"):
                await asyncio.sleep(0.05)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument(
        "--client",
        choices=["raw", "httpx"],
        default="raw",
        help="raw: the project's own HTTP/1.1 client (light: the figures are the server's); httpx: as most callers",
    )
    ap.add_argument(
        "--server-cpu",
        type=int,
        default=None,
        help="pin the server to this CPU and the client to the others, so they do not compete for one core",
    )
    ap.add_argument(
        "--plan-workers",
        type=lambda v: v.split(","),
        default=["default"],
        help="comma-separated servecap serve --plan-workers settings to run one after the other (e.g. 0,2); "
        "default: the server's default (the CPU count)",
    )
    args = ap.parse_args()
    server_affinity: set[int] | None = None
    if args.server_cpu is not None:
        cpus = os.sched_getaffinity(0)
        server_affinity = {args.server_cpu}
        os.sched_setaffinity(0, (cpus - server_affinity) or cpus)
    for workers in args.plan_workers:
        _run_server(args, workers, server_affinity)


def _run_server(args: argparse.Namespace, workers: str, server_affinity: set[int] | None) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    print(f"-- servecap serve --plan-workers {workers}")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "servecap", "serve", "--port", str(port), "--data-dir", tmp, "--db", f"{tmp}/r.db"]
        if workers != "default":
            cmd += ["--plan-workers", workers]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        if server_affinity is not None:
            os.sched_setaffinity(proc.pid, server_affinity)
        try:
            asyncio.run(_wait_ready(url))
            for distinct in (True, False):
                load = _plan_load_raw if args.client == "raw" else _plan_load
                lat, wall = asyncio.run(load(url, args.clients, args.requests, distinct))
                ms = [x * 1e3 for x in lat]
                kind = "distinct bodies (computed)" if distinct else "one body repeated (cached)"
                print(
                    f"plan API, {args.clients} concurrent {args.client} clients, {kind}: {len(lat):,} requests in {wall:.2f} s "
                    f"({len(lat) / wall:,.0f} req/s)"
                )
                print(
                    f"  latency p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
                    f"max {max(ms):.1f} ms (target p99 < 100 ms)"
                )
            acc = [x * 1e3 for x in asyncio.run(_job_accepts(url, args.jobs))]
            print(
                f"simulation job accepted: p50 {percentile(acc, 50):.1f} ms, p99 {percentile(acc, 99):.1f} ms "
                f"over {len(acc)} submissions (target < 50 ms)"
            )
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
