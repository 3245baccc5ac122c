"""A fleet run's result types and the figures read off its replicas and engines, shared by the
run (:mod:`servecap.fleet.simulate`) and its two sinks (:mod:`servecap.fleet.sinks`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from servecap.errors import ServecapError
from servecap.fleet.gateway_outcomes import GatewayStats
from servecap.fleet.gateway_stage import GatewayStage
from servecap.fleet.pd.stats import PdStats
from servecap.fleet.pools import Pools
from servecap.fleet.spec import FleetSpec
from servecap.results import (
    RecordColumns,
    RequestRecord,
    RunSummary,
    records_from_columns,
)
from servecap.results.sketch_set import RunSketches
from servecap.sim.observer import Observer


@dataclass(frozen=True, slots=True)
class ReplicaStats:
    replica_id: int
    pool: str
    state: str  # at the end of the run
    requested_s: float
    ready_s: float | None
    stopped_s: float | None
    routed: int  # requests handed to it
    completed: int
    busy_s: float  # time its engine was running a step
    utilization: float  # busy / time ready (0 when never ready)
    prefix_cache_hit_rate: float | None
    mean_in_system: float  # time-average of requests in it, over its time ready
    sojourn_s: float  # Σ over the requests it held of the time they spent in it
    area_s: float  # ∫ requests in it dt (Little's law: equals sojourn_s)
    billed_s: float
    load_req_s: float | None  # requests it completed per second of its time ready (None: never ready)


@dataclass(frozen=True, slots=True)
class FleetTimeSeries:
    time_s: tuple[float, ...]
    arrival_rate_req_s: tuple[float, ...]  # arrivals since the previous sample / interval
    ready: tuple[int, ...]
    starting: tuple[int, ...]
    queue_depth: tuple[int, ...]  # waiting in engines + at the router
    running: tuple[int, ...]
    kv_usage: tuple[float, ...]  # mean over ready replicas
    p99_ttft_s: tuple[float, ...]  # rolling, over the fleet's ttft_window_s
    # per replica (by id): its engine's busy share of each interval between samples (the
    # interval ending at that sample; 0 while it was not running)
    replica_utilization: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class FleetResult:
    summary: RunSummary
    columns: RecordColumns
    replica_of: tuple[int, ...]  # per request: the replica it ended on (-1: none)
    replicas: tuple[ReplicaStats, ...]
    timeseries: FleetTimeSeries
    outcomes: dict[str, int]  # "ok" and every error kind
    horizon_s: float
    gpu_hours: float
    cost_usd: float
    usd_per_million_tokens: float | None
    usd_per_user: float | None  # closed-loop users only
    retried: int
    scale_events: tuple[tuple[float, str, int, int], ...]  # (time, pool, from, to)
    gpu_log: tuple[tuple[float, int], ...]  # (time, change of requested GPUs)
    mean_in_system: float  # fleet-wide time-average (requests admitted and not ended)
    by_tenant: dict[str, RunSummary] = field(default_factory=dict)  # traffic mixes with tenants
    by_class: dict[str, RunSummary] = field(default_factory=dict)
    gateway: GatewayStats | None = None  # with a gateway stage: outcomes per tenant, decisions
    served_summary: RunSummary | None = None  # with a gateway: the requests a pool served (no cache hits)
    by_pool: dict[str, RunSummary] = field(default_factory=dict)  # fleets of several pools
    # a streaming run's mergeable accumulators (summary, per class, tenant, pool and time window);
    # ``columns`` is then empty (per-request records went to a file, if asked for)
    sketches: RunSketches | None = None
    pd: PdStats | None = None  # a disaggregated fleet: per-role times, transfers, links
    # the records file could not be written (disk full, ...): the run itself is whole and is
    # stored; the interface reports this one line afterwards
    records_error: ServecapError | None = None

    def records(self) -> list[RequestRecord]:
        """Per-request records (the shared results schema)."""
        return records_from_columns(self.columns)


class Recorder:
    """The observer's gauges: the engine gauges, plus the fleet's series at each sample."""

    def __init__(self, fleet: Pools, stage: GatewayStage | None = None) -> None:
        self.fleet = fleet
        self.stage = stage
        self.observer: Observer | None = None
        self.t: list[float] = []
        self.rate: list[float] = []
        self.ready: list[int] = []
        self.starting: list[int] = []
        self._last_t = 0.0
        self._last_arrivals = 0
        self.busy: list[list[float]] = []  # per sample: each replica's engine busy time so far

    def __call__(self) -> tuple[float, int, int]:
        f = self.fleet
        obs = self.observer
        assert obs is not None
        t = f.now_s
        arrivals = obs.arrivals
        dt = t - self._last_t
        self.rate.append((arrivals - self._last_arrivals) / dt if dt > 0 else 0.0)
        self._last_t, self._last_arrivals = t, arrivals
        self.t.append(t)
        self.ready.append(f.count("ready"))
        self.starting.append(f.count("starting"))
        self.busy.append([r.engine.busy_s for r in f.replicas])
        kv, waiting, running = f.gauges()
        if self.stage is not None:
            waiting += self.stage.queued()
        return kv, waiting, running

    def utilization(self) -> tuple[tuple[float, ...], ...]:
        """Per replica, its busy share of each interval between samples (a replica's engine
        time runs ahead of the sample by at most one step: the share is clipped to 1)."""
        n = len(self.fleet.replicas)
        rows = [[0.0] * len(self.t) for _ in range(n)]
        prev_t = 0.0
        prev: list[float] = []
        for k, (t, busy) in enumerate(zip(self.t, self.busy, strict=True)):
            dt = t - prev_t
            if dt > 0:
                for i, b in enumerate(busy):
                    before = prev[i] if i < len(prev) else 0.0
                    rows[i][k] = min(1.0, max(0.0, (b - before) / dt))
            prev_t, prev = t, busy
        return tuple(tuple(r) for r in rows)


def request_overhead_s(fleet: FleetSpec) -> float:
    """The API servers' per-request cost the clients see (``Efficiency.request_overhead_s``):
    the pools' (the largest where calibrations give them different ones)."""
    return max((p.setup.efficiency.request_overhead_s for p in fleet.pools), default=0.0)


