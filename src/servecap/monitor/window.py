"""Rates and percentiles of one server over a window: the difference of two snapshots.

- Counter rates: ``(c_end - c_start) / (t_end - t_start)``; a counter that went down means the
  server restarted, and (as Prometheus' ``rate()``) the end value is taken as the increase.
- Latency percentiles: of the histogram's delta over the window, by
  :func:`servecap.monitor.quantile.histogram_quantile` (Prometheus' linear interpolation within
  the bucket), i.e. what ``histogram_quantile(q, rate(X_bucket[window]))`` gives.
- Latency means: the histogram's ``_sum`` delta over its ``_count`` delta (exact, not read off
  the buckets): the mean inter-token latency is the token-weighted mean TPOT.
- Prefix-cache hit rate: cached over looked-up prompt tokens, local and external caches
  together (:mod:`servecap.monitor.cache_hits`: vLLM's tokens by source, or its prefix-cache
  counters plus the KV connector's or LMCache's hits), or SGLang's own gauge.
- Gauges (running, waiting, KV usage): the latest value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servecap.monitor.cache_hits import CacheHits, cache_hits
from servecap.monitor.names import HISTOGRAMS, LENGTHS
from servecap.monitor.quantile import histogram_quantile
from servecap.monitor.snapshot import Histogram, Snapshot
from servecap.monitor.spec_fit import AcceptanceFit, fit_acceptance

PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.99)


@dataclass(frozen=True, slots=True)
class WindowStats:
    """One server over ``[start, end]``; ``None`` where the server does not expose the quantity
    (or, for percentiles, nothing was observed in the window)."""

    url: str
    window_s: float
    running: float | None
    waiting: float | None
    kv_usage: float | None
    request_rate_per_s: float | None
    prompt_tok_s: float | None
    generation_tok_s: float | None
    preemptions_per_s: float | None
    prefix_hit_rate: float | None
    latency_s: dict[str, dict[str, float | None]]  # "ttft" -> {"p50": .., "p90": .., "p99": ..}
    # each histogram's sum / count over the window: "itl" (s) ... and "prompt_len"/"output_len" (tokens)
    histogram_means: dict[str, float | None] = field(default_factory=dict)
    requests_in_window: float | None = None  # finished requests counted over the window
    spec_acceptance: AcceptanceFit | None = None  # speculative decoding's acceptance (vllm:spec_decode_*)
    cache: CacheHits | None = None  # the prompt tokens behind prefix_hit_rate, by cache (None: SGLang, none)

    def p(self, metric: str, q: float) -> float | None:
        return self.latency_s.get(metric, {}).get(pname(q))


def pname(q: float) -> str:
    """The key of a percentile: "p50" for 0.5, "p99" for 0.99."""
    return f"p{q * 100:g}"


def histogram_mean(h: Histogram) -> float | None:
    """The mean observation of a histogram (delta): ``sum / count``; None when it has none."""
    return h.sum / h.count if h.count > 0 else None


def counter_increase(start: float, end: float) -> float:
    """The increase of a counter over a window (a reset counts the end value as the increase)."""
    return end - start if end >= start else end


def window_stats(start: Snapshot, end: Snapshot) -> WindowStats:
    """Rates, hit rate and latency percentiles between two snapshots of the same server."""
    span = end.time_s - start.time_s
    if span <= 0:
        raise ValueError(f"window of {span} s: the end snapshot must be later than the start")

    def rate(key: str) -> float | None:
        if key not in end.counters or key not in start.counters:
            return None
        return counter_increase(start.counters[key], end.counters[key]) / span

    hit_rate = end.sglang_cache_hit_rate
    cache = cache_hits(start, end)
    if cache is not None:
        hit_rate = cache.hit_rate

    latency: dict[str, dict[str, float | None]] = {}
    means: dict[str, float | None] = {}
    for key in HISTOGRAMS + LENGTHS:
        h_end = end.histograms.get(key)
        if h_end is None:
            continue
        h_start = start.histograms.get(key)
        delta = h_end.minus(h_start) if h_start is not None else h_end
        if key not in LENGTHS:
            latency[key] = {pname(q): histogram_quantile(q, delta.bounds, delta.cumulative) for q in PERCENTILES}
        means[key] = histogram_mean(delta)
    requests = rate("requests")
    return WindowStats(
        url=end.url,
        window_s=span,
        running=end.gauge("running"),
        waiting=end.gauge("waiting"),
        kv_usage=end.gauge("kv_usage"),
        request_rate_per_s=requests,
        prompt_tok_s=rate("prompt_tokens"),
        generation_tok_s=rate("generation_tokens"),
        preemptions_per_s=rate("preemptions"),
        prefix_hit_rate=hit_rate,
        latency_s=latency,
        histogram_means=means,
        requests_in_window=requests * span if requests is not None else None,
        spec_acceptance=fit_acceptance(start, end),
        cache=cache,
    )
