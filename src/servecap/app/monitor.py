"""`monitor` use case: scrape servers every interval, window figures per replica and fleet-wide,
headroom against the plan, samples stored in SQLite; reports as pydantic models (= ``--json``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from servecap.errors import ServecapError
from servecap.monitor.advice import Advice, Advisor
from servecap.monitor.headroom import Capacity, Headroom, capacity_from_cache_config, headroom
from servecap.monitor.scrape import Down, metrics_url, scrape_all
from servecap.monitor.snapshot import Snapshot
from servecap.monitor.store import MonitorStore
from servecap.monitor.views import replica_views
from servecap.monitor.watch import Tick, Watch
from servecap.monitor.window import WindowStats

if TYPE_CHECKING:
    from servecap.app.monitor_fleet import PoolAutoscaler


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WindowReport(_Model):
    window_s: float
    running: float | None
    waiting: float | None
    kv_usage: float | None
    request_rate_per_s: float | None
    prompt_tok_s: float | None
    generation_tok_s: float | None
    preemptions_per_s: float | None
    prefix_hit_rate: float | None
    latency_s: dict[str, dict[str, float | None]]


class TargetReport(_Model):
    url: str
    up: bool
    error: str | None
    down_count: int
    engine: str | None
    model_name: str | None
    window: WindowReport | None


class HeadroomReport(_Model):
    replicas_up: int
    load_per_replica: float
    capacity_per_replica: float
    capacity_source: str
    limited_by: str
    utilization: float
    traffic_headroom: float | None
    queueing: bool
    summary: str


class AutoscalerReport(_Model):
    """What the pool's autoscaler (from the fleet file) decides on this tick's signal."""

    pool: str
    fleet_file: str
    signal: str
    target: float
    value: float  # as the policy reads it: a fleet sum for num_requests_waiting / inflight
    value_per_replica: float
    current_replicas: int
    recommended_replicas: int  # before stabilisation, step limits and bounds
    desired_replicas: int
    upscale_stabilization_s: float
    downscale_stabilization_s: float
    summary: str


class MonitorReport(_Model):
    schema_version: str = "servecap.monitor/1"
    time_s: float
    replicas_up: int
    replicas_down: int
    targets: list[TargetReport]
    fleet: WindowReport | None
    headroom: HeadroomReport | None
    notes: list[str]
    autoscaler: AutoscalerReport | None = None


def _window(w: WindowStats | None) -> WindowReport | None:
    if w is None:
        return None
    return WindowReport(
        window_s=w.window_s,
        running=w.running,
        waiting=w.waiting,
        kv_usage=w.kv_usage,
        request_rate_per_s=w.request_rate_per_s,
        prompt_tok_s=w.prompt_tok_s,
        generation_tok_s=w.generation_tok_s,
        preemptions_per_s=w.preemptions_per_s,
        prefix_hit_rate=w.prefix_hit_rate,
        latency_s=w.latency_s,
    )


def _headroom(h: Headroom) -> HeadroomReport:
    return HeadroomReport(
        replicas_up=h.replicas_up,
        load_per_replica=h.load_per_replica,
        capacity_per_replica=h.capacity.requests_per_replica,
        capacity_source=h.capacity.source,
        limited_by=h.capacity.limited_by,
        utilization=h.utilization,
        traffic_headroom=h.traffic_headroom,
        queueing=h.queueing,
        summary=h.summary(),
    )


def _advice(a: Advice) -> AutoscalerReport:
    return AutoscalerReport(
        pool=a.pool,
        fleet_file=a.source,
        signal=a.settings.signal,
        target=a.settings.target,
        value=a.value,
        value_per_replica=a.per_replica,
        current_replicas=a.current,
        recommended_replicas=a.recommended,
        desired_replicas=a.desired,
        upscale_stabilization_s=a.settings.upscale_stabilization_s,
        downscale_stabilization_s=a.settings.downscale_stabilization_s,
        summary=a.summary(),
    )


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    urls: tuple[str, ...]
    interval_s: float = 2.0
    window_s: float = 60.0
    duration_s: float | None = None
    once: bool = False
    db: Path | None = None
    store: bool = True
    capacity: Capacity | None = None  # from the plan; else read from vllm:cache_config_info
    tokens_per_request: int = 1024 + 128
    timeout_s: float = 2.0
    autoscaler: PoolAutoscaler | None = None  # --fleet/--pool: advice from the pool's autoscaler


def validate(settings: MonitorSettings) -> MonitorSettings:
    """Normalized URLs (``/metrics`` added) and checked numbers, or one :class:`ServecapError`."""
    if not settings.urls:
        raise ServecapError("url", "", "give at least one server URL, e.g. http://127.0.0.1:8000")
    for name, value in (
        ("interval_s", settings.interval_s),
        ("window_s", settings.window_s),
        ("timeout_s", settings.timeout_s),
    ):
        if not 0 < value <= 86_400:
            raise ServecapError(name, value, "must be a positive number of seconds (at most a day)")
    if settings.duration_s is not None and not 0 < settings.duration_s <= 30 * 86_400:
        raise ServecapError("duration_s", settings.duration_s, "must be a positive number of seconds")
    if settings.window_s < settings.interval_s:
        raise ServecapError("window_s", settings.window_s, f"must be at least the interval ({settings.interval_s} s)")
    urls = tuple(metrics_url(u) for u in settings.urls)
    if len(set(urls)) != len(urls):
        raise ServecapError("url", ", ".join(settings.urls), "lists a server twice")
    return replace(settings, urls=urls)


def _capacity(settings: MonitorSettings, latest: Sequence[Snapshot | Down], notes: list[str]) -> Capacity | None:
    if settings.capacity is not None:
        return settings.capacity
    for r in latest:
        if isinstance(r, Snapshot) and r.cache_config is not None and r.cache_config.num_gpu_blocks:
            return capacity_from_cache_config(r.cache_config, settings.tokens_per_request)
    if not any("headroom" in n for n in notes):
        notes.append("no headroom: give the deployment (--model/--gpu ...) or scrape a vLLM exposing cache_config_info")
    return None


def report(tick: Tick, settings: MonitorSettings, notes: list[str], advisor: Advisor | None = None) -> MonitorReport:
    """The tick as a :class:`MonitorReport` (headroom when a capacity is known and a window exists;
    the autoscaler's decision on this tick when an ``advisor`` is given: it keeps its state)."""
    targets = [
        TargetReport(
            url=t.url,
            up=t.up,
            error=t.error,
            down_count=t.down_count,
            engine=t.snapshot.engine if t.snapshot else None,
            model_name=t.snapshot.model_name if t.snapshot else None,
            window=_window(t.stats),
        )
        for t in tick.targets
    ]
    hr = None
    cap = _capacity(settings, tick.latest, notes)
    if cap is not None and tick.fleet is not None and tick.replicas_up:
        hr = _headroom(headroom(tick.fleet, tick.replicas_up, cap))
    advice = None
    if advisor is not None:
        a = advisor.advise(tick.time_s, replica_views(tick.latest, advisor.pool), tick.fleet)
        advice = _advice(a) if a is not None else None
    return MonitorReport(
        time_s=tick.time_s,
        replicas_up=tick.replicas_up,
        replicas_down=len(tick.targets) - tick.replicas_up,
        targets=targets,
        fleet=_window(tick.fleet),
        headroom=hr,
        notes=list(notes),
        autoscaler=advice,
    )


def _store(store: MonitorStore, tick: Tick) -> None:
    for t in tick.targets:
        if t.up and t.stats is not None:
            store.add_up(t.stats, tick.time_s)
        elif not t.up:
            store.add_down(t.url, tick.time_s, t.error or "down")
    if tick.fleet is not None:
        store.add_up(tick.fleet, tick.time_s)


async def run_monitor(
    settings: MonitorSettings,
    on_report: Callable[[MonitorReport], None],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> MonitorReport:
    """Scrape every ``interval_s`` until ``duration_s`` (or forever; ``once``: two scrapes one
    interval apart, so rates have a window) and hand each report to ``on_report``; returns the
    last report. Samples go to ``settings.db`` (the run store's file) when ``settings.store``."""
    settings = validate(settings)
    notes: list[str] = []
    watch = Watch(settings.urls, settings.window_s)
    advisor = None
    if settings.autoscaler is not None:
        pa = settings.autoscaler
        advisor = Advisor(pa.settings, pa.pool, pa.source)
        notes.extend(pa.notes)
    store = None
    if settings.store:
        from servecap.monitor.store import default_path

        store = MonitorStore(settings.db or default_path(), list(settings.urls))
    start = clock()
    last: MonitorReport | None = None
    rounds = 0
    try:
        while True:
            now = clock() - start
            # a watch ends within a second of duration_s, however slowly a target answers
            budget_s = settings.timeout_s
            if settings.duration_s is not None:
                budget_s = min(budget_s, max(1.0, settings.duration_s - now))
            results = await scrape_all(list(settings.urls), now, timeout_s=budget_s)
            tick = watch.add(results, now)
            rounds += 1
            if store is not None and rounds > 1:
                _store(store, tick)
            last = report(tick, settings, notes, advisor)
            if not settings.once or rounds >= 2:
                on_report(last)
            if settings.once and rounds >= 2:
                break
            if settings.duration_s is not None and clock() - start + settings.interval_s > settings.duration_s:
                break
            await asyncio.sleep(max(0.0, start + rounds * settings.interval_s - clock()))
    finally:
        if store is not None:
            store.close()
    assert last is not None
    return last
