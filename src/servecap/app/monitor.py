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
from servecap.monitor.engine_headroom import EngineHeadroom, EngineModel, engine_headroom
from servecap.monitor.headroom import Capacity, Headroom, capacity_from_cache_config, headroom
from servecap.monitor.observed import ObservedMix, observed_mix
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
    # prefix_hit_rate split by cache (servecap.monitor.cache_hits), and the counters it came from
    local_hit_rate: float | None = None
    external_hit_rate: float | None = None
    hit_rate_source: str | None = None


class TargetReport(_Model):
    url: str
    up: bool
    error: str | None
    down_count: int
    engine: str | None
    model_name: str | None
    window: WindowReport | None


class HeadroomReport(_Model):
    """``capacity_source`` "engine_model": load and capacity are request rates per replica (the
    observed rate and the SLO break rate, with their 95% intervals); "cache_config_info": requests
    in the server against the KV pool's concurrency (no SLO in it)."""

    replicas_up: int
    unit: str = "req/s"  # of load_per_replica and capacity_per_replica
    load_per_replica: float
    capacity_per_replica: float
    capacity_source: str
    limited_by: str
    utilization: float
    traffic_headroom: float | None
    queueing: bool
    summary: str
    load_interval: tuple[float, float] | None = None
    capacity_interval: tuple[float, float] | None = None
    traffic_headroom_interval: tuple[float, float] | None = None
    prompt_tokens: float | None = None  # the observed mix the engine model ran
    output_tokens: float | None = None
    prefix_hit_rate: float | None = None
    observed_tpot_s: float | None = None
    observed_ttft_s: float | None = None
    step_time_scale: float | None = None  # calibration: the model's step time x this
    step_time_scale_interval: tuple[float, float] | None = None
    ttft_residual: float | None = None


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
    policy: str  # the registered autoscaler (servecap.policy.autoscalers.AUTOSCALERS)
    mode: str  # the policy's word on its state ("panic mode" for the KPA), or ""


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
        local_hit_rate=w.cache.local_hit_rate if w.cache is not None else None,
        external_hit_rate=w.cache.external_hit_rate if w.cache is not None else None,
        hit_rate_source=w.cache.source if w.cache is not None else None,
    )


def _engine_headroom(h: EngineHeadroom) -> HeadroomReport:
    m, c = h.mix, h.calibration
    return HeadroomReport(
        replicas_up=h.replicas_up,
        unit="req/s",
        load_per_replica=m.rate_per_s,
        capacity_per_replica=h.break_rate_per_s,
        capacity_source="engine_model",
        limited_by=h.limited_by,
        utilization=h.utilization,
        traffic_headroom=h.traffic_headroom,
        queueing=h.queueing,
        summary=h.summary(),
        load_interval=m.rate_interval(),
        capacity_interval=h.break_interval,
        traffic_headroom_interval=h.headroom_interval,
        prompt_tokens=m.prompt_tokens,
        output_tokens=m.output_tokens,
        prefix_hit_rate=m.prefix_hit_rate,
        observed_tpot_s=m.tpot_mean_s,
        observed_ttft_s=m.ttft_mean_s,
        step_time_scale=c.scale,
        step_time_scale_interval=h.scale_interval,
        ttft_residual=c.ttft_residual,
    )


