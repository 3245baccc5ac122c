"""The fleet use case: a fleet file (or flags) and a workload in, a fleet simulation out.

:func:`fleet_simulate` — :class:`FleetSimulateRequest` -> :class:`FleetSimulateResponse` (the
``--json`` output; the HTTP API returns the same model) and the full result. The fleet file's
schema and its building into a spec are :mod:`servecap.fleet.file_schema`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from servecap.app.flapping import PoolFlapping
from servecap.app.scale_event import ScaleEvent
from servecap.app.warm_up import SteadyWindow
from servecap.errors import ServecapError
from servecap.fleet import FleetResult, FleetSpec, simulate_fleet
from servecap.fleet.file_schema import FleetFile, build_fleet, fleet_from_dict
from servecap.fleet.pd.stats import PdStats
from servecap.fleet.predictive_floors import with_predictive_floors
from servecap.fleet.role_capacity import pool_capacities
from servecap.fleet.run_result import ReplicaStats
from servecap.json_object import JsonObject
from servecap.progress import ProgressFn
from servecap.results.summary_json import RunSummaryJson
from servecap.workload import WorkloadSpec, traffic_classes

if TYPE_CHECKING:
    from servecap.app.limits import WorkLimits


class _Model(BaseModel):
    """A request's model: unknown keys and non-finite numbers (NaN, infinity) refused."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class _Out(BaseModel):
    """A response's model (a computed figure may be infinite)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# above this many requests a run streams into sketches unless asked for exact percentiles
STREAM_ABOVE_REQUESTS = 1_000_000


class FleetSimulateRequest(_Model):
    fleet: FleetFile
    workload: WorkloadSpec
    seed: int = 0
    # "auto": exact up to STREAM_ABOVE_REQUESTS requests, sketches above; "exact": keep every
    # request; "sketch": stream into mergeable sketches (bounded memory) whatever the size
    percentiles: Literal["auto", "exact", "sketch"] = "auto"


class FleetSimulateInput(BaseModel):
    """``fleet simulate`` asked with its files inline: a fleet file and a workload file as
    mappings (the keys the YAML files take; docs/fleet.md, docs/workload.md) and a seed. The HTTP
    API's body is this model; :meth:`request` validates the files into a
    :class:`FleetSimulateRequest` (the first problem one error naming the field)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    fleet: JsonObject
    workload: JsonObject
    seed: int = Field(default=0, ge=0, le=2**32 - 1)

    def request(self) -> FleetSimulateRequest:
        from servecap.workload import workload_from_dict

        return FleetSimulateRequest(
            fleet=fleet_from_dict(self.fleet), workload=workload_from_dict(dict(self.workload)), seed=self.seed
        )


class ReplicaOut(_Out):
    """A replica's row: its :class:`~servecap.fleet.run_result.ReplicaStats` fields of the same
    names, read in one conversion (:meth:`of`), and its pool's service rate."""

    replica_id: int
    pool: str
    state: str
    requested_s: float
    ready_s: float | None
    stopped_s: float | None
    routed: int
    completed: int
    utilization: float  # share of its ready time with a request in flight ("busy", not load)
    prefix_cache_hit_rate: float | None
    billed_s: float
    load_req_s: float | None = None  # requests it completed per second of its ready time
    capacity_req_s: float | None = None  # its pool's service rate (planner: output tok/s / mean output)

    @classmethod
    def of(cls, stats: ReplicaStats, capacity_req_s: float | None) -> ReplicaOut:
        """The row of ``stats`` (its fields of the same names) with the pool's service rate."""
        fields = {k: getattr(stats, k) for k in cls.model_fields if k != "capacity_req_s"}
        return cls(**fields, capacity_req_s=capacity_req_s)


@with_config(ConfigDict(extra="forbid"))
class SloTargetOut(TypedDict):
    """One percentile target of one (tenant, class) group and how the run met it (a typed
    dictionary: the response's rows stay plain mappings)."""

    group: str
    target: str
    metric: str
    percentile: float
    max_s: float
    observed_s: float | None  # None: failed requests count as infinitely slow
    share_within: float
    requests: int
    met: bool


