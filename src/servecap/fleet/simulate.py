"""``simulate_fleet(fleet, workload, seed) -> FleetResult``: a fleet under a workload, no I/O.

The pieces are the single replica's: a traffic source (:mod:`servecap.sim.traffic`), the one
event loop (:func:`servecap.sim.loop.run_loop`) and its observer; the server is a
:class:`~servecap.fleet.fleet.Fleet`. With one pool of one replica behind ``round-robin`` the
records are those of :func:`servecap.sim.simulate` (a test pins it).

Money: every replica is billed ``gpus_per_replica x price_per_gpu_hour`` from the moment it is
requested until it stops (or the run ends): ``cost = Σ_replicas gpus x price x billed_h``, the
integral of the requested GPUs over time times the price (a test pins the two equal).
``$ per million tokens = cost / (prompt + output tokens of completed requests) x 1e6``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from servecap.errors import ServecapError
from servecap.fleet.gateway_outcomes import GatewayStats
from servecap.fleet.gateway_stage import GatewayStage
from servecap.fleet.pd.fleet import PdFleet
from servecap.fleet.pd.stats import pd_stats
from servecap.fleet.pools import Pools, make_fleet
from servecap.fleet.run_result import (
    FleetResult,
    FleetTimeSeries,
    Recorder,
    engine_figures,
    replica_figures,
    request_overhead_s,
)
from servecap.fleet.spec import FleetSpec
from servecap.progress import ProgressFn
from servecap.results import (
    RecordColumns,
    RunSummary,
    summarize_columns,
    weighted_percentiles,
)
from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY
from servecap.sim.gc_pause import gc_paused
from servecap.sim.loop import run_loop
from servecap.sim.observer import Observer
from servecap.sim.simulate import charge_request_overhead, record_columns
from servecap.sim.traffic import ClosedLoopSource, OpenLoopSource, TrafficSource
from servecap.workload import ClosedLoopUsers, RequestArrays, WorkloadSpec, generate_arrays


def stream_refusal(fleet: FleetSpec, workload: WorkloadSpec | RequestArrays) -> str | None:
    """Why ``workload`` on ``fleet`` cannot run on the streaming path (None: it can)."""
    if fleet.gateway is not None:
        return "a gateway stage keeps every request's record; run it exact"
    if isinstance(workload, WorkloadSpec) and workload.closed_loop:
        return "closed-loop users keep every turn; run them exact"
    return None


def simulate_fleet(
    fleet: FleetSpec,
    workload: WorkloadSpec | RequestArrays,
    seed: int,
    *,
    progress: ProgressFn | None = None,
    stream: bool = False,
    records: Path | None = None,
    relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY,
) -> FleetResult:
    """Simulate ``fleet`` serving ``workload`` (drawn with ``seed``) until every request ended.

    ``stream`` (an open-loop workload, no gateway stage): outcomes go into mergeable sketches of
    ``relative_accuracy`` as requests finish, in memory independent of the number of requests
    (:mod:`servecap.fleet.stream_run`); ``records`` then also writes every request's record to
    that Parquet file. Without ``stream`` every request's record is kept (``columns``) and the
    percentiles are exact."""
    if stream or records is not None:
        reason = stream_refusal(fleet, workload)
        if reason is not None:
            raise ServecapError("stream", True, reason)
        from servecap.fleet.stream_run import simulate_fleet_streaming

        return simulate_fleet_streaming(
            fleet, workload, seed, records=records, relative_accuracy=relative_accuracy, progress=progress
        )
    source: TrafficSource
    arrays: RequestArrays | None = None
    users = 0
    rng = np.random.default_rng(seed)
    if isinstance(workload, WorkloadSpec):
        if workload.closed_loop:
            cl = ClosedLoopUsers(workload, rng)
            users = cl.num_users
            source = ClosedLoopSource(cl, request_overhead_s(fleet))
            horizon = cl.spec.duration_s or max(1.0, 60.0 * cl.num_users)
        else:
            arrays = generate_arrays(workload, rng)
            source = OpenLoopSource(arrays)
    elif isinstance(workload, RequestArrays):
        arrays = workload
        source = OpenLoopSource(workload)
    else:
        raise ServecapError("workload", type(workload).__name__, "a WorkloadSpec or drawn RequestArrays")
    if isinstance(source, OpenLoopSource):
        horizon = source.arrival_s[-1] if source.arrival_s else 0.0
    ordered = isinstance(source, ClosedLoopSource)
    server = make_fleet(fleet, seed, ordered=ordered)
    stage = None
    if fleet.gateway is not None:
        stage = GatewayStage(server, fleet.gateway, seed)
    recorder = Recorder(server, stage)
    dt = fleet.timeseries_interval_s or max(horizon, 1e-9) / 400
    observer = Observer(recorder, dt, progress=progress, expected_requests=source.expected_requests())
    recorder.observer = observer
    with gc_paused():
        run_loop(source, server if stage is None else stage, observer)
    return _result(fleet, server, source, observer, recorder, users, arrays, stage)


def _result(
    spec: FleetSpec,
    fleet: Pools,
    source: TrafficSource,
    observer: Observer,
    recorder: Recorder,
    users: int,
    arrays: RequestArrays | None,
    stage: GatewayStage | None = None,
) -> FleetResult:
    cols = record_columns(source, observer)
    n = len(cols)
    arrival, first, end = cols.arrival_s, cols.first_token_s, cols.end_s
    # the replicas' API servers charge the requests they serve; answers from the gateway's
    # cache or an external provider do not pass through them
    on_replica = np.zeros(n, dtype=bool)
    for r in fleet.replicas:
        on_replica[r.served_ids] = True
    charge_request_overhead(cols, request_overhead_s(spec), on_replica)
    prompt, output = cols.prompt_tokens, cols.output_tokens
    horizon = max(observer.t_last_s, max((r.stopped_s or 0.0 for r in fleet.replicas), default=0.0))
    durs: list[float] = []
    weights: list[int] = []
    for r in fleet.replicas:
        durs.extend(r.engine.itl_durations)
        weights.extend(r.engine.itl_weights)
    itl = weighted_percentiles(durs, weights)
    summary = summarize_columns(cols, duration_s=observer.t_last_s, slo=spec.slo, itl=itl)
    summary = engine_figures(summary, fleet, observer)
    stats, cost, gpu_s = replica_figures(spec, fleet, horizon)
    replica_of = [-1] * n
    for r in fleet.replicas:
        for rid in r.served_ids:
            replica_of[rid] = r.replica_id
    gateway = None if stage is None else stage.stats()
    if gateway is not None:
        cost += gateway.provider_cost_usd
    outcomes: dict[str, int] = {"ok": summary.completed}
    for e in cols.errors:
        if e is not None:
            outcomes[e] = outcomes.get(e, 0) + 1
    tokens = int(prompt[np.isfinite(end)].sum() + output[np.isfinite(end)].sum())
    ts = FleetTimeSeries(
        time_s=tuple(recorder.t),
        arrival_rate_req_s=tuple(recorder.rate),
        ready=tuple(recorder.ready),
        starting=tuple(recorder.starting),
        queue_depth=tuple(observer.ts_waiting),
        running=tuple(observer.ts_running),
        kv_usage=tuple(observer.ts_kv),
        p99_ttft_s=rolling_p99(first - arrival, first, recorder.t, spec.ttft_window_s),
        replica_utilization=recorder.utilization(),
    )
    area = sum(r.area_s for r in fleet.replicas)
    by_tenant: dict[str, RunSummary] = {}
    by_class: dict[str, RunSummary] = {}
    if arrays is not None:
        for codes, names, into in (
            (arrays.tenant, arrays.tenant_names, by_tenant),
            (arrays.request_class, arrays.class_names, by_class),
        ):
            for code, name in enumerate(names):
                idx = np.flatnonzero(codes == code)
                if len(idx):
                    into[name] = summarize_columns(_take(cols, idx), duration_s=observer.t_last_s, slo=spec.slo)
    return FleetResult(
        summary=summary,
        columns=cols,
        replica_of=tuple(replica_of),
        replicas=tuple(stats),
        timeseries=ts,
        outcomes=outcomes,
        horizon_s=horizon,
        gpu_hours=gpu_s / 3600.0,
        cost_usd=cost,
        usd_per_million_tokens=cost / tokens * 1e6 if tokens else None,
        usd_per_user=cost / users if users else None,
        retried=fleet.retried,
        scale_events=tuple(fleet.scale_events),
        gpu_log=tuple(fleet.gpu_log),
        mean_in_system=area / horizon if horizon > 0 else 0.0,
        by_tenant=by_tenant,
        by_class=by_class,
        gateway=gateway,
        served_summary=None if gateway is None else _served_summary(cols, gateway, observer.t_last_s, spec),
        pd=pd_stats(fleet, horizon) if isinstance(fleet, PdFleet) else None,
    )


def _served_summary(cols: RecordColumns, gateway: GatewayStats, duration_s: float, spec: FleetSpec) -> RunSummary:
    """The latency summary of the requests a replica or a provider served: cache hits answer
    in the cache's latency and would hide the pools' own TTFT, so they are reported apart."""
    idx = np.array(sorted(gateway.served_ids), dtype=np.int64)
    return summarize_columns(_take(cols, idx), duration_s=duration_s, slo=spec.slo)


def _take(c: RecordColumns, idx: np.ndarray) -> RecordColumns:
    return RecordColumns(
        c.arrival_s[idx],
        c.first_token_s[idx],
        c.end_s[idx],
        c.prompt_tokens[idx],
        c.output_tokens[idx],
        c.cached_prompt_tokens[idx],
        c.preemptions[idx],
        c.queue_time_s[idx],
        tuple(c.errors[i] for i in idx.tolist()),
    )


def requested_gpu_seconds(gpu_log: Sequence[tuple[float, int]], horizon_s: float) -> float:
    """∫ requested GPUs dt over ``[0, horizon_s]`` from the log of changes."""
    total = 0.0
    level = 0
    t_prev = 0.0
    for t, d in sorted(gpu_log, key=lambda x: x[0]):
        total += level * (t - t_prev)
        level += d
        t_prev = t
    return total + level * (horizon_s - t_prev)


def rolling_p99(
    ttft_s: np.ndarray, first_token_s: np.ndarray, times_s: Sequence[float], window_s: float
) -> tuple[float, ...]:
    """At each time t, the p99 TTFT of the requests whose first token came in ``(t - window_s, t]``
    (0 when none did)."""
    ok = np.isfinite(first_token_s)
    order = np.argsort(first_token_s[ok], kind="stable")
    ft = first_token_s[ok][order]
    vals = ttft_s[ok][order]
    out = []
    for t in times_s:
        lo = int(np.searchsorted(ft, t - window_s, side="right"))
        hi = int(np.searchsorted(ft, t, side="right"))
        out.append(float(np.percentile(vals[lo:hi], 99)) if hi > lo else 0.0)
    return tuple(out)
