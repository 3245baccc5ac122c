"""The typed run summary every answer carries: a simulated run (``simulate``, ``capacity``'s
probes) and a measured one (``bench``, ``accuracy``) alike.

:class:`RunSummaryJson` is :func:`~servecap.results.summary.summary_to_json_dict` as a model:
``RunSummaryJson.of(summary).model_dump()`` equals that dict key for key, in the same order
(``extra`` only when a run has extra figures, ``timeseries`` only when asked for), so a
response that types its summary with it writes the JSON it always wrote.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from servecap.results.summary import RunSummary, summary_to_json_dict


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


class KvTierHitJson(BaseModel):
    """Prompt tokens found in one KV tier and their share of the prompt tokens looked up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int
    fraction: float | None


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
    # per KV tier (gpu, cpu, ssd, remote) and "query_tokens"; written only for a run with tiers
    kv_tiers: dict[str, KvTierHitJson | int] | None = None
    extra: dict[str, float] = {}  # written only when a run has extra figures
    timeseries: TimeSeriesJson | None = None  # written only when asked for

    @classmethod
    def of(cls, s: RunSummary, *, include_timeseries: bool = False) -> RunSummaryJson:
        """The model of :func:`~servecap.results.summary.summary_to_json_dict` (one serialisation
        of a summary; this only types it, and ``extra="forbid"`` refuses a key it lacks)."""
        return cls.model_validate(summary_to_json_dict(s, include_timeseries=include_timeseries))

    @model_serializer(mode="wrap")
    def _optional_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """``kv_tiers``, ``extra`` and ``timeseries`` appear only when there is something in them."""
        data: dict[str, object] = handler(self)
        if self.kv_tiers is None:
            data.pop("kv_tiers", None)
        if not self.extra:
            data.pop("extra", None)
        if self.timeseries is None:
            data.pop("timeseries", None)
        return data
