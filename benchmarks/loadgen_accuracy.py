"""How far the load generator (and the emulator) can be trusted, against ``servecap emulate`` on
127.0.0.1 in a child process (no GIL shared with the client).

1. Rate: a constant-rate open loop at 50, 100, 200 and 500 requests/s (fixed-latency emulator,
   TTFT 5 ms, ITL 5 ms, 4 output tokens): achieved rate (over send times) vs target, and the
   dispatch lag.
2. TTFT error at 1,000 concurrent streams: 1,000 streams of 20 tokens 200 ms apart opened at
   500/s (all 1,000 open together for ~2 s); each request asks for ``servecap_timing``, so the client's recorded
   first-token time can be compared with the server's scheduled one (both ``perf_counter``,
   i.e. CLOCK_MONOTONIC, one clock for both processes on Linux). Reported: client-added
   first-token delay (client arrival - server schedule) and measured TTFT - the known 50 ms.
3. 2,000 concurrent streams, the emulator's token timing error (each token's write to its
   socket - its scheduled time, from the emulator's ``/servecap/stats``) and the client's
   arrival lag, p50/p99:
   a. on the fixed-latency reference (20 tokens 200 ms apart, opened at 1,000/s: tokens
      spread over time, ~10,000/s);
   b. on the engine model (Llama-3.1-8B on an H100, 64 -> 200 tokens, opened at 1,000/s): all
      2,000 requests decode in one batch, so each ~53 ms step hands 2,000 tokens out at the same
      scheduled instant. One write (one ``send`` syscall) per token is the floor: the last
      token of a step goes out ``tokens x write cost`` after the schedule; the step's start
      lag (its first write) and the write cost per token are printed to show that floor.

0. The client's HTTP/1.1 response parsing (``httptools``) alone: CPU per token read, no socket.

Every figure is printed with its target; the machine's load average is printed first (other
processes on the 2 cores move every latency figure).

    .venv/bin/python benchmarks/loadgen_accuracy.py            # ~1 minute
    .venv/bin/python benchmarks/loadgen_accuracy.py --quick    # smaller, ~30 s
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request
from typing import Any

from servecap.emulator.server import ServerProcess
from servecap.measure.checks import lag_check, rate_check
from servecap.measure.loadgen import LoadConfig, RunResult, run_open_loop
from servecap.results import percentile
from servecap.workload import RequestSpec as Req


def stats(url: str, reset: bool = False) -> dict[str, Any]:
    req = urllib.request.Request(
        url + ("/servecap/stats/reset" if reset else "/servecap/stats"), method="POST" if reset else "GET"
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.loads(r.read()))


def server_lags(res: RunResult) -> tuple[list[float], list[float]]:
    """(client first-token arrival - server's scheduled first token, every token likewise)."""
    first, every = [], []
    for t in res.traces:
        st = t.server_timing
        if not t.ok or not st or not st.get("token_times_s"):
            continue
        sched = st["token_times_s"]
        first.append(res.t0_perf_s + t.token_times_s[0] - sched[0])
        every += [res.t0_perf_s + a - b for a, b in zip(t.token_times_s, sched, strict=False)]
    return first, every


async def rate_part(url: str, rates: list[float], seconds: float) -> list[dict[str, Any]]:
    out = []
    cfg = LoadConfig(base_url=url, model="fixed")
    for rate in rates:
        n = int(rate * seconds)
        res = await run_open_loop(cfg, [Req(i, i / rate, 32, 4) for i in range(n)])
        rc, lc = rate_check(res.traces), lag_check(res.traces)
        errors = sum(1 for t in res.traces if not t.ok)
        assert rc.value is not None and rc.limit is not None
        out.append(
            {
                "target": rate,
                "achieved": rc.value,
                "error": rc.value / rc.limit - 1.0,
                "lag_p99_ms": (lc.value or 0.0) * 1e3,
                "requests": n,
                "errors": errors,
                "cpu": res.client.cpu_fraction,
            }
        )
        print(
            f"  rate {rate:6.0f}/s: achieved {rc.value:8.2f}/s ({rc.value / rc.limit - 1:+.3%}), "
            f"dispatch lag p99 {(lc.value or 0) * 1e3:.2f} ms, {errors} errors, client CPU {res.client.cpu_fraction:.0%}",
            flush=True,
        )
    return out


async def streams_part(url: str, model: str, n: int, rate: float, output: int, ttft_s: float | None) -> dict[str, Any]:
    cfg = LoadConfig(base_url=url, model=model, extra_body={"servecap_timing": True})
    stats(url, reset=True)
    res = await run_open_loop(cfg, [Req(i, i / rate, 64, output) for i in range(n)])
    emu = stats(url)
    first, every = server_lags(res)
    ok = sum(1 for t in res.traces if t.ok)
    d: dict[str, Any] = {
        "streams": n,
        "completed": ok,
        "max_in_flight": res.client.max_in_flight,
        "client_first_token_lag_p50_ms": percentile(first, 50) * 1e3,
        "client_first_token_lag_p99_ms": percentile(first, 99) * 1e3,
        "client_token_lag_p50_ms": percentile(every, 50) * 1e3,
        "client_token_lag_p99_ms": percentile(every, 99) * 1e3,
        "emulator_token_lag_p50_ms": (emu["token_lag_p50_s"] or 0) * 1e3,
        "emulator_token_lag_p99_ms": (emu["token_lag_p99_s"] or 0) * 1e3,
        "emulator_step_lag_p50_ms": (emu["step_lag_p50_s"] or 0) * 1e3,
        "emulator_step_lag_p99_ms": (emu["step_lag_p99_s"] or 0) * 1e3,
        "emulator_write_us_per_token": (emu["write_s_per_token"] or 0) * 1e6,
        "steps": emu["steps"],
        "tokens": emu["tokens"],
        "client_loop_lag_p99_ms": res.client.loop_lag_p99_s * 1e3,
        "client_cpu": res.client.cpu_fraction,
    }
    if ttft_s is not None:
        ttfts = [t.ttft_s for t in res.traces if t.ok and t.ttft_s is not None]
        d["ttft_error_p50_ms"] = (percentile(ttfts, 50) - ttft_s) * 1e3
        d["ttft_error_p99_ms"] = (percentile(ttfts, 99) - ttft_s) * 1e3
    errs: dict[str, int] = {}
    for t in res.traces:
        if t.error:
            errs[t.error] = errs.get(t.error, 0) + 1
    d["errors"] = errs
    return d


_TOKEN_EVENT = (
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,'
    b'"text":" the","logprobs":null,"finish_reason":null}]}\n\n'
)


async def parse_cost_us(requests: int = 300, tokens: int = 200) -> float:
    """CPU time of the client's HTTP/1.1 response handling (httptools) per token read: a chunked
    SSE response fed to one connection a chunk per read, no socket (the part of the
    client-added delay that is parsing)."""
    from servecap.measure.http1 import _Conn

    class Wire:
        def write(self, data: bytes) -> None:
            pass

        def abort(self) -> None:
            pass

    chunk = b"%x\r\n%s\r\n" % (len(_TOKEN_EVENT), _TOKEN_EVENT)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    loop = asyncio.get_running_loop()
    sink: list[bytes] = []
    t = time.process_time()
    for _ in range(requests):
        conn = _Conn(loop)
        conn.connection_made(Wire())  # type: ignore[arg-type]
        done = conn.begin(b"POST / HTTP/1.1\r\n\r\n", lambda s: None, sink.append, 5.0)
        conn.data_received(head)
        for _ in range(tokens):
            conn.data_received(chunk)
        conn.data_received(b"0\r\n\r\n")
        await done
        sink.clear()
    return (time.process_time() - t) / (requests * tokens) * 1e6


def mark(value: float, limit: float) -> str:
    return f"(target < {limit:g}: {'met' if value < limit else 'MISSED'})"


def print_streams(d: dict[str, Any], n: int) -> None:
    print(f"  max in flight {d['max_in_flight']}, completed {d['completed']}/{n}, errors {d['errors']}")
    p50, p99 = d["emulator_token_lag_p50_ms"], d["emulator_token_lag_p99_ms"]
    print(f"  emulator token timing error (write - schedule): p50 {p50:.2f} ms, p99 {p99:.2f} ms {mark(p99, 5.0)}")
    print(
        f"  emulator step start (first write - schedule): p50 {d['emulator_step_lag_p50_ms']:.2f} ms, "
        f"p99 {d['emulator_step_lag_p99_ms']:.2f} ms; write cost {d['emulator_write_us_per_token']:.1f} us/token, "
        f"{d['tokens'] / max(1, d['steps']):.0f} tokens/step"
    )
    print(
        f"  client arrival - schedule, every token: p50 {d['client_token_lag_p50_ms']:.2f} ms, "
        f"p99 {d['client_token_lag_p99_ms']:.2f} ms; client CPU {d['client_cpu']:.0%}, "
        f"event-loop lateness p99 {d['client_loop_lag_p99_ms']:.2f} ms",
        flush=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object at the end")
    args = ap.parse_args()
    t_start = time.perf_counter()
    out: dict[str, Any] = {"load_average": os.getloadavg()}
    print(f"load average before the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    rate_s = 2.0 if args.quick else 4.0
    out["parse_us_per_token"] = asyncio.run(parse_cost_us())
    print(f"0. client HTTP/1.1 parsing (httptools), CPU per token read: {out['parse_us_per_token']:.2f} us", flush=True)
    with ServerProcess(["--fixed-ttft-s", "0.005", "--fixed-itl-s", "0.005", "--served-model-name", "fixed"]) as srv:
        print(
            "1. achieved request rate vs target (fixed 5 ms TTFT / 5 ms ITL, 4 tokens; target within 1%):", flush=True
        )
        out["rate"] = asyncio.run(rate_part(srv.url, [50, 100, 200, 500], rate_s))
    n1 = 300 if args.quick else 1000
    with ServerProcess(["--fixed-ttft-s", "0.050", "--fixed-itl-s", "0.200", "--served-model-name", "fixed"]) as srv:
        print(f"2. {n1} concurrent streams (fixed 50 ms TTFT, 200 ms ITL, 20 tokens, opened at 500/s):", flush=True)
        d = asyncio.run(streams_part(srv.url, "fixed", n1, 500.0, 20, 0.050))
        out["ttft_1000"] = d
        print(f"  max in flight {d['max_in_flight']}, completed {d['completed']}/{n1}, errors {d['errors']}")
        f50, f99 = d["client_first_token_lag_p50_ms"], d["client_first_token_lag_p99_ms"]
        print(
            f"  client-added TTFT error (client first-token arrival - server schedule): p50 {f50:.2f} ms "
            f"{mark(f50, 1.0)}, p99 {f99:.2f} ms {mark(f99, 5.0)}"
        )
        print(
            f"  TTFT measured - 50 ms (adds the request's trip to the server): p50 {d['ttft_error_p50_ms']:.2f} ms, "
            f"p99 {d['ttft_error_p99_ms']:.2f} ms"
        )
        print(
            f"  every token, client arrival - server schedule: p50 {d['client_token_lag_p50_ms']:.2f} ms, "
            f"p99 {d['client_token_lag_p99_ms']:.2f} ms; emulator write - schedule p50 "
            f"{d['emulator_token_lag_p50_ms']:.2f} ms, p99 {d['emulator_token_lag_p99_ms']:.2f} ms"
        )
        print(
            f"  client event-loop lateness p99 {d['client_loop_lag_p99_ms']:.2f} ms, CPU {d['client_cpu']:.0%}",
            flush=True,
        )
    n2 = 600 if args.quick else 2000
    with ServerProcess(["--fixed-ttft-s", "0.050", "--fixed-itl-s", "0.200", "--served-model-name", "fixed"]) as srv:
        print(
            f"3a. {n2} concurrent streams, fixed reference (50 ms TTFT, 200 ms ITL, 20 tokens, opened at 1000/s):",
            flush=True,
        )
        d = asyncio.run(streams_part(srv.url, "fixed", n2, 1000.0, 20, None))
        out["streams_2000_fixed"] = d
        print_streams(d, n2)
    engine_args = [
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--gpu",
        "H100",
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "2048",
        "--served-model-name",
        "llama",
    ]
    with ServerProcess(engine_args) as srv:
        print(
            f"3b. {n2} concurrent streams on the engine model (Llama-3.1-8B, H100, 64 -> 200 tokens, opened at 1000/s):",
            flush=True,
        )
        d = asyncio.run(streams_part(srv.url, "llama", n2, 1000.0, 200, None))
        out["streams_2000"] = d
        print_streams(d, n2)
        floor = d["tokens"] / max(1, d["steps"]) * d["emulator_write_us_per_token"] / 1e3
        print(f"  floor at one write per token: {floor:.1f} ms for the last token of an average step")
    out["wall_s"] = time.perf_counter() - t_start
    print(f"total {out['wall_s']:.0f} s")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
