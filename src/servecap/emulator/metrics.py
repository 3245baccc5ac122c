"""The emulator's Prometheus metrics: every vLLM series the emulator can know, with vLLM's
names, labels and buckets from :mod:`servecap.specs.vllm_metrics`.

It exposes what vLLM 0.11 exposes with ``--show-hidden-metrics-for-version=0.10`` (the current
names and the older aliases side by side, each alias carrying the same value), so a dashboard
or autoscaler built for any vLLM version from 0.8 on reads it. Labels: ``model_name`` and
``engine="0"`` on every series. What the emulator cannot know is left out: multimodal and
external (KV connector) cache counters, LoRA, sleep state, and V0's swapped requests and CPU
cache. A replica running speculative decoding streams each step's accepted burst and exposes
``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens`` and
``..._num_accepted_tokens_per_pos{position}`` as vLLM's ``SpecDecodingProm`` does.

When each series moves (vLLM's ``IterationStats``/``FinishedRequestStats`` semantics):

- per step: ``vllm:iteration_tokens_total`` (prompt tokens of requests whose first token
  came in the step + tokens generated in the step), gauges (read at scrape);
- per first token: ``vllm:prompt_tokens`` (the whole prompt, cached part included), TTFT;
- per later token: ``vllm:generation_tokens`` (first tokens too), inter-token latency;
- per finished request: ``vllm:request_success{finished_reason="length"}``, e2e, queue,
  prefill, decode, inference times, the per-request mean time per output token, the
  request's prompt/generation token counts, its ``max_tokens`` and ``n`` (always 1);
- per client disconnect: ``vllm:request_success{finished_reason="abort"}``;
- prefix-cache queries and hits: the engine's own token counters, copied after each step.

One extra histogram, ``servecap:emulator_token_lag_seconds``: how late each token was written
to its connection against the engine's schedule (the emulator's own timing error).

Everything is a plain number or a :class:`FastHistogram` (bucket counts behind ``bisect``,
about 0.2 µs an observation, no lock: the driver is one task), turned into Prometheus text by
one collector at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from servecap.specs import vllm_metrics as vm

_LAG_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5)
TOKEN_LAG = "servecap:emulator_token_lag_seconds"


class FastHistogram:
    """One histogram series (buckets are upper bounds, ``le``, as in Prometheus)."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self._bounds = list(buckets)
        self.counts = [0] * (len(buckets) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value

    def observe_many(self, values: Iterable[float]) -> None:
        bounds, counts, total = self._bounds, self.counts, 0.0
        for v in values:
            counts[bisect_left(bounds, v)] += 1
            total += v
        self.sum += total

    def add_to(self, fam: HistogramMetricFamily, labels: list[str]) -> None:
        acc, buckets = 0, []
        for bound, n in zip(self._bounds, self.counts, strict=False):
            acc += n
            buckets.append((floatToGoString(bound), float(acc)))  # type: ignore[no-untyped-call]
        buckets.append(("+Inf", float(acc + self.counts[-1])))
        fam.add_metric(labels, buckets, self.sum)


class EngineMetrics:
    """The emulator's metrics in their own registry (one per app; nothing global).

    ``cache_config``: the ``vllm:cache_config_info`` labels (see
    :data:`servecap.specs.vllm_metrics.CACHE_CONFIG_LABELS`); None leaves that series out (the
    fixed-latency reference has no cache)."""

    def __init__(
        self, model_name: str, *, max_model_len: int = 1 << 20, cache_config: dict[str, str] | None = None
    ) -> None:
        self.model_name = model_name
        self.labels = [model_name, "0"]
        self.cache_config = cache_config
        # the engine's latest (running, waiting, KV blocks used, KV blocks total), set by the
        # driver after every step and read at scrape
        self.state: tuple[int, int, int, int] = (0, 0, 0, 1)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.success = dict.fromkeys(vm.FINISH_REASONS, 0)
        self.ttft = FastHistogram(vm.TIME_TO_FIRST_TOKEN.buckets)
        self.itl = FastHistogram(vm.INTER_TOKEN_LATENCY.buckets)
        self.request_tpot = FastHistogram(vm.REQUEST_TIME_PER_OUTPUT_TOKEN.buckets)
        self.e2e = FastHistogram(vm.E2E_REQUEST_LATENCY.buckets)
        self.queue = FastHistogram(vm.REQUEST_QUEUE_TIME.buckets)
        self.prefill = FastHistogram(vm.REQUEST_PREFILL_TIME.buckets)
        self.decode = FastHistogram(vm.REQUEST_DECODE_TIME.buckets)
        self.inference = FastHistogram(vm.REQUEST_INFERENCE_TIME.buckets)
        self.iteration_tokens = FastHistogram(vm.ITERATION_TOKENS.buckets)
        self.request_prompt_tokens = FastHistogram(vm.REQUEST_PROMPT_TOKENS.buckets_for(max_model_len))
        self.request_generation_tokens = FastHistogram(vm.REQUEST_GENERATION_TOKENS.buckets_for(max_model_len))
        self.request_max_tokens = FastHistogram(vm.REQUEST_PARAMS_MAX_TOKENS.buckets_for(max_model_len))
        self.request_n = FastHistogram(vm.REQUEST_PARAMS_N.buckets)
        self.token_lag = FastHistogram(_LAG_BUCKETS_S)
        # speculative decoding (set up by the driver when the engine runs it; empty: not exposed)
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted_tokens = 0
        self.spec_accepted_per_pos: list[int] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))

    @property
    def kv_usage(self) -> float:
        _, _, used, total = self.state
        return used / total if total else 0.0

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def families(self) -> Iterator[Metric]:
        lab, names = self.labels, (vm.MODEL_NAME, vm.ENGINE)
        running, waiting, _, _ = self.state

        def gauge(spec: vm.MetricSpec, value: float) -> Metric:
            fam = GaugeMetricFamily(spec.name, spec.documentation, labels=names)
            fam.add_metric(lab, value)
            return fam

        def counter(spec: vm.MetricSpec, value: float) -> Metric:
            fam = CounterMetricFamily(spec.name, spec.documentation, labels=names)
            fam.add_metric(lab, value)
            return fam

        def hist(spec_name: str, doc: str, h: FastHistogram) -> Metric:
            fam = HistogramMetricFamily(spec_name, doc, labels=names)
            h.add_to(fam, lab)
            return fam

        yield gauge(vm.NUM_REQUESTS_RUNNING, running)
        yield gauge(vm.NUM_REQUESTS_WAITING, waiting)
        yield gauge(vm.KV_CACHE_USAGE_PERC, self.kv_usage)
        yield gauge(vm.GPU_CACHE_USAGE_PERC, self.kv_usage)
        if self.cache_config is not None:
            info = GaugeMetricFamily(
                vm.CACHE_CONFIG_INFO.name, vm.CACHE_CONFIG_INFO.documentation, labels=list(self.cache_config)
            )
            info.add_metric(list(self.cache_config.values()), 1.0)
            yield info
        yield counter(vm.PROMPT_TOKENS, self.prompt_tokens)
        yield counter(vm.GENERATION_TOKENS, self.generation_tokens)
        yield counter(vm.NUM_PREEMPTIONS, self.preemptions)
        success = CounterMetricFamily(
            vm.REQUEST_SUCCESS.name, vm.REQUEST_SUCCESS.documentation, labels=[*names, vm.FINISHED_REASON]
        )
        for reason, n in self.success.items():
            success.add_metric([*lab, reason], n)
        yield success
        yield counter(vm.PREFIX_CACHE_QUERIES, self.prefix_queries)
        yield counter(vm.PREFIX_CACHE_HITS, self.prefix_hits)
        yield counter(vm.GPU_PREFIX_CACHE_QUERIES, self.prefix_queries)
        yield counter(vm.GPU_PREFIX_CACHE_HITS, self.prefix_hits)
        for spec, h in (
            (vm.ITERATION_TOKENS, self.iteration_tokens),
            (vm.REQUEST_PROMPT_TOKENS, self.request_prompt_tokens),
            (vm.REQUEST_GENERATION_TOKENS, self.request_generation_tokens),
            (vm.REQUEST_MAX_NUM_GENERATION_TOKENS, self.request_generation_tokens),  # n = 1: the same
            (vm.REQUEST_PARAMS_N, self.request_n),
            (vm.REQUEST_PARAMS_MAX_TOKENS, self.request_max_tokens),
            (vm.TIME_TO_FIRST_TOKEN, self.ttft),
            (vm.INTER_TOKEN_LATENCY, self.itl),
            (vm.TIME_PER_OUTPUT_TOKEN, self.itl),  # the older name of the same observations
            (vm.REQUEST_TIME_PER_OUTPUT_TOKEN, self.request_tpot),
            (vm.E2E_REQUEST_LATENCY, self.e2e),
            (vm.REQUEST_QUEUE_TIME, self.queue),
            (vm.REQUEST_INFERENCE_TIME, self.inference),
            (vm.REQUEST_PREFILL_TIME, self.prefill),
            (vm.REQUEST_DECODE_TIME, self.decode),
        ):
            yield hist(spec.name, spec.documentation, h)
        yield hist(
            TOKEN_LAG, "Delay between a token's engine-scheduled time and its hand-off to the stream.", self.token_lag
        )
        if self.spec_accepted_per_pos:  # vLLM's SpecDecodingProm series
            yield counter(vm.SPEC_DECODE_NUM_DRAFTS, self.spec_drafts)
            yield counter(vm.SPEC_DECODE_NUM_DRAFT_TOKENS, self.spec_draft_tokens)
            yield counter(vm.SPEC_DECODE_NUM_ACCEPTED_TOKENS, self.spec_accepted_tokens)
            spec = vm.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS
            per_pos = CounterMetricFamily(spec.name, spec.documentation, labels=[*names, "position"])
            for j, n in enumerate(self.spec_accepted_per_pos):
                per_pos.add_metric([*lab, str(j)], n)
            yield per_pos


class _Collector:
    def __init__(self, metrics: EngineMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return self.metrics.families()
