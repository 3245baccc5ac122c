"""``simulate_fleet(fleet, workload, seed) -> FleetResult``: a fleet under a workload, no I/O.

One run path for every layout and both percentile methods. The pieces are the single
replica's: a traffic source (:mod:`servecap.sim.traffic`), the one event loop
(:func:`servecap.sim.loop.run_loop`) and its observer; the server is the fleet core's layout the
spec describes (:func:`servecap.fleet.pools.make_fleet`), behind the gateway stage where there is
one. The outcomes go to one of two sinks (:mod:`servecap.fleet.sinks`): every record with exact
percentiles, or mergeable sketches in bounded memory. With one pool of one replica behind
``round-robin`` the records are those of :func:`servecap.sim.simulate` (a test pins it).

Money: every replica is billed ``gpus_per_replica x price_per_gpu_hour`` from the moment it is
requested until it stops (or the run ends): ``cost = Σ_replicas gpus x price x billed_h``, the
integral of the requested GPUs over time times the price (a test pins the two equal).
``$ per million tokens = cost / (prompt + output tokens of completed requests) x 1e6``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from servecap.errors import ServecapError
from servecap.fleet.gateway_stage import GatewayStage
from servecap.fleet.layouts import make_fleet
from servecap.fleet.pd.fleet import PdFleet
from servecap.fleet.pd.stats import pd_stats
from servecap.fleet.pools import Pools
from servecap.fleet.run_result import (
    FleetResult,
    FleetTimeSeries,
    Recorder,
    engine_figures,
    replica_figures,
    request_overhead_s,
)
from servecap.fleet.sinks import ExactSink, Outcomes, SketchSink, rolling_p99
from servecap.fleet.spec import FleetSpec
from servecap.fleet.stream_source import CHUNK_REQUESTS, chunked, draw_chunks, expected_horizon_s
from servecap.progress import ProgressFn
from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY
from servecap.sim.gc_pause import gc_paused
from servecap.sim.loop import run_loop
from servecap.sim.observer import Observer
from servecap.sim.traffic import ChunkedSource, ClosedLoopSource, OpenLoopSource, SessionSource, TrafficSource
from servecap.workload import ClosedLoopUsers, RequestArrays, WorkloadSpec, generate_arrays
from servecap.workload.generate import is_session_trace, session_graph

__all__ = ["requested_gpu_seconds", "rolling_p99", "simulate_fleet", "stream_refusal"]


def stream_refusal(fleet: FleetSpec, workload: WorkloadSpec | RequestArrays) -> str | None:
    """Why ``workload`` on ``fleet`` cannot run on the sketched path (None: it can)."""
    if fleet.gateway is not None:
        return "a gateway stage keeps every request's record; run it exact"
    if isinstance(workload, WorkloadSpec) and (workload.closed_loop or is_session_trace(workload)):
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
    (:class:`servecap.fleet.sinks.SketchSink`); ``records`` then also writes every request's
    record to that Parquet file. Without ``stream`` every request's record is kept (``columns``)
    and the percentiles are exact."""
    sketched = stream or records is not None
    if sketched:
        reason = stream_refusal(fleet, workload)
        if reason is not None:
            raise ServecapError("stream", True, reason)
    source, arrays, users, dt = _traffic(fleet, workload, seed, sketched)
    server = make_fleet(
        fleet, seed, ordered=isinstance(source, ClosedLoopSource), keep_ids=not sketched
    )  # a SessionSource is one
    stage = None if fleet.gateway is None else GatewayStage(server, fleet.gateway, seed)
    recorder = Recorder(server, stage)
    sink: ExactSink | SketchSink
    if isinstance(source, ChunkedSource):
        sink = SketchSink(fleet, server, source, records, relative_accuracy)
    else:
        sink = ExactSink(fleet, server, arrays)
    observer = Observer(
        sink.gauges(recorder),
        dt,
        progress=progress,
        expected_requests=source.expected_requests(),
        flush=sink if isinstance(sink, SketchSink) else None,
        flush_every=sink.flush_every,
    )
    recorder.observer = observer
    try:
        with gc_paused():
            run_loop(source, server if stage is None else stage, observer)
        outcomes = sink.outcomes(source, observer, recorder, stage)
    finally:
        if isinstance(sink, SketchSink):
            sink.close()
    result = _result(fleet, server, observer, recorder, outcomes, users, stage)
    if isinstance(sink, SketchSink) and sink.writer is not None and sink.writer.error is not None:
        # the records file failed (disk full, ...): the run stands, the caller reports the file
        result = dataclasses.replace(result, records_error=sink.writer.error)
    return result


