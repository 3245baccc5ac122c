"""The hostile-input probe of issue 24 against a real ``servecap serve`` on 127.0.0.1, rerun.

Against one server process (default limits, a throw-away data folder) it measures:

- a 1 GB chunked upload (no Content-Length): bytes the server took before it answered 413 and
  closed, the time, and the server's peak resident memory (``VmHWM``) before and after;
- ``--uploads`` distinct 1 MB configs: the upload folder's bytes and files afterwards (the
  quota's bound), and the time;
- a simulation asking for 10^9 requests, a day of 100,000 users with no think time, 10^7
  replicas, a config with 3,000,000 layers, and bodies naming server files: each status and
  how long the refusal took;
- a request with a foreign Host header;
- issue 33's shapes (:data:`R4_PROBES`): malformed Host and Origin headers, duplicate JSON keys,
  other encodings and content types, an encoded-slash redirect, implausible P/D links, scrape
  periods and time series, P/D layouts; each must be refused (4xx, one line, no traceback) in
  under 2 s, and the tally prints tracebacks, hangs, wrong accepts and 5xx;
- 1,100 half-open connections, then ``/health``'s latency (the request-read deadline);
- the P/D emulator (a prefill and a decode ``servecap emulate`` process): bootstrap fields that
  aim it elsewhere or are malformed, the KV-room endpoint without the secret, and six
  never-answering bootstraps followed by a real request.

    .venv/bin/python benchmarks/api_hostile.py [--uploads 500] [--body-mb 1000] [--half-open 1100]
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
    ap.add_argument("--half-open", type=int, default=1100)
    ap.add_argument("--skip-old", action="store_true", help="only issue 33's probes")
    ap.add_argument("--only-issue31", action="store_true", help="only issue 31's probes (traces, KV tiers, agentic)")
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
                _issue_31(c)
                if args.only_issue31:
                    return
                _reliability_4(c, port, args.half_open)
                if args.skip_old:
                    return
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


WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 1},
    "num_requests": 10,
    "prompt_tokens": 100,
    "output_tokens": 10,
}
DAY = {**WORKLOAD, "num_requests": None, "arrival": {"kind": "poisson", "rate_per_s": 0.5}, "duration_s": 86_400}
_POOL = {**MODEL, "replicas": 1, "cold_start": "instant"}
PD_FLEET = {"pools": [{**_POOL, "name": "p", "role": "prefill"}, {**_POOL, "name": "d", "role": "decode"}]}
JSON = {"Content-Type": "application/json"}
PLAN_TEXT = '{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}'


def _fleet(**top: Any) -> dict[str, Any]:
    return {"json": {"fleet": {**PD_FLEET, **top}, "workload": WORKLOAD}}


def _pools(*pools: dict[str, Any]) -> dict[str, Any]:
    return {"json": {"fleet": {"pools": list(pools)}, "workload": WORKLOAD}}


R4_PROBES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("Host: localhost:56223@evil.example", "GET", "/api/v1/gpus", {"headers": {"Host": "localhost:56223@evil.example"}}),
    ("Host: [::1]evil.example", "GET", "/api/v1/gpus", {"headers": {"Host": "[::1]evil.example"}}),
    ("Host: localhost:99999", "GET", "/api/v1/gpus", {"headers": {"Host": "localhost:99999"}}),
    ("two Origin headers", "POST", "/api/v1/plan",
     {"json": MODEL, "headers": [("Origin", "http://127.0.0.1"), ("Origin", "http://evil.example")]}),
    ("Origin with a path", "POST", "/api/v1/plan", {"json": MODEL, "headers": {"Origin": "http://127.0.0.1/"}}),
    ("duplicate JSON key", "POST", "/api/v1/plan",
     {"content": b'{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "gpu": "B200"}', "headers": JSON}),
    ("UTF-16 body", "POST", "/api/v1/plan", {"content": PLAN_TEXT.encode("utf-16"), "headers": JSON}),
    ("text/plain body", "POST", "/api/v1/plan", {"content": PLAN_TEXT.encode(), "headers": {"Content-Type": "text/plain"}}),
    ("no content type", "POST", "/api/v1/plan", {"content": PLAN_TEXT.encode()}),
    ("/static/plan.html%2f", "GET", "/static/plan.html%2f", {}),
    ("kv_link 1e-9 GB/s", "POST", "/api/v1/fleet/simulate", _fleet(kv_link={"bandwidth_gb_s": 1e-9})),
    ("kv_link 1e-300 GB/s", "POST", "/api/v1/fleet/simulate", _fleet(kv_link={"bandwidth_gb_s": 1e-300})),
    ("kv_link latency 1e300 us", "POST", "/api/v1/fleet/simulate", _fleet(kv_link={"latency_us": 1e300})),
    ("timeseries_interval_s 1e-9", "POST", "/api/v1/fleet/simulate", _fleet(timeseries_interval_s=1e-9)),
    ("scrape_interval_ms 1e-9", "POST", "/api/v1/fleet/simulate", _fleet(router={"scrape_interval_ms": 1e-9})),
    ("a day of time series at 0.05 s", "POST", "/api/v1/fleet/simulate",
     {"json": {"fleet": {"pools": [_POOL], "timeseries_interval_s": 0.05}, "workload": DAY}}),
    ("prefill pool only", "POST", "/api/v1/fleet/simulate", _pools({**_POOL, "role": "prefill"})),
    ("prefill and decode of different models", "POST", "/api/v1/fleet/simulate",
     _pools({**_POOL, "role": "prefill"}, {**_POOL, "role": "decode", "model": "Qwen/Qwen2.5-7B-Instruct"})),
    ("prefill and decode of different engines", "POST", "/api/v1/fleet/simulate",
     _pools({**_POOL, "role": "prefill"}, {**_POOL, "role": "decode", "engine": "sglang"})),
    ("0 decode replicas", "POST", "/api/v1/fleet/simulate",
     _pools({**_POOL, "role": "prefill"}, {**_POOL, "role": "decode", "replicas": 0})),
]  # fmt: skip


def _sim_trace(**trace: Any) -> dict[str, Any]:
    return {"json": {**MODEL, "trace": {"kind": "trace", "path": "sample:agentic", **trace}}}


def _fleet_workload(arrival: dict[str, Any], **body: Any) -> dict[str, Any]:
    workload = (
        {"arrival": arrival} if body.get("fidelity") == "cache-replay" else {"arrival": arrival, "num_requests": 20}
    )
    return {"json": {"fleet": {"pools": [_POOL]}, "workload": workload, **body}}


def _plan(**plan: Any) -> dict[str, Any]:
    base = {"model": MODEL["model"], "candidates": [{"gpu": "H100"}], "traffic": {"peak_rps": 1}}
    return {"json": {"plan": {**base, **plan}}}


_AGENTIC = {"kind": "agentic", "sessions": 3}
_MOONCAKE = {"kind": "trace", "path": "sample:mooncake-conversation"}
# issue 31's fields over HTTP: each must be refused (4xx, one line) within 2 s
R31_PROBES: list[tuple[str, str, str, dict[str, Any]]] = [
    *(
        (f"simulate trace {key} {str(value)[:40]!r}", "POST", "/api/v1/simulate", _sim_trace(**{key: value}))
        for key, value in (
            ("time_scale", 0), ("time_scale", -1), ("time_scale", 1e-300), ("time_scale", 1e300),
            ("start_s", -1), ("start_s", 1e300), ("end_s", 0), ("end_s", 1e-300),
            ("trace_block_tokens", 0), ("trace_block_tokens", 10**12), ("format", "x"),
            ("path", "/etc/passwd"), ("path", "sample:nope"), ("path", ""), ("path", "../../README.md"),
            ("path", "x" * 5000), ("start_s", 1e8), ("format", "azure"), ("format", "sessions"),
        )
    ),
    ("simulate trace window end before start", "POST", "/api/v1/simulate", _sim_trace(start_s=5, end_s=2)),
    ("fleet trace window past the trace", "POST", "/api/v1/fleet/simulate", _fleet_workload({**_MOONCAKE, "start_s": 1e8})),
    ("plan levers ['cpu-teir']", "POST", "/api/v1/fleet/plan", _plan(levers=["cpu-teir"])),
    ("simulate trace NaN literal", "POST", "/api/v1/simulate",
     {"content": b'{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "trace": {"kind": "trace", '
                 b'"path": "sample:agentic", "time_scale": NaN}}', "headers": JSON}),
    *(
        (f"simulate {key} {value!r}", "POST", "/api/v1/simulate", {"json": {**MODEL, "rate": 1, key: value}})
        for key, value in (
            ("cpu_kv_gib", 0), ("cpu_kv_gib", -1), ("cpu_kv_gib", 1e-300), ("cpu_kv_gib", 1e300),
            ("ssd_kv_gib", 1e300), ("remote_kv_tib", 1e-300), ("kv_load", "x"), ("kv_load", "async"),
            ("kv_store", "on-compute"), ("kv_store", None),
        )
    ),
    *(
        (f"fleet agentic {key} {value!r}", "POST", "/api/v1/fleet/simulate", _fleet_workload({**_AGENTIC, key: value}))
        for key, value in (
            ("sessions", 0), ("sessions", 10**9), ("session_rate_per_s", 1e-300), ("turns_mean", 1e300),
            ("turn_gap_s", -1), ("subagent_probability", 1.5), ("block_tokens", 1), ("max_context_tokens", 1e300),
            ("system_prompt_tokens", 10**7), ("first_prompt_sigma", 100),
        )
    ),
    ("fleet agentic: 1e10 block ids", "POST", "/api/v1/fleet/simulate",
     _fleet_workload({**_AGENTIC, "sessions": 10, "turns_mean": 1000, "first_prompt_tokens": 1e7,
                      "turn_new_tokens": 1e7, "max_context_tokens": 2**24, "block_tokens": 16})),
    ("cache replay of a CSV trace", "POST", "/api/v1/fleet/simulate",
     _fleet_workload({"kind": "trace", "path": "sample:azure-code-2023"}, fidelity="cache-replay")),
    ("cache replay with a window", "POST", "/api/v1/fleet/simulate",
     _fleet_workload({**_MOONCAKE, "start_s": 5}, fidelity="cache-replay")),
    ("cache replay, async loads", "POST", "/api/v1/fleet/simulate",
     {"json": {"fleet": {"pools": [{**_POOL, "cpu_kv_gib": 8, "kv_load": "async"}]},
               "workload": {"arrival": _MOONCAKE}, "fidelity": "cache-replay"}}),
    ("pool kv_load async without a tier", "POST", "/api/v1/fleet/simulate",
     {"json": {"fleet": {"pools": [{**_POOL, "kv_load": "async"}]}, "workload": WORKLOAD}}),
    ("plan cpu_tier_gib without its lever", "POST", "/api/v1/fleet/plan", _plan(cpu_tier_gib=64)),
    ("plan cpu_tier_gib 1e300", "POST", "/api/v1/fleet/plan", _plan(levers=["cpu-tier"], cpu_tier_gib=1e300)),
    ("plan shared_store_tib 0", "POST", "/api/v1/fleet/plan", _plan(levers=["shared-store"], shared_store_tib=0)),
]  # fmt: skip


def _issue_31(c: httpx.Client) -> None:
    tally = Tally()
    print("issue 31 (traces, KV tiers, agentic sessions):")
    for label, method, path, kw in R31_PROBES:
        status, ms, text, _ = _probe(c, method, path, **kw)
        tally.refusal(label, status, ms, text)
    print(f"  jobs started by the probes: {len(c.get('/api/v1/jobs').json())}")
    tally.report("issue 31")


class Tally:
    def __init__(self) -> None:
        self.tracebacks = self.hangs = self.accepted = self.fivexx = 0
        self.slowest_ms = 0.0
        self.n = 0

    def refusal(self, label: str, status: int | None, ms: float, text: str) -> None:
        self.n += 1
        if status is None:
            self.hangs += 1
        elif status >= 500:
            self.fivexx += 1
        elif status < 400:
            self.accepted += 1
        if "Traceback" in text or "\n" in text:
            self.tracebacks += 1
        self.slowest_ms = max(self.slowest_ms, ms)
        print(f"  {label}: {status} in {ms:,.1f} ms: {text[:160]}")

    def report(self, what: str) -> None:
        print(
            f"{what}: {self.n} probes: {self.tracebacks} tracebacks, {self.hangs} hangs, {self.accepted} wrongly "
            f"accepted, {self.fivexx} 5xx; slowest refusal {self.slowest_ms:,.0f} ms"
        )


def _probe(c: httpx.Client, method: str, path: str, **kw: Any) -> tuple[int | None, float, str, httpx.Response | None]:
    started = time.perf_counter()
    try:
        r = c.request(method, path, timeout=10, **kw)
    except httpx.TimeoutException:
        return None, (time.perf_counter() - started) * 1e3, "no answer in 10 s", None
    ms = (time.perf_counter() - started) * 1e3
    try:
        text = str(r.json()["error"]["message"]) if r.status_code >= 400 else r.text[:80]
    except (ValueError, KeyError, TypeError):
        text = r.text[:200]
    return r.status_code, ms, text, r


def _reliability_4(c: httpx.Client, port: int, half_open: int) -> None:
    tally = Tally()
    print("issue 33 (the web server):")
    for label, method, path, kw in R4_PROBES:
        status, ms, text, r = _probe(c, method, path, **kw)
        if r is not None and "location" in r.headers:
            text = f"redirects to {r.headers['location']}"
            status = 302
        tally.refusal(label, status, ms, text)
    raw = b"GET /api/v1/gpus HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # httpx sends one Host
        sock.sendall(raw)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    status = int(head.split()[1]) if head else None
    tally.refusal(
        "two Host headers (own, foreign)", status, (time.perf_counter() - t0) * 1e3, payload.decode("latin-1")[:160]
    )
    page = c.get("/plan")
    framing = page.headers.get("x-frame-options") == "DENY" and "frame-ancestors 'none'" in page.headers.get(
        "content-security-policy", ""
    )
    tally.refusal(
        "GET /plan framing headers", 403 if framing else 200, 0.0, "X-Frame-Options DENY, CSP frame-ancestors 'none'"
    )
    print(f"  jobs started by the probes: {len(c.get('/api/v1/jobs').json())}")
    tally.report("issue 33, web server")
    _half_open(c, port, half_open)
    _pd_emulator()


def _half_open(c: httpx.Client, port: int, n: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 256)), hard))
    socks = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n" if i % 2 else b"")
            socks.append(s)
        lat = []
        for _ in range(20):
            t0 = time.perf_counter()
            c.get("/api/v1/health", timeout=30)
            lat.append((time.perf_counter() - t0) * 1e3)
        print(f"{n:,} half-open connections held: /health p50 {sorted(lat)[10]:.1f} ms, max {max(lat):.1f} ms")
    finally:
        for s in socks:
            s.close()


def _pd_emulator() -> None:
    """A prefill and a decode emulator (Llama-3.1-8B on an H100, a shared secret): bootstrap fields
    that aim the decode server elsewhere or are malformed, the KV endpoint without the secret, and
    six never-answering bootstraps before a real pair request."""
    secret = "benchmark-pd-secret-0123456789"
    pre_port, dec_port, quiet = _free_port(), _free_port(), socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(64)  # accepts, never answers
    quiet_port = quiet.getsockname()[1]
    base = [
        sys.executable,
        "-m",
        "servecap",
        "emulate",
        "-m",
        "meta-llama/Llama-3.1-8B",
        "-g",
        "H100",
        "--max-model-len",
        "8192",
    ]
    env = {**os.environ, "SERVECAP_PD_SECRET": secret}
    procs = [
        subprocess.Popen(
            [*base, "--role", role, "--port", str(p)], env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )
        for role, p in (("prefill", pre_port), ("decode", dec_port))
    ]
    tally = Tally()
    try:
        for p in (pre_port, dec_port):
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{p}/health", timeout=2)
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise SystemExit("servecap emulate did not start") from None
                    time.sleep(0.2)
        prompt = "x" * 4000
        body = {"model": "meta-llama/Llama-3.1-8B", "prompt": prompt, "max_tokens": 4, "bootstrap_room": 1}
        print("issue 33 (the P/D emulator):")
        with httpx.Client(base_url=f"http://127.0.0.1:{dec_port}", timeout=30) as d:
            cases = [
                ("bootstrap_host 127.0.0.1:9999/injected/path?x=", {"bootstrap_host": f"127.0.0.1:{quiet_port}/injected/path?x=", "bootstrap_port": quiet_port}),
                ("bootstrap_port missing", {"bootstrap_host": "127.0.0.1"}),
                ("bootstrap_port 'abc'", {"bootstrap_host": "127.0.0.1", "bootstrap_port": "abc"}),
                ("bootstrap_port 70000", {"bootstrap_host": "127.0.0.1", "bootstrap_port": 70000}),
                ("a closed port", {"bootstrap_host": "127.0.0.1", "bootstrap_port": _free_port()}),
            ]  # fmt: skip
            for label, extra in cases:
                status, ms, text, _r = _probe(d, "POST", "/v1/completions", json={**body, **extra})
                tally.refusal(label, status, ms, text)
        with httpx.Client(base_url=f"http://127.0.0.1:{pre_port}", timeout=30) as pc:
            for label, kw in (("KV room without the secret", {}),
                              ("tp=0", {"params": {"tp": 0}, "headers": {"Authorization": f"Bearer {secret}"}}),
                              ("tp=-4", {"params": {"tp": -4}, "headers": {"Authorization": f"Bearer {secret}"}})):  # fmt: skip
                status, ms, text, _r = _probe(pc, "GET", "/servecap/pd/kv/5", **kw)
                tally.refusal(label, status, ms, text)
        tally.report("issue 33, P/D emulator")
        import asyncio

        async def starve() -> None:
            async with httpx.AsyncClient(timeout=60) as ac:
                stuck = [
                    asyncio.ensure_future(ac.post(f"http://127.0.0.1:{dec_port}/v1/completions",
                                                  json={**body, "bootstrap_room": 100 + i, "bootstrap_host": "127.0.0.1", "bootstrap_port": quiet_port}))
                    for i in range(6)
                ]  # fmt: skip
                await asyncio.sleep(1.0)
                t0 = time.perf_counter()
                pair = {**body, "bootstrap_room": 7, "bootstrap_host": "127.0.0.1", "bootstrap_port": pre_port}
                _rp, rd = await asyncio.gather(
                    ac.post(f"http://127.0.0.1:{pre_port}/v1/completions", json=pair),
                    ac.post(f"http://127.0.0.1:{dec_port}/v1/completions", json=pair),
                )
                print(
                    f"six never-answering bootstraps waiting: the next pair request {rd.status_code} in {(time.perf_counter() - t0) * 1e3:,.0f} ms"
                )
                for f in stuck:
                    f.cancel()

        asyncio.run(starve())
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # requests still waiting on the quiet peer
                p.kill()
                p.wait(timeout=10)
        quiet.close()


if __name__ == "__main__":
    main()
