"""Prometheus metrics with vLLM's names, so dashboards and autoscalers built for vLLM work.

Names follow vLLM's ``vllm/v1/metrics/loggers.py`` (PrometheusStatLogger): gauges
``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``
(and the older ``vllm:gpu_cache_usage_perc``, a fraction in [0, 1] despite the name);
counters ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``,
``vllm:num_preemptions_total``, ``vllm:request_success_total``,
``vllm:prefix_cache_queries_total``/``vllm:prefix_cache_hits_total``; histograms
``vllm:time_to_first_token_seconds``, ``vllm:time_per_output_token_seconds``,
``vllm:inter_token_latency_seconds``, ``vllm:e2e_request_latency_seconds``,
``vllm:request_queue_time_seconds``. Every series has the ``model_name`` label.

One extra histogram, ``servecap:emulator_token_lag_seconds``: how late each token was written to
its connection against the engine's schedule (the emulator's own timing error).

The histograms are observed per token (inter-token latency, the emulator's lag) in the
driver's hot path, so they are :class:`FastHistogram` objects: plain bucket counts behind
``bisect`` (about 0.2 µs an observation, no lock, the driver is one task), exposed through a
collector in the same Prometheus format as ``prometheus_client.Histogram``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                 7.5, 10.0, 20.0, 40.0, 80.0)
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
_LAG_BUCKETS = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5)


class FastHistogram:
    """One histogram series (buckets are upper bounds, ``le``, as in Prometheus)."""

    __slots__ = ("_bounds", "counts", "doc", "name", "sum")

    def __init__(self, name: str, doc: str, buckets: tuple[float, ...]) -> None:
        self.name, self.doc = name, doc
        self._bounds = list(buckets)
        self.counts = [0] * (len(buckets) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value

    def observe_many(self, values: Iterable[float]) -> None:
        bounds, counts, total = self._bounds, self.counts, 0.0
        for v in values:
            counts[bisect_left(bounds, v)] += 1
            total += v
        self.sum += total

    def family(self, model_name: str) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(self.name, self.doc, labels=["model_name"])
        acc, buckets = 0, []
        for bound, n in zip(self._bounds, self.counts, strict=False):
            acc += n
            buckets.append((floatToGoString(bound), float(acc)))  # type: ignore[no-untyped-call]
        buckets.append(("+Inf", float(acc + self.counts[-1])))
        fam.add_metric([model_name], buckets, self.sum)
        return fam


class _Histograms:
    """A collector over the fast histograms of one model."""

    def __init__(self, model_name: str, hists: list[FastHistogram]) -> None:
        self.model_name, self.hists = model_name, hists

    def collect(self) -> Iterator[Metric]:
        for h in self.hists:
            yield h.family(self.model_name)


class EngineMetrics:
    """The emulator's metrics in their own registry (one per app; nothing global)."""

    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        r, lab = self.registry, ["model_name"]
        self.model_name = model_name
        # the engine's latest (running, waiting, KV blocks used, KV blocks total), set by the
        # driver after every step and copied into the gauges when scraped
        self.state: tuple[int, int, int, int] = (0, 0, 0, 1)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, lab, registry=r)

        def counter(name: str, doc: str, extra: list[str] | None = None) -> Counter:
            return Counter(name, doc, lab + (extra or []), registry=r)

        hists: list[FastHistogram] = []

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> FastHistogram:
            hists.append(FastHistogram(name, doc, buckets))
            return hists[-1]

        self.running = gauge("vllm:num_requests_running", "Requests in the running batch.").labels(model_name)
        self.waiting = gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.").labels(model_name)
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage; 1 means 100 percent.").labels(model_name)
        self.gpu_cache_usage = gauge(
            "vllm:gpu_cache_usage_perc", "KV-cache usage (older name); 1 means 100 percent."
        ).labels(model_name)
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.").labels(model_name)
        self.generation_tokens = counter("vllm:generation_tokens", "Generation tokens produced.").labels(model_name)
        self.preemptions = counter("vllm:num_preemptions", "Cumulative preemptions.").labels(model_name)
        self._success = counter("vllm:request_success", "Finished requests.", ["finished_reason"])
        self.success_length = self._success.labels(model_name, "length")
        self.success_abort = self._success.labels(model_name, "abort")
        self.prefix_queries = counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.").labels(model_name)
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.").labels(model_name)
        self.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token.", _TTFT_BUCKETS)
        self.tpot = hist("vllm:time_per_output_token_seconds", "Mean time per output token of a request.", _TPOT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Time between consecutive tokens.", _TPOT_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Request latency, arrival to last token.", _E2E_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", "Time waiting before first scheduled.", _E2E_BUCKETS)
        self.token_lag = hist(
            "servecap:emulator_token_lag_seconds",
            "Delay between a token's engine-scheduled time and its hand-off to the stream.",
            _LAG_BUCKETS,
        )
        r.register(_Histograms(model_name, hists))

    def exposition(self) -> bytes:
        running, waiting, used, total = self.state
        self.running.set(running)
        self.waiting.set(waiting)
        usage = used / total if total else 0.0
        self.kv_usage.set(usage)
        self.gpu_cache_usage.set(usage)
        return generate_latest(self.registry)
