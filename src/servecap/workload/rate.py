"""The expected arrival rate of a whole workload (or one tenant) over time: the curve a
scheduled autoscaler scales ahead of, and the line under a plot of the simulated arrival rate."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.arrivals import diurnal_rate
from servecap.workload.schedule import rate_at
from servecap.workload.schedule_spec import ScheduleArrival
from servecap.workload.spec import Arrival, DiurnalArrival, TraceArrival, WorkloadSpec


def arrival_rate(arrival: Arrival, t_s: NDArray[np.float64]) -> NDArray[np.float64]:
    """The instantaneous rate (requests/s) of one arrival process at times ``t_s``."""
    t = np.asarray(t_s, dtype=np.float64)
    if isinstance(arrival, ScheduleArrival):
        return rate_at(arrival, t)
    if isinstance(arrival, DiurnalArrival):
        return diurnal_rate(arrival, t)
    if isinstance(arrival, AgenticArrival):
        # steady state: sessions x requests per session (turns, and each turn's sub-agent's turns)
        per_session = arrival.turns_mean * (1.0 + arrival.subagent_probability * arrival.subagent_turns_mean)
        return np.full_like(t, arrival.session_rate_per_s * per_session, dtype=np.float64)
    if isinstance(arrival, TraceArrival):
        raise ServecapError("workload.arrival.kind", arrival.kind, f"an {arrival.kind} arrival has no rate curve")
    return np.full_like(t, arrival.rate_per_s, dtype=np.float64)


def workload_rate(spec: WorkloadSpec, t_s: NDArray[np.float64], *, tenant: str | None = None) -> NDArray[np.float64]:
    """The expected arrival rate of ``spec`` (of one ``tenant`` when given) at times ``t_s``:
    the shared ``arrival`` split by the tenants' shares, plus each tenant's own arrival."""
    t = np.asarray(t_s, dtype=np.float64)
    if spec.users is not None:
        raise ServecapError("workload.users", spec.users.count, "a closed loop's rate follows the server, not a curve")
    if spec.tenants is None:
        if tenant is not None:
            raise ServecapError("tenant", tenant, "the workload has no tenants")
        assert spec.arrival is not None
        return arrival_rate(spec.arrival, t)
    names = [x.name for x in spec.tenants]
    if tenant is not None and tenant not in names:
        raise ServecapError("tenant", tenant, f"not a tenant of the workload ({', '.join(names)})")
    shared = [x for x in spec.tenants if x.arrival is None]
    total_share = sum(1.0 if x.share is None else x.share for x in shared)
    out = np.zeros_like(t, dtype=np.float64)
    for x in spec.tenants:
        if tenant is not None and x.name != tenant:
            continue
        if x.arrival is not None:
            out += arrival_rate(x.arrival, t)
        else:
            assert spec.arrival is not None
            out += (1.0 if x.share is None else x.share) / total_share * arrival_rate(spec.arrival, t)
    return out