def _traffic(
    fleet: FleetSpec, workload: WorkloadSpec | RequestArrays, seed: int, sketched: bool
) -> tuple[TrafficSource, RequestArrays | None, int, float]:
    """The run's traffic source, its drawn arrays (an open-loop exact run), its closed-loop users
    and the time series' sampling interval (400 samples over the arrivals by default)."""
    rng = np.random.default_rng(seed)
    if sketched:
        if isinstance(workload, WorkloadSpec):
            # generate_arrays' draw; draw_chunks' own stream beyond (see stream_source)
            chunks = ChunkedSource(draw_chunks(workload, rng, CHUNK_REQUESTS), workload.num_requests or 0)
            horizon = expected_horizon_s(workload)
        else:
            chunks = ChunkedSource(chunked(workload), len(workload))
            horizon = float(workload.arrival_s[-1]) if len(workload) else 0.0
        return chunks, None, 0, fleet.timeseries_interval_s or max(horizon or 3600.0, 1e-9) / 400
    source: TrafficSource
    arrays: RequestArrays | None = None
    users = 0
    graph = session_graph(workload) if isinstance(workload, WorkloadSpec) else None
    if graph is not None:
        # a sessions trace: each child request arrives its tool gap after its parents end
        sessions = SessionSource(graph, request_overhead_s(fleet))
        horizon = max(1.0, max(graph.arrival_s))
        return sessions, None, 0, fleet.timeseries_interval_s or max(horizon, 1e-9) / 400
    if isinstance(workload, WorkloadSpec):
        if workload.closed_loop:
            cl = ClosedLoopUsers(workload, rng)
            users = cl.num_users
            closed = ClosedLoopSource(cl, request_overhead_s(fleet))
            horizon = cl.spec.duration_s or max(1.0, 60.0 * cl.num_users)
            return closed, None, users, fleet.timeseries_interval_s or max(horizon, 1e-9) / 400
        arrays = generate_arrays(workload, rng)
        source = OpenLoopSource(arrays)
    elif isinstance(workload, RequestArrays):
        arrays = workload
        source = OpenLoopSource(workload)
    else:
        raise ServecapError("workload", type(workload).__name__, "a WorkloadSpec or drawn RequestArrays")
    horizon = source.arrival_s[-1] if source.arrival_s else 0.0
    return source, arrays, users, fleet.timeseries_interval_s or max(horizon, 1e-9) / 400


def _result(
    spec: FleetSpec,
    fleet: Pools,
    observer: Observer,
    recorder: Recorder,
    out: Outcomes,
    users: int,
    stage: GatewayStage | None,
) -> FleetResult:
    horizon = max(observer.t_last_s, max((r.stopped_s or 0.0 for r in fleet.replicas), default=0.0))
    summary = engine_figures(out.summary, fleet, observer)
    stats, cost, gpu_s = replica_figures(spec, fleet, horizon)
    gateway = None if stage is None else stage.stats()
    if gateway is not None:
        cost += gateway.provider_cost_usd
    ts = FleetTimeSeries(
        time_s=tuple(recorder.t),
        arrival_rate_req_s=tuple(recorder.rate),
        ready=tuple(recorder.ready),
        starting=tuple(recorder.starting),
        queue_depth=tuple(observer.ts_waiting),
        running=tuple(observer.ts_running),
        kv_usage=tuple(observer.ts_kv),
        p99_ttft_s=out.p99_ttft_s,
        replica_utilization=recorder.utilization(),
    )
    area = sum(r.area_s for r in fleet.replicas)
    tokens = out.tokens
    return FleetResult(
        summary=summary,
        columns=out.columns,
        replica_of=out.replica_of,
        replicas=tuple(stats),
        timeseries=ts,
        outcomes=out.outcomes,
        horizon_s=horizon,
        gpu_hours=gpu_s / 3600.0,
        cost_usd=cost,
        usd_per_million_tokens=cost / tokens * 1e6 if tokens else None,
        usd_per_user=cost / users if users else None,
        retried=fleet.retried,
        scale_events=tuple(fleet.scale_events),
        gpu_log=tuple(fleet.gpu_log),
        mean_in_system=area / horizon if horizon > 0 else 0.0,
        by_tenant=out.by_tenant,
        by_class=out.by_class,
        by_pool=out.by_pool,
        gateway=gateway,
        served_summary=out.served_summary,
        sketches=out.sketches,
        pd=pd_stats(fleet, horizon) if isinstance(fleet, PdFleet) else None,
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
