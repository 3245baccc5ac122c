"""Work bounded before it starts: each use case sizes what it was asked and refuses too much.

A simulation's cost (time and memory) grows with what it simulates: requests (num_requests, or
rate x duration_s), chat users x simulated seconds / their cycle, replicas x simulated seconds,
a model's layers, a fleet plan's candidates (a sweep's grid is checked in app/fleet_sweep.py).
One function per use case computes those sizes from the request alone (no allocation, no
simulation) and raises one line naming the size, the limit and the knob that raises it:

    workload.duration_s=86400.0: rate x duration_s = 100,000/s x 86,400 s = 8,640,000,000 requests,
    over the limit of 10,000,000 requests; raise it with SERVECAP_MAX_REQUESTS

The CLI runs under :func:`cli_limits` (generous: a laptop's memory; each figure can be raised
through its environment variable), the web server under :data:`API_LIMITS` (raised with
``servecap serve --max-requests ...``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from servecap.errors import ServecapError

if TYPE_CHECKING:
    from servecap.workload import WorkloadSpec


# The shapes the checks read, as protocols: the fleet file and the fleet-plan request are
# defined in use cases that call these checks, so naming them here would be an import circle.
class _Autoscaled(Protocol):
    @property
    def max_replicas(self) -> int: ...


class _PoolShape(Protocol):
    @property
    def replicas(self) -> int | None: ...
    @property
    def autoscaler(self) -> _Autoscaled | None: ...


class FleetShape(Protocol):
    """What :func:`check_fleet_work` reads of a fleet file (``servecap.fleet.file_schema.FleetFile``)."""

    @property
    def pools(self) -> Sequence[_PoolShape]: ...


class _TrafficShape(Protocol):
    @property
    def workload(self) -> WorkloadSpec | None: ...


class FleetPlanShape(Protocol):
    """What :func:`check_fleet_plan_work` reads of a plan (``servecap.app.fleet_plan.FleetPlanRequest``)."""

    @property
    def candidates(self) -> Sequence[object]: ...
    @property
    def cheaper_gpu(self) -> object | None: ...
    @property
    def max_replicas(self) -> int: ...
    @property
    def max_window_requests(self) -> int: ...
    @property
    def traffic(self) -> _TrafficShape: ...


MIN_USER_CYCLE_S = 1.0
"""A chat user's cycle (think time plus the answer) counted as at least this long when sizing a
closed loop: with no think time a user sends its next request as soon as one is answered."""


@dataclass(frozen=True, slots=True)
class WorkLimits:
    """The most work one command or API job may ask for, and how each figure is raised."""

    max_requests: int = 10_000_000
    # a fleet run that streams its outcomes into sketches holds nothing per request: its bound is
    # time, not memory (a day of a 10,000-user service is ~35M requests); None: max_requests
    max_streamed_requests: int | None = 100_000_000
    max_users: int = 1_000_000
    max_simulated_s: float = 30 * 86_400.0
    max_replicas: int = 100_000
    max_replica_s: float = 1e9
    max_layers: int = 10_000
    max_candidates: int = 256
    # the events a run generates besides its requests (app/limits.py: count_fleet_events)
    max_timeseries_samples: int = 10_000_000  # samples per time series
    max_events: int = 2_000_000_000  # requests' events + samples + router scrapes + autoscaler ticks
    knobs: Mapping[str, str] = field(default_factory=dict)  # limit name -> how a user raises it

    def raise_hint(self, name: str) -> str:
        knob = self.knobs.get(name)
        return f"; raise it with {knob}" if knob else ""

    def streamed(self) -> WorkLimits:
        """The limits of a run that streams: ``max_streamed_requests`` as its request limit,
        raised by its own knob (both fall back to ``max_requests``'s when unset)."""
        if self.max_streamed_requests is None:
            return self
        knob = self.knobs.get("max_streamed_requests", self.knobs.get("max_requests", ""))
        return replace(self, max_requests=self.max_streamed_requests, knobs={**self.knobs, "max_requests": knob})


_ENV = {
    "max_requests": "SERVECAP_MAX_REQUESTS",
    "max_streamed_requests": "SERVECAP_MAX_STREAMED_REQUESTS",
    "max_users": "SERVECAP_MAX_USERS",
    "max_simulated_s": "SERVECAP_MAX_SIMULATED_S",
    "max_replicas": "SERVECAP_MAX_REPLICAS",
    "max_replica_s": "SERVECAP_MAX_REPLICA_S",
    "max_layers": "SERVECAP_MAX_LAYERS",
    "max_candidates": "SERVECAP_MAX_CANDIDATES",
    "max_timeseries_samples": "SERVECAP_MAX_TIMESERIES_SAMPLES",
    "max_events": "SERVECAP_MAX_EVENTS",
}
SERVE_FLAGS = {
    "max_requests": "servecap serve --max-requests",
    "max_users": "servecap serve --max-users",
    "max_simulated_s": "servecap serve --max-simulated-s",
    "max_replicas": "servecap serve --max-replicas",
    "max_replica_s": "servecap serve --max-replica-s",
    "max_layers": "servecap serve --max-layers",
    "max_candidates": "servecap serve --max-candidates",
    "max_timeseries_samples": "servecap serve --max-timeseries-samples",
    "max_events": "servecap serve --max-events",
}

API_LIMITS = WorkLimits(
    max_requests=200_000,
    max_streamed_requests=None,  # one request limit for every API job: servecap serve --max-requests
    max_users=100_000,
    max_simulated_s=86_400.0,
    max_replicas=4_096,
    max_replica_s=50_000_000.0,
    max_layers=1_000,
    max_candidates=32,
    max_timeseries_samples=20_000,  # a day at 5 s; the pages plot what the server holds
    max_events=50_000_000,
    knobs=SERVE_FLAGS,
)
"""The web server's defaults (``servecap serve --max-requests`` and friends change them)."""


def cli_limits(environ: Mapping[str, str] | None = None) -> WorkLimits:
    """The CLI's limits: the defaults, each overridden by its environment variable."""
    env = os.environ if environ is None else environ
    base = WorkLimits(knobs=_ENV)
    updates: dict[str, float | int] = {}
    for name, var in _ENV.items():
        text = env.get(var)
        if text is None or not text.strip():
            continue
        try:
            value = float(text)
        except ValueError:
            raise ServecapError(var, text, "must be a positive number") from None
        if not math.isfinite(value) or value <= 0:
            raise ServecapError(var, text, "must be a positive finite number")
        updates[name] = value if name.endswith("_s") else int(value)
    return replace(base, **updates) if updates else base  # type: ignore[arg-type]


def _over(
    field_name: str,
    value: object,
    size: float,
    limit: float,
    unit: str,
    limits: WorkLimits,
    name: str,
    *,
    how: str = "",
) -> None:
    """Raise when ``size`` passes ``limit``: ``field=value: [how = ]size unit, over the limit of
    limit unit (raise it with ...)``."""
    if size > limit or math.isnan(size):
        computed = f"{how} = {size:,.0f} {unit}, over" if how else "over"
        raise ServecapError(field_name, value, f"{computed} the limit of {limit:,.0f} {unit}{limits.raise_hint(name)}")


def _n(x: float) -> str:
    """A number for a message: whole numbers with thousands separators, others to 6 figures."""
    if not math.isfinite(x) or abs(x) >= 1e15 or x != int(x):
        return f"{x:,.6g}"
    return f"{int(x):,}"


# ---- sizes ---------------------------------------------------------------------------------------


def open_loop_requests(spec: WorkloadSpec) -> float | None:
    """Requests an open-loop workload asks for (None: a trace, replayed whole, or no stop)."""
    from servecap.workload import integrated_rate
    from servecap.workload.schedule_spec import ScheduleArrival

    by_time: float | None = None
    if spec.duration_s is not None:
        rate = getattr(spec.arrival, "rate_per_s", None)  # the mean rate of every synthetic arrival
        if isinstance(rate, int | float):
            by_time = float(rate) * spec.duration_s
        elif isinstance(spec.arrival, ScheduleArrival):
            by_time = integrated_rate(spec.arrival, 0.0, spec.duration_s)
    if spec.num_requests is not None:
        return float(spec.num_requests) if by_time is None else min(float(spec.num_requests), by_time)
    return by_time


def closed_loop_requests(users: int, duration_s: float | None, think_time_s: float, num_requests: int | None) -> float:
    """Requests ``users`` chat users send over ``duration_s``: one a cycle each, a cycle at least
    :data:`MIN_USER_CYCLE_S` long."""
    by_time = math.inf if duration_s is None else users * duration_s / max(think_time_s, MIN_USER_CYCLE_S)
    return by_time if num_requests is None else min(float(num_requests), by_time)


# ---- checks, one per use case --------------------------------------------------------------------


def check_workload(spec: WorkloadSpec, limits: WorkLimits, *, where: str = "workload", streaming: bool = False) -> None:
    """A single engine's run (``simulate``, one capacity evaluation): its requests, users and
    simulated seconds. ``where`` prefixes the field names ("": a request body's own fields);
    ``streaming``: a fleet run that keeps nothing per request, bounded by ``max_streamed_requests``."""
    from servecap.workload import dist_mean

    if streaming:
        limits = limits.streamed()

    if spec.duration_s is not None:
        d = spec.duration_s
        _over(_at(where, "duration_s"), d, d, limits.max_simulated_s, "simulated seconds", limits, "max_simulated_s")
    if spec.users is not None:
        users = spec.users.count
        _over(_at(where, "users"), users, users, limits.max_users, "chat users", limits, "max_users")
        think = dist_mean(spec.users.think_time_s)
        n = closed_loop_requests(users, spec.duration_s, think, spec.num_requests)
        how = f"{users:,} users x {_n(spec.duration_s or math.inf)} s / max(think time {_n(think)} s, 1 s)"
        if spec.num_requests is not None and n == spec.num_requests:
            how = ""
        _over(_at(where, "users"), users, n, limits.max_requests, "requests", limits, "max_requests", how=how)
        return
    n_open = open_loop_requests(spec)
    if n_open is None:
        return
    if spec.num_requests is not None and n_open == spec.num_requests:
        k = spec.num_requests
        _over(_at(where, "num_requests"), k, k, limits.max_requests, "requests", limits, "max_requests")
        return
    rate = getattr(spec.arrival, "rate_per_s", None)
    how = f"rate x duration_s = {_n(rate)}/s x {_n(spec.duration_s or 0)} s" if rate is not None else "the schedule"
    _over(
        _at(where, "duration_s"),
        spec.duration_s,
        n_open,
        limits.max_requests,
        "requests",
        limits,
        "max_requests",
        how=how,
    )


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def check_layers(num_layers: int, limits: WorkLimits, *, where: str = "model.num_hidden_layers") -> None:
    """A model's layer count (the per-layer tables of a config are built from it)."""
    _over(where, num_layers, num_layers, limits.max_layers, "layers", limits, "max_layers")


def check_fleet_work(fleet: FleetShape, workload: WorkloadSpec, limits: WorkLimits, *, streaming: bool = False) -> None:
    """``fleet simulate``: the workload's requests and users, the fleet's replicas (the most each
    pool may run: its autoscaler's max, else its count) and replicas x simulated seconds;
    ``streaming`` as :func:`check_workload`."""
    check_workload(workload, limits, streaming=streaming)
    replicas = 0
    for p in fleet.pools:
        most = p.replicas if p.replicas is not None else 1
        if p.autoscaler is not None:
            most = max(most, p.autoscaler.max_replicas)
        replicas += most
    what = "replicas in all pools (autoscaler maxima counted)"
    _over("fleet.pools.replicas", replicas, replicas, limits.max_replicas, what, limits, "max_replicas")
    check_fleet_events(fleet, workload, limits, replicas)
    horizon = _horizon_s(workload)
    if horizon is not None:
        how = f"{replicas:,} replicas x {_n(horizon)} s"
        size = replicas * horizon
        _over(
            "fleet.pools.replicas",
            replicas,
            size,
            limits.max_replica_s,
            "replica-seconds",
            limits,
            "max_replica_s",
            how=how,
        )


EVENTS_PER_REQUEST = 4
"""A request's events in a fleet run: arrival, routing, admission, completion (a P/D request's KV
transfer is a fifth, counted in :func:`count_fleet_events`); its decode steps are its replica's."""

DEFAULT_SAMPLES = 400
"""Time-series samples over a run without ``timeseries_interval_s`` (servecap.fleet.simulate)."""

DEFAULT_AUTOSCALER_INTERVAL_S = 15.0
"""An autoscaler tick when its preset's is not at hand (HPA's 15 s sync period)."""


@dataclass(frozen=True, slots=True)
class FleetEvents:
    """The events a fleet run generates over ``horizon_s``, counted from the request alone."""

    horizon_s: float
    requests: float
    timeseries_interval_s: float
    samples_per_series: float
    series: int
    router_scrapes: float
    link_transfers: float
    autoscaler_ticks: float

    @property
    def total(self) -> float:
        return (
            self.requests * EVENTS_PER_REQUEST
            + self.link_transfers
            + self.samples_per_series * self.series
            + self.router_scrapes
            + self.autoscaler_ticks
        )


def count_fleet_events(fleet: FleetShape, workload: WorkloadSpec, horizon_s: float, replicas: int) -> FleetEvents:
    """Requests, time-series samples (per series: a fleet's and each pool's gauges), router
    scrapes (each reads every replica), P/D link transfers (one a request) and autoscaler ticks."""
    from servecap.workload import dist_mean

    if workload.users is not None:
        think = dist_mean(workload.users.think_time_s)
        requests = closed_loop_requests(workload.users.count, horizon_s, think, workload.num_requests)
    else:
        requests = open_loop_requests(workload) or 0.0
    pools = list(fleet.pools)
    interval = getattr(fleet, "timeseries_interval_s", None) or max(horizon_s, 1e-9) / DEFAULT_SAMPLES
    router = getattr(fleet, "router", None)
    scrape_ms = float(getattr(router, "scrape_interval_ms", 0.0) or 0.0)
    scrapes = horizon_s / (scrape_ms / 1e3) * replicas if scrape_ms > 0 else 0.0
    pd = any(getattr(p, "role", "both") != "both" for p in pools)
    ticks = 0.0
    for p in pools:
        if p.autoscaler is not None:
            tick = getattr(p.autoscaler, "interval_s", None) or DEFAULT_AUTOSCALER_INTERVAL_S
            ticks += horizon_s / tick
    return FleetEvents(
        horizon_s=horizon_s,
        requests=requests,
        timeseries_interval_s=interval,
        samples_per_series=horizon_s / interval,
        series=1 + len(pools),
        router_scrapes=scrapes,
        link_transfers=requests if pd else 0.0,
        autoscaler_ticks=ticks,
    )


def check_fleet_events(fleet: FleetShape, workload: WorkloadSpec, limits: WorkLimits, replicas: int) -> None:
    """Refuse a fleet run whose time series or events (:func:`count_fleet_events`) pass the limits."""
    horizon = _horizon_s(workload)
    if horizon is None:
        return
    ev = count_fleet_events(fleet, workload, horizon, replicas)
    ts = getattr(fleet, "timeseries_interval_s", None)
    _over(
        "fleet.timeseries_interval_s",
        ts,
        ev.samples_per_series,
        limits.max_timeseries_samples,
        "samples per time series",
        limits,
        "max_timeseries_samples",
        how=f"{_n(horizon)} s / {_n(ev.timeseries_interval_s)} s",
    )
    parts = [f"{_n(ev.requests)} requests x {EVENTS_PER_REQUEST}", f"{_n(ev.samples_per_series * ev.series)} samples"]
    if ev.router_scrapes:
        parts.append(f"{_n(ev.router_scrapes)} router scrapes")
    if ev.link_transfers:
        parts.append(f"{_n(ev.link_transfers)} KV transfers")
    if ev.autoscaler_ticks:
        parts.append(f"{_n(ev.autoscaler_ticks)} autoscaler ticks")
    biggest = max(
        (("fleet.router.scrape_interval_ms", ev.router_scrapes), ("fleet.timeseries_interval_s", ev.samples_per_series),
         ("fleet.pools.autoscaler.interval_s", ev.autoscaler_ticks), ("workload", ev.requests)),
        key=lambda kv: kv[1],
    )[0]  # fmt: skip
    value: object = {
        "fleet.router.scrape_interval_ms": getattr(getattr(fleet, "router", None), "scrape_interval_ms", None),
        "fleet.timeseries_interval_s": ts,
    }.get(biggest, f"{_n(horizon)} s")
    _over(biggest, value, ev.total, limits.max_events, "events", limits, "max_events", how=" + ".join(parts))


def _horizon_s(workload: WorkloadSpec) -> float | None:
    """The simulated seconds of a run: its duration, else its requests over its mean rate."""
    if workload.duration_s is not None:
        return workload.duration_s
    rate = getattr(workload.arrival, "rate_per_s", None)
    if workload.num_requests is not None and isinstance(rate, int | float) and rate > 0:
        return workload.num_requests / float(rate)
    return None


def check_fleet_plan_work(request: FleetPlanShape, limits: WorkLimits) -> None:
    """``fleet plan``: its candidates, the replicas it may try, its peak window's requests (each
    simulation's size), a closed-loop workload's users."""
    n = len(request.candidates) + (1 if request.cheaper_gpu is not None else 0)
    _over("plan.candidates", n, n, limits.max_candidates, "candidate pools", limits, "max_candidates")
    m = request.max_replicas
    _over("plan.max_replicas", m, m, limits.max_replicas, "replicas", limits, "max_replicas")
    w = request.max_window_requests
    _over("plan.max_window_requests", w, w, limits.max_requests, "requests", limits, "max_requests")
    workload = request.traffic.workload
    if workload is not None and workload.users is not None:
        check_workload(workload, limits, where="plan.traffic.workload")
