"""A fleet file's predictive scale-ahead floors added to its pools' autoscaler schedules, from
the workload's rate curve (:func:`servecap.fleet.predictive.scale_ahead_schedule`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servecap.errors import ServecapError
from servecap.fleet.file_schema import FleetFile
from servecap.fleet.spec import FleetSpec
from servecap.workload import WorkloadSpec


def _rate_curve(workload: WorkloadSpec) -> Callable[[Any], Any] | None:
    """The workload's arrival rate as a function of time (None: not an open-loop rate)."""
    import numpy as np

    from servecap.workload import rate_at
    from servecap.workload.schedule_spec import ScheduleArrival
    from servecap.workload.spec import PoissonArrival

    arrival = workload.arrival
    if isinstance(arrival, ScheduleArrival):
        return lambda t: rate_at(arrival, t)
    if isinstance(arrival, PoissonArrival):
        const = arrival.rate_per_s
        return lambda t: np.full(len(t), const)
    return None


def with_predictive_floors(spec: FleetSpec, f: FleetFile, workload: WorkloadSpec, notes: list[str]) -> FleetSpec:
    """Add each pool's predictive scale-ahead floors (from the workload's rate curve) to its
    autoscaler's schedule."""
    import dataclasses

    from servecap.fleet.predictive import scale_ahead_schedule

    pools = list(spec.pools)
    for i, p in enumerate(f.pools):
        a = p.autoscaler
        if a is None or a.predictive is None:
            continue
        rate = _rate_curve(workload)
        if rate is None:
            raise ServecapError(
                f"pools.{p.name}.autoscaler.predictive", "{...}", "needs an open-loop poisson or schedule arrival"
            )
        pool = pools[i]
        assert pool.autoscaler is not None
        cs = pool.cold_start
        lead = a.predictive.lead_s
        if lead is None:
            load = pool.weights_bytes / cs.load_bandwidth_bytes_s if cs.load_bandwidth_bytes_s != float("inf") else 0.0
            lead = load + sum(ph.mean_s for _, ph in cs.phases())
        horizon = workload.duration_s or 86400.0
        floors = scale_ahead_schedule(
            rate,
            req_s_per_replica=a.predictive.req_s_per_replica,
            lead_s=lead,
            horizon_s=horizon,
            step_s=a.predictive.step_s,
            headroom=a.predictive.headroom,
        )
        cap = pool.autoscaler.max_replicas
        entries = tuple(sorted({*pool.autoscaler.schedule, *((t, min(n, cap)) for t, n in floors)}))
        pools[i] = dataclasses.replace(pool, autoscaler=dataclasses.replace(pool.autoscaler, schedule=entries))
        notes.append(f"{p.name}: predictive scale-ahead {lead:.0f} s early, {len(floors)} floor changes")
    return dataclasses.replace(spec, pools=tuple(pools))
