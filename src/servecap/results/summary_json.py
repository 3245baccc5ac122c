"""The typed run summary every answer carries: a simulated run (``simulate``, ``capacity``'s
probes) and a measured one (``bench``, ``accuracy``) alike.

:class:`RunSummaryJson` is :func:`~servecap.results.summary.summary_to_json_dict` as a model:
``RunSummaryJson.of(summary).model_dump()`` equals that dict key for key, in the same order
(``extra`` only when a run has extra figures, ``timeseries`` only when asked for), so a
response that types its summary with it writes the JSON it always wrote.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from servecap.results.stats import Percentiles
from servecap.results.summary import RunSummary


class LatencyJson(BaseModel):
    """One latency's percentiles in seconds (None where no request had the figure)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    max: float | None
    count: int

    @classmethod
    def of(cls, p: Percentiles) -> LatencyJson:
        return cls(p50=p.p50, p90=p.p90, p95=p.p95, p99=p.p99, mean=p.mean, max=p.max, count=p.count)


class SloJson(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_s: float | None
    tpot_s: float | None


class PercentileMethodJson(BaseModel):
    """How the percentiles were computed: ``exact``, or ``sketch`` within ``relative_error``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str
    relative_error: float | None


class TimeSeriesJson(BaseModel):
    """The run's sampled gauges: KV use (share of the pool), waiting and running requests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_s: list[float]
    kv_utilization: list[float]
    queue_depth: list[int]
    running: list[int]


class RunSummaryJson(BaseModel):
    """A run's summary: latency percentiles (s), throughput, goodput within the SLOs, requests
    completed and failed (``errors`` by kind, ``rejected``, ``preemptions``), engine gauges."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_s: LatencyJson
    tpot_s: LatencyJson
    itl_s: LatencyJson
    e2e_s: LatencyJson
    queue_time_s: LatencyJson
    throughput_req_s: float
    output_tokens_per_s: float
    goodput_req_s: float | None
    preemptions: int
    rejected: int
    mean_batch_size: float | None
    num_requests: int
    completed: int
    duration_s: float
    input_tokens_per_s: float
    slo: SloJson | None
    slo_attainment: float | None
    errors: dict[str, int]
    max_batch_size: int | None
    mean_kv_utilization: float | None
    max_kv_utilization: float | None
    mean_queue_depth: float | None
    max_queue_depth: int | None
    prefix_cache_hit_rate: float | None
    cached_prompt_tokens: int
    prompt_tokens: int
    percentiles: PercentileMethodJson
    extra: dict[str, float] = {}  # written only when a run has extra figures
    timeseries: TimeSeriesJson | None = None  # written only when asked for

    @classmethod
    def of(cls, s: RunSummary, *, include_timeseries: bool = False) -> RunSummaryJson:
        ts = s.timeseries if include_timeseries else None
        return cls(
            ttft_s=LatencyJson.of(s.ttft_s),
            tpot_s=LatencyJson.of(s.tpot_s),
            itl_s=LatencyJson.of(s.itl_s),
            e2e_s=LatencyJson.of(s.e2e_s),
            queue_time_s=LatencyJson.of(s.queue_time_s),
            throughput_req_s=s.throughput_req_s,
            output_tokens_per_s=s.output_tokens_per_s,
            goodput_req_s=s.goodput_req_s,
            preemptions=s.preemptions,
            rejected=s.rejected,
            mean_batch_size=s.mean_batch_size,
            num_requests=s.num_requests,
            completed=s.completed,
            duration_s=s.duration_s,
            input_tokens_per_s=s.input_tokens_per_s,
            slo=None if s.slo is None else SloJson(ttft_s=s.slo.ttft_s, tpot_s=s.slo.tpot_s),
            slo_attainment=s.slo_attainment,
            errors=dict(s.errors),
            max_batch_size=s.max_batch_size,
            mean_kv_utilization=s.mean_kv_utilization,
            max_kv_utilization=s.max_kv_utilization,
            mean_queue_depth=s.mean_queue_depth,
            max_queue_depth=s.max_queue_depth,
            prefix_cache_hit_rate=s.prefix_cache_hit_rate,
            cached_prompt_tokens=s.cached_prompt_tokens,
            prompt_tokens=s.prompt_tokens,
            percentiles=PercentileMethodJson(method=s.percentile_method, relative_error=s.relative_error),
            extra=dict(s.extra),
            timeseries=None
            if ts is None
            else TimeSeriesJson(
                time_s=list(ts.time_s),
                kv_utilization=list(ts.kv_utilization),
                queue_depth=list(ts.queue_depth),
                running=list(ts.running),
            ),
        )

    @model_serializer(mode="wrap")
    def _optional_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """``extra`` and ``timeseries`` appear only when there is something in them."""
        data: dict[str, object] = handler(self)
        if not self.extra:
            data.pop("extra", None)
        if self.timeseries is None:
            data.pop("timeseries", None)
        return data
