"""Measured vs simulated fleet: real routers from the package registry in front of emulator
replicas on 127.0.0.1, driven by ``servecap bench``, next to ``servecap fleet simulate`` of the
same fleet, policy and workload.

Setups: SGLang's router (``sglang-router``) with ``round_robin`` (simulated: ``round-robin``) and
``cache_aware`` (simulated: ``prefix-affinity``, same thresholds) in front of ``--replicas``
emulator replicas (Llama-3.1-8B on H100, prefix caching on), on a shared-prefix workload (16
groups of a 1,024-token prefix, 64 new prompt tokens, 16 output tokens), at each of ``--rates``.
Prints, per row, TTFT and TPOT p50/p99 (ms), the per-replica request split and the prefix-cache
hit rate, measured and simulated, with the error (simulated / measured - 1; hit rate: the
difference). Bounded: ``--requests`` per row (about a minute in all with the defaults).

    .venv/bin/python benchmarks/fleet_accuracy.py [--replicas 4] [--rates 6,12,24] [--requests 48]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from servecap.emulator.server import ServerProcess, free_port, stop_process_group

MODEL = "meta-llama/Llama-3.1-8B"
THRESHOLDS = ["--cache-threshold", "0.5", "--balance-abs-threshold", "32", "--balance-rel-threshold", "1.0001"]
POLICIES = {"round_robin": "round-robin", "cache_aware": "prefix-affinity"}


def _workload(rate_per_s: float, requests: int) -> dict[str, Any]:
    return {
        "arrival": {"kind": "poisson", "rate_per_s": rate_per_s},
        "num_requests": requests,
        "prompt_tokens": {"kind": "fixed", "value": 64},
        "output_tokens": {"kind": "fixed", "value": 16},
        "prefix": {"groups": 16, "tokens": 1024},
    }


def _servecap(*args: str, cwd: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "servecap", *args], capture_output=True, text=True, cwd=cwd)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _counters(url: str) -> tuple[float, float, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    served = queries = hits = 0.0
    for family in text_string_to_metric_families(text):
        total = sum(s.value for s in family.samples if s.name.endswith("_total"))
        if family.name == "vllm:request_success":
            served += total
        elif family.name == "vllm:prefix_cache_queries":
            queries += total
        elif family.name == "vllm:prefix_cache_hits":
            hits += total
    return served, queries, hits


def _start_router(policy: str, workers: list[str]) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    args = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--policy", policy, "--prometheus-port", str(free_port()), "--worker-urls", *workers, *THRESHOLDS]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                if r.status == 200:
                    return url, proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process_group(proc)
            raise SystemExit("sglang-router did not start")
        time.sleep(0.2)


def _measure(policy: str, workers: list[str], workload: Path, seed: int, tmp: Path) -> dict[str, Any]:
    url, proc = _start_router(policy, workers)
    try:
        before = [_counters(u) for u in workers]
        out = _servecap("bench", url, "-m", MODEL, "--workload", str(workload), "--seed", str(seed),
                        "--db", str(tmp / "runs.db"), "--json", cwd=tmp)  # fmt: skip
        after = [_counters(u) for u in workers]
    finally:
        stop_process_group(proc)
    deltas = [[a - b for a, b in zip(x, y, strict=True)] for x, y in zip(after, before, strict=True)]
    queries, hits = sum(d[1] for d in deltas), sum(d[2] for d in deltas)
    summary = out["runs"][0]["summary"]
    return {
        "ttft_s": summary["ttft_s"],
        "tpot_s": summary["tpot_s"],
        "split": sorted(round(d[0]) for d in deltas),
        "hit": hits / queries if queries else 0.0,
    }


def _simulate(router: str, replicas: int, workload: Path, seed: int, tmp: Path) -> dict[str, Any]:
    pool = {"name": "emulators", "model": MODEL, "gpu": "H100", "max_model_len": 8192, "replicas": replicas}
    fleet = tmp / "fleet.json"
    fleet.write_text(json.dumps({"pools": [pool | {"cold_start": "instant"}], "router": router}))
    out = _servecap("fleet", "simulate", "--fleet", str(fleet), "--workload", str(workload), "--seed", str(seed),
                    "--json", cwd=tmp)  # fmt: skip
    summary = out["summary"]
    return {
        "ttft_s": summary["ttft_s"],
        "tpot_s": summary["tpot_s"],
        "split": sorted(int(r["routed"]) for r in out["replicas"]),
        "hit": summary["prefix_cache_hit_rate"] or 0.0,
    }


def _cell(measured: float, simulated: float) -> str:
    err = simulated / measured - 1 if measured > 0 else float("nan")
    return f"{measured * 1e3:7.1f} {simulated * 1e3:7.1f} {err:+6.0%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--rates", default="6,12,24", help="requests/s, a comma list")
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    head = "policy       rate | TTFT p50 ms real/sim/err | TTFT p99 ms real/sim/err | TPOT p50 ms real/sim/err"
    head += " | TPOT p99 ms real/sim/err | split real / sim | hit rate real/sim/diff"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as d, ServerProcess(["-m", MODEL, "-g", "H100", "-l", "8192"],
                                                           replicas=args.replicas) as servers:  # fmt: skip
        tmp = Path(d)
        workers = list(servers.urls)
        print(f"sglang-router in front of {args.replicas} emulator replicas, {args.requests} requests a row")
        print(head)
        for rate in rates:
            workload = tmp / "workload.json"
            workload.write_text(json.dumps(_workload(rate, args.requests)))
            for policy, router in POLICIES.items():
                real = _measure(policy, workers, workload, args.seed, tmp)
                sim = _simulate(router, args.replicas, workload, args.seed, tmp)
                cells = [
                    _cell(real[m][q], sim[m][q]) for m, q in (("ttft_s", "p50"), ("ttft_s", "p99"),
                                                              ("tpot_s", "p50"), ("tpot_s", "p99"))
                ]  # fmt: skip
                split = f"{real['split']} / {sim['split']}"
                hit = f"{real['hit']:5.1%} {sim['hit']:5.1%} {sim['hit'] - real['hit']:+5.1%}"
                print(f"{policy:12s} {rate:4g} | " + " | ".join(cells) + f" | {split} | {hit}")
    print(f"wall {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
