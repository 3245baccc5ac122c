"""The hostile-input probe of issue 24 against a real ``servecap serve`` on 127.0.0.1, rerun.

Against one server process (default limits, a throw-away data folder) it measures:

- a 1 GB chunked upload (no Content-Length): bytes the server took before it answered 413 and
  closed, the time, and the server's peak resident memory (``VmHWM``) before and after;
- ``--uploads`` distinct 1 MB configs: the upload folder's bytes and files afterwards (the
  quota's bound), and the time;
- a simulation asking for 10^9 requests, a day of 100,000 users with no think time, 10^7
  replicas, a config with 3,000,000 layers, and bodies naming server files: each status and
  how long the refusal took;
- a request with a foreign Host header.

    .venv/bin/python benchmarks/api_hostile.py [--uploads 500] [--body-mb 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

CONFIG = json.loads(
    (Path(__file__).parents[1] / "src/servecap/catalog/data/models/meta-llama--Llama-3.1-8B.json").read_text()
)
MODEL = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _big_body(port: int, total_bytes: int) -> tuple[int, float, str]:
    """Stream ``total_bytes`` chunked; (bytes sent before the server closed, seconds, status line)."""
    chunk = b"9" * 65_536
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent = 0
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            b"POST /api/v1/models/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        try:
            while sent < total_bytes:
                s.sendall(frame)
                sent += len(chunk)
        except OSError:
            pass
        answer = b""
        try:
            while b"\r\n" not in answer:
                part = s.recv(4096)
                if not part:
                    break
                answer += part
        except OSError:
            pass
    return sent, time.perf_counter() - started, answer.split(b"\r\n", 1)[0].decode(errors="replace")


def _timed(c: httpx.Client, method: str, path: str, **kw: Any) -> tuple[int, float, str]:
    started = time.perf_counter()
    r = c.request(method, path, **kw)
    elapsed_ms = (time.perf_counter() - started) * 1e3
    text = r.json()["error"]["message"] if r.status_code >= 400 else ""
    return r.status_code, elapsed_ms, text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uploads", type=int, default=500)
    ap.add_argument("--body-mb", type=int, default=1000)
    args = ap.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "servecap", "serve", "--port", str(port), "--data-dir", tmp]
        cmd += ["--db", str(Path(tmp) / "runs.sqlite"), "--plan-workers", "0"]
        proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=os.environ.copy())
        try:
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, timeout=60) as c:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        c.get("/api/v1/health")
                        break
                    except httpx.TransportError:
                        if time.monotonic() > deadline:
                            raise SystemExit("servecap serve did not start") from None
                        time.sleep(0.1)
                rss0 = _peak_rss_mb(proc.pid)
                sent, secs, status = _big_body(port, args.body_mb * 1024 * 1024)
                print(
                    f"{args.body_mb:,} MB chunked upload: {status!r} after {sent / 1e6:,.1f} MB sent, "
                    f"{secs:.2f} s; server peak RSS {rss0:,.0f} -> {_peak_rss_mb(proc.pid):,.0f} MB"
                )
                pad = "x" * 1_000_000
                started = time.perf_counter()
                codes: dict[int, int] = {}
                for i in range(args.uploads):
                    config = {**CONFIG, "vocab_size": 128_256 + i, "_padding": pad[: 990_000 - len(str(i))]}
                    r = c.post("/api/v1/models/upload", json={"config": config})
                    codes[r.status_code] = codes.get(r.status_code, 0) + 1
                files = list((Path(tmp) / "uploads").glob("*"))
                print(
                    f"{args.uploads} distinct ~1 MB uploads: statuses {codes}, {time.perf_counter() - started:.1f} s; "
                    f"on disk {sum(f.stat().st_size for f in files) / 1e6:,.1f} MB in {len(files)} files"
                )
                layers = {**CONFIG, "num_hidden_layers": 3_000_000}
                probes = [
                    (
                        "10^9 requests",
                        "POST",
                        "/api/v1/simulate",
                        {"json": {**MODEL, "rate": 100_000, "duration_s": 10_000}},
                    ),
                    (
                        "100,000 users, no think time, a day",
                        "POST",
                        "/api/v1/simulate",
                        {"json": {**MODEL, "users": 100_000, "think_time_s": 0, "duration_s": 86_400}},
                    ),
                    (
                        "10^7 replicas",
                        "POST",
                        "/api/v1/fleet/simulate",
                        {
                            "json": {
                                "fleet": {"pools": [{**MODEL, "name": "a", "replicas": 10_000_000}]},
                                "workload": {
                                    "arrival": {"kind": "poisson", "rate_per_s": 1},
                                    "num_requests": 10,
                                    "prompt_tokens": 100,
                                    "output_tokens": 10,
                                },
                            }
                        },
                    ),
                    ("3,000,000 layers", "POST", "/api/v1/models/upload", {"json": {"config": layers}}),
                    ("model: /etc/passwd", "POST", "/api/v1/plan", {"json": {"model": "/etc/passwd", "gpu": "H100"}}),
                    ("model: README.md", "POST", "/api/v1/plan", {"json": {"model": "README.md", "gpu": "H100"}}),
                    (
                        "Host: rebind.attacker.example",
                        "POST",
                        "/api/v1/simulate",
                        {"json": {**MODEL, "rate": 1}, "headers": {"Host": "rebind.attacker.example"}},
                    ),
                ]
                for label, method, path, kw in probes:
                    code, ms, text = _timed(c, method, path, **kw)
                    print(f"{label}: {code} in {ms:,.1f} ms: {text}")
                print(f"jobs started: {len(c.get('/api/v1/jobs').json())}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
