"""Fleet-wide figures over a window: the replicas' windows combined.

Rates, running and waiting add up across replicas; KV usage is the mean of the replicas' (each
pool is its own); fleet latency percentiles come from the bucket-wise sum of the replicas'
histogram deltas (what ``histogram_quantile(q, sum by (le) (rate(X_bucket[w])))`` gives), so a
slow replica weighs by its traffic, not by one vote.
"""

from __future__ import annotations

from collections.abc import Sequence

from servecap.monitor.cache_hits import CacheHits
from servecap.monitor.names import HISTOGRAMS, LENGTHS
from servecap.monitor.quantile import histogram_quantile
from servecap.monitor.snapshot import Histogram, Snapshot
from servecap.monitor.window import PERCENTILES, WindowStats, histogram_mean, pname, window_stats


def _add(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else a + b


def fleet_window(pairs: Sequence[tuple[Snapshot, Snapshot]]) -> WindowStats:
    """One :class:`WindowStats` for the fleet, from each live replica's (start, end) snapshots."""
    if not pairs:
        raise ValueError("no replica to combine")
    per = [window_stats(s, e) for s, e in pairs]
    running = waiting = req = p_tok = g_tok = pre = None
    kv: list[float] = []
    for w in per:
        running, waiting = _add(running, w.running), _add(waiting, w.waiting)
        req, p_tok = _add(req, w.request_rate_per_s), _add(p_tok, w.prompt_tok_s)
        g_tok, pre = _add(g_tok, w.generation_tok_s), _add(pre, w.preemptions_per_s)
        if w.kv_usage is not None:
            kv.append(w.kv_usage)
    cache: CacheHits | None = None
    rates: list[float] = []
    for w, (_, e) in zip(per, pairs, strict=True):
        if w.cache is not None:
            cache = w.cache if cache is None else cache.plus(w.cache)
        elif e.sglang_cache_hit_rate is not None:
            rates.append(e.sglang_cache_hit_rate)
    hit = cache.hit_rate if cache is not None and cache.query_tokens > 0 else None
    if hit is None and rates:
        hit = sum(rates) / len(rates)

    latency: dict[str, dict[str, float | None]] = {}
    means: dict[str, float | None] = {}
    for key in HISTOGRAMS + LENGTHS:
        merged: Histogram | None = None
        for s, e in pairs:
            h_end = e.histograms.get(key)
            if h_end is None:
                continue
            h_start = s.histograms.get(key)
            delta = h_end.minus(h_start) if h_start is not None else h_end
            if merged is None:
                merged = delta
            elif merged.bounds == delta.bounds:
                merged = Histogram(
                    merged.bounds,
                    tuple(a + b for a, b in zip(merged.cumulative, delta.cumulative, strict=True)),
                    merged.sum + delta.sum,
                    merged.count + delta.count,
                )
        if merged is not None and key not in LENGTHS:
            latency[key] = {pname(q): histogram_quantile(q, merged.bounds, merged.cumulative) for q in PERCENTILES}
        if merged is not None:
            means[key] = histogram_mean(merged)
    return WindowStats(
        url="fleet",
        window_s=max(w.window_s for w in per),
        running=running,
        waiting=waiting,
        kv_usage=sum(kv) / len(kv) if kv else None,
        request_rate_per_s=req,
        prompt_tok_s=p_tok,
        generation_tok_s=g_tok,
        preemptions_per_s=pre,
        prefix_hit_rate=hit,
        latency_s=latency,
        histogram_means=means,
        requests_in_window=(
            sum(w.requests_in_window for w in per if w.requests_in_window is not None)
            if any(w.requests_in_window is not None for w in per)
            else None
        ),
        cache=cache,
    )
