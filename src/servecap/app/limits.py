"""Work bounded before it starts: each use case sizes what it was asked and refuses too much.

A simulation's cost (time and memory) grows with what it simulates: requests (num_requests, or
rate x duration_s), chat users x simulated seconds / their cycle, replicas x simulated seconds,
a model's layers, a sweep's points, a fleet plan's candidates. One function per use case
computes those sizes from the request alone (no allocation, no simulation) and raises one line
naming the size, the limit and the knob that raises it:

    workload.num_requests=8,640,000,000: rate x duration_s exceeds the limit of 10,000,000 requests
    (raise it with SERVECAP_MAX_REQUESTS)

The CLI runs under :data:`CLI_LIMITS` (generous: a laptop's memory; each figure can be raised
through its environment variable), the web server under :data:`API_LIMITS` (raised with
``servecap serve --max-requests ...``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from servecap.errors import ServecapError

if TYPE_CHECKING:
    from servecap.app.fleet import FleetFile
    from servecap.app.fleet_plan import FleetPlanRequest
    from servecap.workload import WorkloadSpec

MIN_USER_CYCLE_S = 1.0
"""A chat user's cycle (think time plus the answer) counted as at least this long when sizing a
closed loop: with no think time a user sends its next request as soon as one is answered."""


@dataclass(frozen=True, slots=True)
class WorkLimits:
    """The most work one command or API job may ask for, and how each figure is raised."""

    max_requests: int = 10_000_000
    max_users: int = 1_000_000
    max_simulated_s: float = 30 * 86_400.0
    max_replicas: int = 100_000
    max_replica_s: float = 1e9
    max_layers: int = 10_000
    max_sweep_points: int = 10_000
    max_candidates: int = 256
    knobs: Mapping[str, str] = field(default_factory=dict)  # limit name -> how a user raises it

    def raise_hint(self, name: str) -> str:
        knob = self.knobs.get(name)
        return f" (raise it with {knob})" if knob else ""


_ENV = {
    "max_requests": "SERVECAP_MAX_REQUESTS",
    "max_users": "SERVECAP_MAX_USERS",
    "max_simulated_s": "SERVECAP_MAX_SIMULATED_S",
    "max_replicas": "SERVECAP_MAX_REPLICAS",
    "max_replica_s": "SERVECAP_MAX_REPLICA_S",
    "max_layers": "SERVECAP_MAX_LAYERS",
    "max_sweep_points": "SERVECAP_MAX_SWEEP_POINTS",
    "max_candidates": "SERVECAP_MAX_CANDIDATES",
}
SERVE_FLAGS = {
    "max_requests": "servecap serve --max-requests",
    "max_users": "servecap serve --max-users",
    "max_simulated_s": "servecap serve --max-simulated-s",
    "max_replicas": "servecap serve --max-replicas",
    "max_replica_s": "servecap serve --max-replica-s",
    "max_layers": "servecap serve --max-layers",
    "max_candidates": "servecap serve --max-candidates",
}

API_LIMITS = WorkLimits(
    max_requests=200_000,
    max_users=100_000,
    max_simulated_s=86_400.0,
    max_replicas=4_096,
    max_replica_s=50_000_000.0,
    max_layers=1_000,
    max_sweep_points=1_000,
    max_candidates=32,
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


def _over(field_name: str, size: float, limit: float, what: str, limits: WorkLimits, name: str) -> None:
    if size > limit:
        shown: object = f"{size:,.0f}" if math.isfinite(size) else size
        raise ServecapError(field_name, shown, f"{what} exceeds the limit of {limit:,.0f}{limits.raise_hint(name)}")


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


def check_workload(spec: WorkloadSpec, limits: WorkLimits, *, where: str = "workload") -> None:
    """A single engine's run (``simulate``, one capacity evaluation): its requests, users and
    simulated seconds."""
    from servecap.workload import dist_mean

    if spec.duration_s is not None:
        _over(
            f"{where}.duration_s",
            spec.duration_s,
            limits.max_simulated_s,
            "the simulated time (s)",
            limits,
            "max_simulated_s",
        )
    if spec.users is not None:
        users = spec.users.count
        _over(f"{where}.users", users, limits.max_users, "the number of chat users", limits, "max_users")
        think = dist_mean(spec.users.think_time_s)
        n = closed_loop_requests(users, spec.duration_s, think, spec.num_requests)
        what = "users x duration_s / max(think_time_s, 1 s): the requests"
        _over(f"{where}.users", n, limits.max_requests, what, limits, "max_requests")
        return
    n_open = open_loop_requests(spec)
    if n_open is not None:
        what = "the requests" if spec.num_requests is not None else "rate x duration_s: the requests"
        field_name = f"{where}.num_requests" if spec.num_requests is not None else f"{where}.duration_s"
        _over(field_name, n_open, limits.max_requests, what, limits, "max_requests")


def check_layers(num_layers: int, limits: WorkLimits, *, where: str = "model.num_hidden_layers") -> None:
    """A model's layer count (the per-layer tables of a config are built from it)."""
    _over(where, num_layers, limits.max_layers, "the number of layers", limits, "max_layers")


