"""Two hand-made snapshots of one server, 10 s apart (tests/monitor/test_window.py works them)."""

from __future__ import annotations

import math

from servecap.monitor.snapshot import Histogram, Snapshot

BOUNDS = (0.1, 0.5, 1.0, math.inf)


def snap(
    url: str,
    t: float,
    *,
    prompt: float,
    gen: float,
    req: float,
    pre: float,
    pq: float,
    ph: float,
    ttft: tuple[float, ...],
    running: float = 6,
    waiting: float = 0,
    kv: float = 0.5,
) -> Snapshot:
    return Snapshot(
        url,
        t,
        "vllm",
        "m",
        gauges={"running": running, "waiting": waiting, "kv_usage": kv},
        counters={
            "prompt_tokens": prompt,
            "generation_tokens": gen,
            "requests": req,
            "preemptions": pre,
            "prefix_queries": pq,
            "prefix_hits": ph,
        },
        histograms={"ttft": Histogram(BOUNDS, ttft, 0.0, ttft[-1])},
    )


def start(url: str = "a") -> Snapshot:
    return snap(url, 0.0, prompt=1000, gen=500, req=10, pre=0, pq=1000, ph=200, ttft=(5, 10, 10, 10))


def end(url: str = "a") -> Snapshot:
    return snap(
        url,
        10.0,
        prompt=3000,
        gen=1500,
        req=30,
        pre=5,
        pq=2000,
        ph=700,
        ttft=(15, 60, 90, 100),
        running=12,
        waiting=6,
        kv=0.7,
    )
