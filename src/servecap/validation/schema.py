"""The corpus file's schema (pydantic, ``extra="forbid"``): one TOML file per published source.

A file has one ``[source]`` table (where the numbers come from: URL, date, engine and version,
the assumptions that apply to every row) and ``[[rows]]``: one deployment (GPU, model, dtypes,
parallelism), one workload (lengths, arrival mode, concurrency or rate, request count) and the
values the source printed (``[[rows.measured]]``: metric, statistic, value and unit, and the
text as printed). Values are copied, never estimated; ``where`` says where on the page each row
sits, ``assumptions`` what the source left out and what was taken instead.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Metric = Literal[
    "output_throughput",  # output tokens per second, the whole deployment
    "output_throughput_per_gpu",  # output tokens per second divided by the GPUs
    "request_throughput",  # completed requests per second
    "ttft",  # time to first token
    "tpot",  # time per output token after the first
    "itl",  # inter-token latency
    "e2e",  # request latency, first byte sent to last token
]
Statistic = Literal["total", "mean", "median", "p90", "p99"]
Unit = Literal["tok/s", "req/s", "s", "ms"]
Mode = Literal["offline", "static_batch", "closed", "open"]

# metric -> the family its error is pooled in
METRIC_FAMILY: dict[str, str] = {
    "output_throughput": "throughput",
    "output_throughput_per_gpu": "throughput",
    "request_throughput": "throughput",
    "ttft": "ttft",
    "tpot": "tpot",
    "itl": "tpot",
    "e2e": "e2e",
}
FAMILIES: tuple[str, ...] = ("throughput", "tpot", "ttft", "e2e")
_TIME_UNITS = {"s": 1.0, "ms": 1e-3}


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class EngineLimits(_Model):
    """Scheduler and memory settings the source ran with (None: the engine's default)."""

    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1)


class Measured(_Model):
    metric: Metric
    statistic: Statistic
    value: float = Field(gt=0)
    unit: Unit
    printed: str = Field(min_length=1)

    @model_validator(mode="after")
    def _unit_fits(self) -> Measured:
        is_time = self.metric in ("ttft", "tpot", "itl", "e2e")
        if is_time != (self.unit in _TIME_UNITS):
            raise ValueError(f"unit {self.unit!r} does not fit metric {self.metric!r}")
        if self.metric == "request_throughput" and self.unit != "req/s":
            raise ValueError("request_throughput is in req/s")
        if self.metric.startswith("output_throughput") and self.unit != "tok/s":
            raise ValueError(f"{self.metric} is in tok/s")
        if (self.statistic == "total") == is_time:
            raise ValueError(f"statistic {self.statistic!r} does not fit metric {self.metric!r}")
        return self

    @property
    def value_si(self) -> float:
        """Seconds for latencies, per second for throughputs."""
        return self.value * _TIME_UNITS.get(self.unit, 1.0)

    @property
    def family(self) -> str:
        return METRIC_FAMILY[self.metric]

    @property
    def key(self) -> str:
        return f"{self.metric}.{self.statistic}"


class Workload(_Model):
    """How the source loaded the server.

    - ``offline``: all ``num_requests`` queued at once (vLLM benchmark_throughput, trtllm-bench);
    - ``static_batch``: one batch of ``concurrency`` requests started together (benchmark_latency);
    - ``closed``: at most ``concurrency`` requests in flight, a new one as soon as one finishes;
    - ``open``: Poisson arrivals at ``rate_per_s``.
    """

    prompt_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)
    lengths: Literal["fixed"] = "fixed"
    mode: Mode
    num_requests: int = Field(ge=1)
    concurrency: int | None = Field(default=None, ge=1)
    rate_per_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _mode_fields(self) -> Workload:
        if self.mode in ("closed", "static_batch") and self.concurrency is None:
            raise ValueError(f"mode {self.mode!r} needs 'concurrency'")
        if self.mode == "open" and self.rate_per_s is None:
            raise ValueError("mode 'open' needs 'rate_per_s'")
        if self.mode == "static_batch" and self.num_requests != self.concurrency:
            raise ValueError("a static batch has num_requests == concurrency")
        return self


class Row(_Model):
    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    gpu: str
    model: str
    weights_dtype: str
    kv_cache_dtype: str
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    where: str = Field(min_length=1)
    assumptions: list[str] = []
    engine_limits: EngineLimits | None = None
    # the engine profile the row ran on when it differs from its source's (vllm, sglang, trtllm,
    # trtllm-max-utilization); None: the source's engine
    engine: str | None = None
    workload: Workload
    measured: list[Measured] = Field(min_length=1)

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp


class Source(_Model):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    title: str
    # https://... where it was published; repo:PATH for a first-party measurement made by a
    # script of this repository (benchmarks/vllm_sweep/run.sh)
    url: str = Field(pattern=r"^(https://|repo:)")
    date: str
    engine: str
    engine_version: str
    kind: str
    assumptions: list[str] = []
    engine_limits: EngineLimits = EngineLimits()


class CorpusFile(_Model):
    source: Source
    rows: list[Row] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> CorpusFile:
        seen: set[str] = set()
        for r in self.rows:
            if r.id in seen:
                raise ValueError(f"duplicate row id {r.id!r}")
            seen.add(r.id)
        return self