class FleetSimulateResponse(_Out):
    summary: RunSummaryJson
    by_tenant: dict[str, RunSummaryJson]
    by_class: dict[str, RunSummaryJson]
    outcomes: dict[str, int]
    replicas: list[ReplicaOut]
    timeseries: dict[str, list[float]]
    scale_events: list[ScaleEvent]  # app/monitor_replay.py passes them on
    horizon_s: float
    gpu_hours: float
    cost_usd: float
    usd_per_million_tokens: float | None
    usd_per_user: float | None
    retried: int
    seed: int
    notes: list[str]
    slo_by_class: list[SloTargetOut] = Field(default_factory=list)  # per (tenant, class) percentile targets
    gateway: GatewayOut | None = None  # with a gateway: section
    by_pool: dict[str, RunSummaryJson] = Field(default_factory=dict)  # a streaming run of several pools
    # per replica id: its busy share of each interval of the time series
    replica_utilization: dict[str, list[float]] = Field(default_factory=dict)
    records_path: str | None = None  # where every request's record went (--records)
    pd: PdStats | None = None  # a disaggregated fleet: per-role times, transfers, links
    # per autoscaled pool: scale events, their rate after settling, min<->max cycles (app/flapping.py)
    flapping: list[PoolFlapping] = Field(default_factory=list)
    # an autoscaled run: the requests after the ramp, beside the whole run (app/warm_up.py)
    steady: SteadyWindow | None = None


class GatewayOut(_Out):
    """The gateway's counts: one outcome per request (``outcomes_by_tenant``; their sum per
    tenant is its ``arrivals``), the decisions on the way, the external providers' share, and
    the latency summary of the requests a pool served (cache hits left out)."""

    arrivals_by_tenant: dict[str, int]
    outcomes_by_tenant: dict[str, dict[str, int]]
    decisions_by_tenant: dict[str, dict[str, int]]
    provider_requests: dict[str, int]
    provider_cost_usd: float
    served_summary: RunSummaryJson | None


def _gateway_out(res: FleetResult) -> GatewayOut | None:
    g = res.gateway
    if g is None:
        return None
    return GatewayOut(
        arrivals_by_tenant=dict(g.arrivals_by_tenant),
        outcomes_by_tenant={t: dict(c) for t, c in g.outcomes_by_tenant.items()},
        decisions_by_tenant={t: dict(c) for t, c in g.decisions_by_tenant.items()},
        provider_requests=dict(g.provider_requests),
        provider_cost_usd=g.provider_cost_usd,
        served_summary=None if res.served_summary is None else RunSummaryJson.of(res.served_summary),
    )


def response_from_result(
    res: FleetResult, seed: int, notes: list[str], capacity_by_pool: dict[str, float] | None = None
) -> FleetSimulateResponse:
    ts = res.timeseries
    caps = capacity_by_pool or {}
    return FleetSimulateResponse(
        gateway=_gateway_out(res),
        summary=RunSummaryJson.of(res.summary),
        by_tenant={k: RunSummaryJson.of(v) for k, v in res.by_tenant.items()},
        by_class={k: RunSummaryJson.of(v) for k, v in res.by_class.items()},
        by_pool={k: RunSummaryJson.of(v) for k, v in res.by_pool.items()},
        replica_utilization={str(i): list(u) for i, u in enumerate(ts.replica_utilization)},
        outcomes=dict(res.outcomes),
        replicas=[ReplicaOut.of(r, caps.get(r.pool)) for r in res.replicas],
        timeseries={
            "time_s": list(ts.time_s),
            "arrival_rate_req_s": list(ts.arrival_rate_req_s),
            "ready": [float(x) for x in ts.ready],
            "starting": [float(x) for x in ts.starting],
            "queue_depth": [float(x) for x in ts.queue_depth],
            "running": [float(x) for x in ts.running],
            "kv_usage": list(ts.kv_usage),
            "p99_ttft_s": list(ts.p99_ttft_s),
        },
        scale_events=[ScaleEvent({"time_s": t, "pool": p, "from": a, "to": b}) for t, p, a, b in res.scale_events],
        horizon_s=res.horizon_s,
        gpu_hours=res.gpu_hours,
        cost_usd=res.cost_usd,
        usd_per_million_tokens=res.usd_per_million_tokens,
        usd_per_user=res.usd_per_user,
        retried=res.retried,
        seed=seed,
        notes=notes,
        pd=res.pd,
    )


def expected_requests(workload: WorkloadSpec) -> int | None:
    """How many requests an open-loop workload will send (None: unknown)."""
    if workload.num_requests is not None:
        return workload.num_requests
    rate = getattr(workload.arrival, "rate_per_s", None)
    if rate is not None and workload.duration_s is not None:
        return int(rate * workload.duration_s)
    return None