def replica_figures(spec: FleetSpec, fleet: Pools, horizon_s: float) -> tuple[list[ReplicaStats], float, float]:
    """Each replica's figures, the bill (USD) and the GPU-seconds requested, up to ``horizon_s``."""
    stats = []
    cost = 0.0
    gpu_s = 0.0
    for r in fleet.replicas:
        pool = spec.pools[r.pool_index]
        billed = r.billed_s(horizon_s)
        gpu_s += billed * pool.gpus_per_replica
        cost += billed / 3600.0 * pool.gpus_per_replica * pool.price_per_gpu_hour
        ready_span = (
            ((r.stopped_s if r.stopped_s is not None else horizon_s) - r.ready_s) if r.ready_s is not None else 0.0
        )
        es = r.engine.stats
        stats.append(
            ReplicaStats(
                replica_id=r.replica_id,
                pool=r.pool,
                state=r.state,
                requested_s=r.requested_s,
                ready_s=r.ready_s,
                stopped_s=r.stopped_s,
                routed=r.routed,
                completed=r.completed,
                busy_s=r.busy_s(),
                utilization=r.busy_s() / ready_span if ready_span > 0 else 0.0,
                prefix_cache_hit_rate=es.prefix_cache_hit_rate,
                mean_in_system=r.area_s / ready_span if ready_span > 0 else 0.0,
                sojourn_s=r.sojourn_s,
                area_s=r.area_s,
                billed_s=billed,
                load_req_s=r.completed / ready_span if ready_span > 0 else None,
            )
        )
    return stats, cost, gpu_s


def engine_figures(summary: RunSummary, fleet: Pools, observer: Observer) -> RunSummary:
    """The summary with the engines' own figures (prefix cache, preemptions, KV, queue depth)."""
    hit = sum(r.engine.stats.prefix_cache_hit_tokens for r in fleet.replicas)
    query = sum(r.engine.stats.prefix_cache_query_tokens for r in fleet.replicas)
    tiers: dict[str, int] | None = None
    if any(r.engine.tiers is not None for r in fleet.replicas):  # per-tier hits, summed over replicas
        tiers = {"gpu": hit}
        for r in fleet.replicas:
            for name, n in r.engine.stats.tier_hit_tokens:
                tiers[name] = tiers.get(name, 0) + n
    return replace(
        summary,
        prefix_cache_hit_rate=hit / query if query else None,
        kv_tier_hit_tokens=tiers,
        kv_tier_query_tokens=query if tiers is not None else 0,
        preemptions=sum(r.engine.stats.preemptions for r in fleet.replicas),
        mean_kv_utilization=float(np.mean(observer.ts_kv)) if observer.ts_kv else 0.0,
        max_queue_depth=max(observer.ts_waiting, default=0),
    )