def _headroom(h: Headroom) -> HeadroomReport:
    return HeadroomReport(
        replicas_up=h.replicas_up,
        unit="requests",
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
        policy=a.settings.policy,
        mode=a.mode,
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
    engine_model: EngineModel | None = None  # the deployment: headroom from the engine model
    capacity: Capacity | None = None  # without one: the KV pool of vllm:cache_config_info
    tokens_per_request: int = 1024 + 128
    headroom_every_s: float = 30.0  # live: the engine model is re-run at most this often
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


NO_MIX = "no headroom yet: no request finished in the window (the mix is read from finished requests)"


class EngineHeadroomCache:
    """The engine-model headroom, re-run when the mix moved (rate, lengths, hit rate or TPOT by
    more than 10%) or ``every_s`` passed; in between the last answer's break rate is compared
    with the current rate. A search takes about a second, a scrape interval is 2 s."""

    def __init__(self, model: EngineModel, every_s: float) -> None:
        self.model, self.every_s = model, every_s
        self.last: tuple[float, ObservedMix, EngineHeadroom] | None = None

    def _moved(self, a: ObservedMix, b: ObservedMix) -> bool:
        pairs = (
            (a.rate_per_s, b.rate_per_s),
            (a.prompt_tokens, b.prompt_tokens),
            (a.output_tokens, b.output_tokens),
            (a.tpot_mean_s or 0.0, b.tpot_mean_s or 0.0),
        )
        return any(abs(x - y) > 0.1 * max(abs(x), abs(y), 1e-9) for x, y in pairs) or (
            abs(a.prefix_hit_rate - b.prefix_hit_rate) > 0.1
        )

    def headroom(self, time_s: float, fleet: WindowStats, replicas_up: int, notes: list[str]) -> EngineHeadroom | None:
        mix = observed_mix(fleet, replicas_up)
        if mix is None:
            if NO_MIX not in notes:
                notes.append(NO_MIX)
            return None
        if NO_MIX in notes:
            notes.remove(NO_MIX)
        if self.last is not None:
            t, seen, h = self.last
            if time_s - t < self.every_s and not self._moved(seen, mix):
                queueing = (fleet.waiting or 0.0) > 0 and mix.rate_per_s >= h.break_rate_per_s
                return replace(h, mix=mix, replicas_up=replicas_up, queueing=queueing)
        h = engine_headroom(self.model, mix, replicas_up, waiting=fleet.waiting or 0.0)
        for n in h.notes:
            if n not in notes:
                notes.append(n)
        self.last = (time_s, mix, h)
        return h


def _capacity(settings: MonitorSettings, latest: Sequence[Snapshot | Down], notes: list[str]) -> Capacity | None:
    if settings.capacity is not None:
        return settings.capacity
    for r in latest:
        if isinstance(r, Snapshot) and r.cache_config is not None and r.cache_config.num_gpu_blocks:
            return capacity_from_cache_config(r.cache_config, settings.tokens_per_request)
    if not any("headroom" in n for n in notes):
        notes.append("no headroom: give the deployment (--model/--gpu ...) or scrape a vLLM exposing cache_config_info")
    return None


def report(
    tick: Tick,
    settings: MonitorSettings,
    notes: list[str],
    advisor: Advisor | None = None,
    engine: EngineHeadroomCache | None = None,
) -> MonitorReport:
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
    if settings.engine_model is not None:
        engine = engine or EngineHeadroomCache(settings.engine_model, settings.headroom_every_s)
        if tick.fleet is not None and tick.replicas_up:
            eh = engine.headroom(tick.time_s, tick.fleet, tick.replicas_up, notes)
            hr = _engine_headroom(eh) if eh is not None else None
    else:
        cap = _capacity(settings, tick.latest, notes)
        if cap is not None and tick.fleet is not None and tick.replicas_up:
            hr = _headroom(headroom(tick.fleet, tick.replicas_up, cap))
    if settings.autoscaler is not None:
        from servecap.app.monitor_fleet import model_mismatch

        served = [t.snapshot.model_name for t in tick.targets if t.snapshot is not None and t.snapshot.model_name]
        mismatch = model_mismatch(settings.autoscaler.model, served)
        if mismatch and mismatch not in notes:
            notes.append(mismatch)
    for t in tick.targets:  # speculative decoding: the acceptance the planner should take
        fit = t.stats.spec_acceptance if t.stats is not None else None
        if fit is not None:
            notes[:] = [n for n in notes if not n.startswith(f"{t.url}: speculative decoding")]
            notes.append(
                f"{t.url}: speculative decoding accepts {fit.mean_acceptance_length:.2f} tokens a step "
                f"({fit.num_speculative_tokens:g} drafted; per position "
                + ", ".join(f"{p:.2f}" for p in fit.per_position)
                + f"): plan it with --spec-acceptance {fit.flag}"
            )
    advice = None
    if advisor is not None:
        room = hr.traffic_headroom if hr is not None and not hr.queueing else (0.0 if hr is not None else None)
        a = advisor.advise(tick.time_s, replica_views(tick.latest, advisor.pool), tick.fleet, room)
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
    engine = (
        EngineHeadroomCache(settings.engine_model, settings.headroom_every_s)
        if settings.engine_model is not None
        else None
    )
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
            # the engine model's search takes about a second: off the event loop, so the next
            # scrape keeps its time (one report at a time, so the advisor's state stays ordered)
            last = await asyncio.to_thread(report, tick, settings, notes, advisor, engine)
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