def use_sketches(request: FleetSimulateRequest, spec: FleetSpec, notes: list[str]) -> bool:
    """Whether the run streams into sketches (see ``FleetSimulateRequest.percentiles``); notes why."""
    from servecap.fleet.simulate import stream_refusal

    wl = request.workload
    mode = request.percentiles
    if mode == "exact":
        return False
    refusal = stream_refusal(spec, wl)
    if refusal is None and any(c.slo_targets for c in traffic_classes(wl)):
        refusal = "the classes' percentile targets are checked on every request; run it exact"
    if mode == "sketch":
        if refusal is not None:
            raise ServecapError("percentiles", "sketch", refusal)
        return True
    n = expected_requests(wl)
    if refusal is not None or n is None or n <= STREAM_ABOVE_REQUESTS:
        return False
    notes.append(
        f"{n:,} requests (above {STREAM_ABOVE_REQUESTS:,}): percentiles from mergeable sketches in bounded "
        "memory, each within 1% of the exact value at its rank; --exact keeps every request"
    )
    return True


def with_flapping(response: FleetSimulateResponse, spec: FleetSpec) -> FleetSimulateResponse:
    """The response with the flapping detector's verdict per autoscaled pool, and its warning
    in the notes (app/flapping.py)."""
    from servecap.app.flapping import detect_flapping

    bounds = {p.name: (p.autoscaler.min_replicas, p.autoscaler.max_replicas) for p in spec.pools if p.autoscaler}
    if not bounds:
        return response
    verdicts = detect_flapping(response.scale_events, response.horizon_s, bounds)
    warnings = [v.warning for v in verdicts if v.warning]
    return response.model_copy(update={"flapping": verdicts, "notes": [*response.notes, *warnings]})


def fleet_simulate(
    request: FleetSimulateRequest,
    *,
    base_dir: Path | None = None,
    progress: ProgressFn | None = None,
    limits: WorkLimits | None = None,
    records: Path | None = None,
) -> tuple[FleetSimulateResponse, FleetResult]:
    """Build the fleet, simulate it under the workload, and shape the response; the work is
    sized against ``limits`` (default: the CLI's) first. ``records``: a Parquet file to stream
    every request's record to (the run then streams). Autoscaled pools get the flapping
    detector's verdict (:func:`with_flapping`)."""
    from servecap.app.warm_up import with_warm_up

    response, res, spec = _fleet_simulate(request, base_dir=base_dir, progress=progress, limits=limits, records=records)
    return with_warm_up(with_flapping(response, spec), res, spec), res


def _fleet_simulate(
    request: FleetSimulateRequest,
    *,
    base_dir: Path | None,
    progress: ProgressFn | None,
    limits: WorkLimits | None,
    records: Path | None,
) -> tuple[FleetSimulateResponse, FleetResult, FleetSpec]:
    from servecap.app.limits import check_fleet_work, cli_limits

    limits = limits if limits is not None else cli_limits()
    check_fleet_work(request.fleet, request.workload, limits.streamed())
    spec, notes = build_fleet(request.fleet, base_dir)
    spec = with_predictive_floors(spec, request.fleet, request.workload, notes)
    wl = request.workload
    caps = pool_capacities(request.fleet, wl, base_dir)  # every run's replica rows: load of capacity
    if records is not None and request.percentiles == "exact":
        raise ServecapError("records", str(records), "a records file comes with a streaming run, not --exact")
    if records is not None:  # raises where the run cannot stream
        stream = use_sketches(request.model_copy(update={"percentiles": "sketch"}), spec, notes)
    else:
        stream = use_sketches(request, spec, notes)
    check_fleet_work(request.fleet, request.workload, limits, streaming=stream)  # the exact path keeps every request
    if stream:
        res = simulate_fleet(spec, wl, request.seed, progress=progress, stream=True, records=records)
        response = response_from_result(res, request.seed, notes, caps)
        return response.model_copy(update={"records_path": None if records is None else str(records)}), res, spec
    if not any(c.slo_targets for c in traffic_classes(wl)):
        res = simulate_fleet(spec, wl, request.seed, progress=progress)
        return response_from_result(res, request.seed, notes, caps), res, spec
    # the classes' own percentile targets: draw the requests here (simulate_fleet draws the same
    # ones from the same seed) to know each one's class
    import numpy as np

    from servecap.fleet.class_slo import class_slo_report
    from servecap.workload import generate_arrays

    arrays = generate_arrays(wl, np.random.default_rng(request.seed))
    res = simulate_fleet(spec, arrays, request.seed, progress=progress)
    report = class_slo_report(res.columns, arrays, wl)
    response = response_from_result(res, request.seed, notes, caps)
    rows = [
        SloTargetOut(
            group=t.group,
            target=t.label(),
            metric=t.metric,
            percentile=t.percentile,
            max_s=t.max_s,
            observed_s=t.observed_s if np.isfinite(t.observed_s) else None,
            share_within=t.share_within,
            requests=g.requests,
            met=t.met,
        )
        for g in report
        for t in g.targets
    ]
    return response.model_copy(update={"slo_by_class": rows}), res, spec
