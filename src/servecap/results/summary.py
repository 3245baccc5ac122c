"""A run's summary: latency percentiles, throughput, goodput under SLOs, engine gauges.

Definitions (vLLM's ``benchmark_serving`` conventions; goodput as in DistServe, Zhong et al.,
OSDI 2024 — completed requests per second that meet every SLO):

- TTFT = first token - arrival; E2E = last token - arrival; TPOT per request =
  ``(E2E - TTFT) / (output_tokens - 1)``; ITL = every gap between consecutive tokens, pooled
  over all requests; queue time = arrival to first scheduled;
- throughput = completed requests / ``duration_s``; token rates likewise over completed requests;
- goodput = completed requests with TTFT <= ``slo.ttft_s`` and TPOT <= ``slo.tpot_s`` (a one-token
  answer has no TPOT and passes that test) / ``duration_s``; ``None`` without an SLO;
- engine-only figures (batch size, KV utilization, queue depth, prefix-cache hit rate) come from
  a simulation and are ``None`` for measured runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from servecap.results.record import RequestRecord
from servecap.results.stats import EMPTY, Percentiles, percentiles
from servecap.specs.perf import Slo


@dataclass(frozen=True, slots=True)
class TimeSeries:
    """Engine gauges sampled over the run (a simulation's), one entry per sample time."""

    time_s: tuple[float, ...]
    kv_utilization: tuple[float, ...]  # used KV blocks / pool
    queue_depth: tuple[int, ...]  # waiting requests
    running: tuple[int, ...]  # running requests (the batch)

    def to_dict(self) -> dict[str, list[float] | list[int]]:
        return {
            "time_s": list(self.time_s),
            "kv_utilization": list(self.kv_utilization),
            "queue_depth": list(self.queue_depth),
            "running": list(self.running),
        }


@dataclass(frozen=True, slots=True)
class RunSummary:
    num_requests: int  # requests in the run (completed + failed)
    completed: int
    duration_s: float
    ttft_s: Percentiles
    tpot_s: Percentiles
    itl_s: Percentiles
    e2e_s: Percentiles
    queue_time_s: Percentiles
    throughput_req_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    goodput_req_s: float | None
    slo_attainment: float | None  # share of all requests that completed within the SLOs
    slo: Slo | None
    preemptions: int
    rejected: int
    errors: dict[str, int]
    cached_prompt_tokens: int
    prompt_tokens: int
    mean_batch_size: float | None = None
    max_batch_size: int | None = None
    mean_kv_utilization: float | None = None
    max_kv_utilization: float | None = None
    mean_queue_depth: float | None = None
    max_queue_depth: int | None = None
    prefix_cache_hit_rate: float | None = None
    # KV tiers (sim/kv_tiers.py): prompt tokens found in each tier, "gpu" first, and the prompt
    # tokens looked up (the hit fractions' denominator); None without tiers
    kv_tier_hit_tokens: dict[str, int] | None = None
    kv_tier_query_tokens: int = 0
    timeseries: TimeSeries | None = None
    extra: dict[str, float] = field(default_factory=dict)
    # how the percentiles were computed: "exact" (every value kept) or "sketch" (a DDSketch,
    # each within ``relative_error`` of the exact value at its rank: results.sketch)
    percentile_method: str = "exact"
    relative_error: float | None = None


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """Requests' outcomes as columns (NaN where a time is unknown; ``errors`` None where the
    request finished): the one outcome column type. The exact sink keeps every request's
    (:func:`summarize_columns` reads them), the sketch sink folds batches of them into sketches
    (:class:`~servecap.results.stream.StreamingSummary`) and the Parquet writer writes them.

    A simulation builds these directly; :func:`columns_from_records` builds them from records.
    """

    arrival_s: NDArray[np.float64]
    first_token_s: NDArray[np.float64]
    end_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    cached_prompt_tokens: NDArray[np.int64]
    preemptions: NDArray[np.int64]
    queue_time_s: NDArray[np.float64]
    errors: tuple[str | None, ...]

    def __len__(self) -> int:
        return len(self.arrival_s)

    def take(self, idx: NDArray[np.int64]) -> RecordColumns:
        """The rows ``idx``, in that order."""
        errors = self.errors
        return RecordColumns(
            self.arrival_s[idx],
            self.first_token_s[idx],
            self.end_s[idx],
            self.prompt_tokens[idx],
            self.output_tokens[idx],
            self.cached_prompt_tokens[idx],
            self.preemptions[idx],
            self.queue_time_s[idx],
            tuple(errors[i] for i in idx.tolist()),
        )

    def ok(self) -> NDArray[np.bool_]:
        """Rows that finished (no error, an end time)."""
        ok: NDArray[np.bool_] = np.fromiter((e is None for e in self.errors), bool, len(self.errors))
        return ok & ~np.isnan(self.end_s)

    def error_counts(self) -> Counter[str]:
        """Rows per error kind (the rows that finished left out)."""
        return Counter(e for e in self.errors if e is not None)


def records_from_columns(
    columns: RecordColumns,
    *,
    user_ids: Sequence[int | None] | None = None,
    turns: Sequence[int] | None = None,
    token_times_s: Sequence[tuple[float, ...]] | None = None,
) -> list[RequestRecord]:
    """Per-request records from columns (the inverse of :func:`columns_from_records`); request
    ids are row numbers, NaN times become None."""

    def opt(x: float) -> float | None:
        return None if np.isnan(x) else float(x)

    c = columns
    return [
        RequestRecord(
            request_id=i,
            arrival_s=float(c.arrival_s[i]),
            prompt_tokens=int(c.prompt_tokens[i]),
            output_tokens=int(c.output_tokens[i]),
            first_token_s=opt(c.first_token_s[i]),
            end_s=opt(c.end_s[i]),
            token_times_s=token_times_s[i] if token_times_s is not None else (),
            cached_prompt_tokens=int(c.cached_prompt_tokens[i]),
            preemptions=int(c.preemptions[i]),
            queue_time_s=opt(c.queue_time_s[i]),
            error=c.errors[i],
            user_id=user_ids[i] if user_ids is not None else None,
            turn=turns[i] if turns is not None else 1,
        )
        for i in range(len(c))
    ]


def latencies(c: RecordColumns) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per row: TTFT, TPOT (NaN for one-token answers) and E2E (the module doc's definitions;
    written once for both sinks: the exact summary and the sketches)."""
    ttft = c.first_token_s - c.arrival_s
    e2e = c.end_s - c.arrival_s
    out = c.output_tokens
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out >= 2, (c.end_s - c.first_token_s) / np.maximum(out - 1, 1), np.nan)
    return ttft, tpot, e2e


def meets_slo(
    ok: NDArray[np.bool_], ttft: NDArray[np.float64], tpot: NDArray[np.float64], slo: Slo | None
) -> NDArray[np.bool_] | None:
    """Rows that completed within every SLO (None without one): a one-token answer has no TPOT
    and passes that test."""
    if slo is None or (slo.ttft_s is None and slo.tpot_s is None):
        return None
    meets = ok.copy()
    if slo.ttft_s is not None:
        meets &= ttft <= slo.ttft_s
    if slo.tpot_s is not None:
        meets &= np.isnan(tpot) | (tpot <= slo.tpot_s)
    return meets


def columns_from_records(records: Sequence[RequestRecord]) -> RecordColumns:
    def f(x: float | None) -> float:
        return np.nan if x is None else x

    return RecordColumns(
        arrival_s=np.array([r.arrival_s for r in records], dtype=np.float64),
        first_token_s=np.array([f(r.first_token_s) for r in records], dtype=np.float64),
        end_s=np.array([f(r.end_s) for r in records], dtype=np.float64),
        prompt_tokens=np.array([r.prompt_tokens for r in records], dtype=np.int64),
        output_tokens=np.array([r.output_tokens for r in records], dtype=np.int64),
        cached_prompt_tokens=np.array([r.cached_prompt_tokens for r in records], dtype=np.int64),
        preemptions=np.array([r.preemptions for r in records], dtype=np.int64),
        queue_time_s=np.array([f(r.queue_time_s) for r in records], dtype=np.float64),
        errors=tuple(r.error for r in records),
    )


def summarize(
    records: Sequence[RequestRecord],
    *,
    duration_s: float,
    slo: Slo | None = None,
) -> RunSummary:
    """Summarize records; ITL from each record's ``token_times_s`` (empty when none recorded)."""
    gaps = [g for r in records if r.error is None for g in r.itl_s]
    itl = percentiles(gaps) if gaps else EMPTY
    return summarize_columns(columns_from_records(records), duration_s=duration_s, slo=slo, itl=itl)


def summarize_columns(
    cols: RecordColumns,
    *,
    duration_s: float,
    slo: Slo | None = None,
    itl: Percentiles | None = None,
) -> RunSummary:
    """The summary from columns; ``itl`` is given by the caller (pooled token gaps)."""
    ok = cols.ok()
    ttft, tpot, e2e = latencies(cols)
    out = cols.output_tokens
    completed = int(ok.sum())
    dur = float(duration_s) if duration_s > 0 else float("nan")
    good: float | None = None
    attainment: float | None = None
    meets = meets_slo(ok, ttft, tpot, slo)
    if meets is not None:
        good = float(meets.sum()) / dur if duration_s > 0 else 0.0
        attainment = float(meets.sum()) / len(cols) if len(cols) else None
    errors = cols.error_counts()
    return RunSummary(
        num_requests=len(cols),
        completed=completed,
        duration_s=float(duration_s),
        ttft_s=percentiles(ttft[ok]),
        tpot_s=percentiles(tpot[ok]),
        itl_s=itl if itl is not None else EMPTY,
        e2e_s=percentiles(e2e[ok]),
        queue_time_s=percentiles(cols.queue_time_s[ok]),
        throughput_req_s=completed / dur if duration_s > 0 else 0.0,
        input_tokens_per_s=float(cols.prompt_tokens[ok].sum()) / dur if duration_s > 0 else 0.0,
        output_tokens_per_s=float(out[ok].sum()) / dur if duration_s > 0 else 0.0,
        goodput_req_s=good,
        slo_attainment=attainment,
        slo=slo,
        preemptions=int(cols.preemptions.sum()),
        rejected=int(errors.get("rejected", 0)),
        errors=dict(sorted(errors.items())),
        cached_prompt_tokens=int(cols.cached_prompt_tokens.sum()),
        prompt_tokens=int(cols.prompt_tokens.sum()),
    )


_LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_time_s")


def summary_to_json_dict(summary: RunSummary, *, include_timeseries: bool = False) -> dict[str, Any]:
    """The JSON summary: the issue's keys first (each latency ``{p50, p90, p95, p99, mean}``),
    then the rest. Unknown figures are ``null``."""
    d: dict[str, Any] = {}
    for name in _LATENCIES:
        p: Percentiles = getattr(summary, name)
        d[name] = {"p50": p.p50, "p90": p.p90, "p95": p.p95, "p99": p.p99, "mean": p.mean}
    d.update(
        {
            "throughput_req_s": summary.throughput_req_s,
            "output_tokens_per_s": summary.output_tokens_per_s,
            "goodput_req_s": summary.goodput_req_s,
            "preemptions": summary.preemptions,
            "rejected": summary.rejected,
            "mean_batch_size": summary.mean_batch_size,
            "num_requests": summary.num_requests,
            "completed": summary.completed,
            "duration_s": summary.duration_s,
            "input_tokens_per_s": summary.input_tokens_per_s,
            "slo": None if summary.slo is None else {"ttft_s": summary.slo.ttft_s, "tpot_s": summary.slo.tpot_s},
            "slo_attainment": summary.slo_attainment,
            "errors": dict(summary.errors),
            "max_batch_size": summary.max_batch_size,
            "mean_kv_utilization": summary.mean_kv_utilization,
            "max_kv_utilization": summary.max_kv_utilization,
            "mean_queue_depth": summary.mean_queue_depth,
            "max_queue_depth": summary.max_queue_depth,
            "prefix_cache_hit_rate": summary.prefix_cache_hit_rate,
            "cached_prompt_tokens": summary.cached_prompt_tokens,
            "prompt_tokens": summary.prompt_tokens,
        }
    )
    for name in _LATENCIES:
        d[name]["max"] = getattr(summary, name).max
        d[name]["count"] = getattr(summary, name).count
    d["percentiles"] = {"method": summary.percentile_method, "relative_error": summary.relative_error}
    if summary.kv_tier_hit_tokens is not None:
        d["kv_tiers"] = kv_tiers_json(summary.kv_tier_hit_tokens, summary.kv_tier_query_tokens)
    if summary.extra:
        d["extra"] = dict(summary.extra)
    if include_timeseries and summary.timeseries is not None:
        d["timeseries"] = summary.timeseries.to_dict()
    return d


def kv_tiers_json(hit_tokens: dict[str, int], query_tokens: int) -> dict[str, Any]:
    """Per-tier hits: ``{"query_tokens": q, "gpu": {"tokens": n, "fraction": n / q}, ...}``."""
    out: dict[str, Any] = {"query_tokens": query_tokens}
    for name, n in hit_tokens.items():
        out[name] = {"tokens": n, "fraction": n / query_tokens if query_tokens else None}
    return out


def _kv_tiers_from(d: object) -> tuple[dict[str, int], int] | None:
    if not isinstance(d, dict):
        return None
    hits = {str(k): int(v.get("tokens") or 0) for k, v in d.items() if isinstance(v, dict)}
    return hits, int(d.get("query_tokens") or 0)


def _percentiles_from(d: object) -> Percentiles:
    if not isinstance(d, dict):
        return EMPTY
    return Percentiles(
        d.get("p50"), d.get("p90"), d.get("p95"), d.get("p99"), d.get("mean"), d.get("max"), int(d.get("count") or 0)
    )


def summary_from_json_dict(d: dict[str, Any]) -> RunSummary:
    """The inverse of :func:`summary_to_json_dict` (a stored summary read back, typed). Keys a
    summary written by an older version lacks read as unknown (``None``, 0); ``extra`` keeps
    any numeric key this schema does not name."""
    slo_d = d.get("slo")
    slo = Slo(slo_d.get("ttft_s"), slo_d.get("tpot_s")) if isinstance(slo_d, dict) else None
    known = set(RunSummary.__dataclass_fields__) | {"extra", "timeseries", "percentiles"}
    extra = {k: float(v) for k, v in (d.get("extra") or {}).items() if isinstance(v, int | float)}
    extra.update(
        {k: float(v) for k, v in d.items() if k not in known and isinstance(v, int | float) and not isinstance(v, bool)}
    )
    ts = d.get("timeseries")
    timeseries = None
    if isinstance(ts, dict):
        timeseries = TimeSeries(
            tuple(ts.get("time_s", ())),
            tuple(ts.get("kv_utilization", ())),
            tuple(ts.get("queue_depth", ())),
            tuple(ts.get("running", ())),
        )

    def opt(key: str) -> Any:
        return d.get(key)

    raw_method = d.get("percentiles")
    method: dict[str, Any] = raw_method if isinstance(raw_method, dict) else {}

    return RunSummary(
        num_requests=int(d.get("num_requests") or 0),
        completed=int(d.get("completed") or 0),
        duration_s=float(d.get("duration_s") or 0.0),
        ttft_s=_percentiles_from(d.get("ttft_s")),
        tpot_s=_percentiles_from(d.get("tpot_s")),
        itl_s=_percentiles_from(d.get("itl_s")),
        e2e_s=_percentiles_from(d.get("e2e_s")),
        queue_time_s=_percentiles_from(d.get("queue_time_s")),
        throughput_req_s=float(d.get("throughput_req_s") or 0.0),
        input_tokens_per_s=float(d.get("input_tokens_per_s") or 0.0),
        output_tokens_per_s=float(d.get("output_tokens_per_s") or 0.0),
        goodput_req_s=opt("goodput_req_s"),
        slo_attainment=opt("slo_attainment"),
        slo=slo,
        preemptions=int(d.get("preemptions") or 0),
        rejected=int(d.get("rejected") or 0),
        errors={str(k): int(v) for k, v in (d.get("errors") or {}).items()},
        cached_prompt_tokens=int(d.get("cached_prompt_tokens") or 0),
        prompt_tokens=int(d.get("prompt_tokens") or 0),
        mean_batch_size=opt("mean_batch_size"),
        max_batch_size=opt("max_batch_size"),
        mean_kv_utilization=opt("mean_kv_utilization"),
        max_kv_utilization=opt("max_kv_utilization"),
        mean_queue_depth=opt("mean_queue_depth"),
        max_queue_depth=opt("max_queue_depth"),
        prefix_cache_hit_rate=opt("prefix_cache_hit_rate"),
        kv_tier_hit_tokens=tiers[0] if (tiers := _kv_tiers_from(d.get("kv_tiers"))) is not None else None,
        kv_tier_query_tokens=tiers[1] if tiers is not None else 0,
        timeseries=timeseries,
        extra=extra,
        percentile_method=str(method.get("method") or "exact"),
        relative_error=method.get("relative_error"),
    )