def check_fleet_work(fleet: FleetFile, workload: WorkloadSpec, limits: WorkLimits) -> None:
    """``fleet simulate``: the workload's requests and users, the fleet's replicas (the most each
    pool may run: its autoscaler's max, else its count) and replicas x simulated seconds."""
    check_workload(workload, limits)
    replicas = 0
    for p in fleet.pools:
        most = p.replicas if p.replicas is not None else 1
        if p.autoscaler is not None:
            most = max(most, p.autoscaler.max_replicas)
        replicas += most
    _over("fleet.pools.replicas", replicas, limits.max_replicas, "the replicas of all pools", limits, "max_replicas")
    horizon = _horizon_s(workload)
    if horizon is not None:
        _over(
            "fleet.pools.replicas",
            replicas * horizon,
            limits.max_replica_s,
            "replicas x simulated seconds",
            limits,
            "max_replica_s",
        )


def _horizon_s(workload: WorkloadSpec) -> float | None:
    """The simulated seconds of a run: its duration, else its requests over its mean rate."""
    if workload.duration_s is not None:
        return workload.duration_s
    rate = getattr(workload.arrival, "rate_per_s", None)
    if workload.num_requests is not None and isinstance(rate, int | float) and rate > 0:
        return workload.num_requests / float(rate)
    return None


def check_fleet_plan_work(request: FleetPlanRequest, limits: WorkLimits) -> None:
    """``fleet plan``: its candidates, the replicas it may try, its peak window's requests."""
    n = len(request.candidates) + (1 if request.cheaper_gpu is not None else 0)
    _over("plan.candidates", n, limits.max_candidates, "the number of candidate pools", limits, "max_candidates")
    _over("plan.max_replicas", request.max_replicas, limits.max_replicas, "the replicas to try", limits, "max_replicas")
    _over(
        "plan.max_window_requests",
        request.max_window_requests,
        limits.max_requests,
        "the peak window's requests",
        limits,
        "max_requests",
    )
    traffic = request.traffic
    if traffic.peak_users is not None:
        _over(
            "plan.traffic.peak_users",
            traffic.peak_users,
            limits.max_users * 1_000,
            "the peak users (1,000 per allowed chat user of a simulation)",
            limits,
            "max_users",
        )
    if traffic.workload is not None and traffic.workload.users is not None:
        check_workload(traffic.workload, limits, where="plan.traffic.workload")


def check_sweep_points(axes: Mapping[str, int] | list[int], limits: WorkLimits, *, where: str = "sweep.axes") -> None:
    """A grid's points, as the product of its axes' lengths, before the grid is built."""
    sizes = list(axes.values()) if isinstance(axes, Mapping) else list(axes)
    points = math.prod(max(1, s) for s in sizes)
    _over(where, points, limits.max_sweep_points, "the grid's points", limits, "max_sweep_points")
