"""A fleet run in bounded memory: outcomes go into mergeable accumulators as requests finish.

``simulate_fleet(..., stream=True)`` comes here. The pieces are those of the exact run (the
fleet, the one event loop, the observer) with three changes that keep memory constant in the
number of requests:

- the traffic comes from a :class:`~servecap.sim.traffic.ChunkedSource` (a workload
  spec is drawn chunk by chunk);
- every :data:`FLUSH_REQUESTS` finished requests the observer hands its outcome columns to
  :class:`_Accumulator`, which joins them with the requests' arrival and lengths, charges the
  per-request overhead (as ``charge_request_overhead`` does), and folds them into
  :class:`~servecap.results.sketch_set.RunSketches` (the run, each class, tenant and pool, and
  TTFT per time window), optionally writing each row to a Parquet file
  (:class:`~servecap.results.parquet_records.ParquetRecordWriter`); the engines' token gaps are
  folded into the ITL sketch then, and at a sample of the gauges once they hold
  :data:`ITL_DRAIN_GAPS`, and their lists emptied;
- replicas keep no list of the requests they served.

Counters, token rates, goodput and SLO attainment are exact; percentiles are within the
sketches' relative error (``RunSummary.percentile_method`` is ``"sketch"``). The time series'
rolling p99 TTFT is read from the windows' sketches. Closed-loop users and gateway stages keep
every request (they need them) and run on the exact path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
from servecap.fleet.stream_source import CHUNK_REQUESTS, chunked, draw_chunks, expected_horizon_s
from servecap.progress import ProgressFn
from servecap.results import RecordColumns, RunSummary
from servecap.results.parquet_records import ParquetRecordWriter
from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY
from servecap.results.sketch_set import RunSketches
from servecap.results.stream import OutcomeBatch, latencies
from servecap.sim.gc_pause import gc_paused
from servecap.sim.loop import run_loop
from servecap.sim.observer import Observer
from servecap.sim.traffic import ChunkedSource
from servecap.workload import RequestArrays, WorkloadSpec

FLUSH_REQUESTS = 16_384  # finished requests per batch folded into the accumulators
TTFT_WINDOWS_PER_SPAN = 4  # TTFT sketch windows per rolling p99 span (ttft_window_s: 15 s of 60)
ITL_DRAIN_GAPS = 262_144  # engine token gaps held before a sample folds them in (~10 MB)


class _Accumulator:
    """The observer's flush: outcome columns -> sketches (and a Parquet file)."""

    def __init__(
        self,
        fleet: Pools,
        source: ChunkedSource,
        sketches: RunSketches,
        overhead_s: float,
        writer: ParquetRecordWriter | None,
    ) -> None:
        self.fleet = fleet
        self.source = source
        self.sketches = sketches
        self.overhead_s = overhead_s
        self.writer = writer
        self.pool_names = [p.name for p in fleet.spec.pools]
        self.error_names: list[str] = [""]  # error kinds by code (0: none)
        self.error_codes: dict[str, int] = {}

    def __call__(self, obs: Observer) -> None:
        ids_ok = np.asarray(obs.ids, dtype=np.int64)
        n_ok = len(ids_ok)
        err_items = list(obs.errors.items())
        ids = ids_ok if not err_items else np.concatenate([ids_ok, np.array([i for i, _ in err_items], np.int64)])
        n = len(ids)
        first = np.full(n, np.nan)
        end = np.full(n, np.nan)
        queue = np.full(n, np.nan)
        cached = np.zeros(n, dtype=np.int64)
        preempt = np.zeros(n, dtype=np.int64)
        if n_ok:
            first[:n_ok] = obs.first_token_s
            end[:n_ok] = obs.end_s
            queue[:n_ok] = obs.queue_time_s
            cached[:n_ok] = obs.cached_prompt_tokens
            preempt[:n_ok] = obs.preemptions
        error = np.zeros(n, dtype=np.int64)
        for j, (_, kind) in enumerate(err_items):
            code = self.error_codes.get(kind)
            if code is None:
                code = self.error_codes[kind] = len(self.error_names)
                self.error_names.append(kind)
            error[n_ok + j] = code
        obs.ids.clear()
        obs.first_token_s.clear()
        obs.end_s.clear()
        obs.queue_time_s.clear()
        obs.cached_prompt_tokens.clear()
        obs.preemptions.clear()
        obs.errors.clear()
        self.drain_itl()
        if n == 0:
            return
        if self.overhead_s:  # the replicas' API servers: every request that finished on one
            first[:n_ok] += self.overhead_s
            end[:n_ok] += self.overhead_s
        pos, rows = self.source.take(ids)
        order = np.argsort(pos, kind="stable")  # rows in the order of ``ids``
        pos, rows = pos[order], rows.take(order)
        batch = OutcomeBatch(
            rows.arrival_s,
            first[pos],
            end[pos],
            queue[pos],
            rows.prompt_tokens,
            rows.output_tokens,
            cached[pos],
            preempt[pos],
            error[pos],
            tuple(self.error_names),
        )
        ids = ids[pos]
        sk = self.sketches
        sk.total.add(batch)
        pool = self._pools(ids)
        for axis, codes, names in (
            ("class", rows.request_class, self.source.class_names),
            ("tenant", rows.tenant, self.source.tenant_names),
            ("pool", pool, self.pool_names if len(self.pool_names) > 1 else []),
        ):
            if not names:
                continue
            for code in np.unique(codes).tolist():
                if code >= 0:
                    sk.group(axis, names[code]).add(batch.take(np.flatnonzero(codes == code)))
        ttft, _, _ = latencies(batch)
        ok = batch.ok()
        win = np.floor(batch.first_token_s[ok] / sk.window_s).astype(np.int64)
        vals = ttft[ok]
        for k in np.unique(win).tolist():
            sk.window(k).add_array(vals[win == k])
        if self.writer is not None:
            self.writer.write(ids, batch, pool, rows.tenant, rows.request_class)

    def _pools(self, ids: np.ndarray) -> np.ndarray:
        pool_of = self.fleet.pool_of
        if pool_of is None:
            return np.zeros(len(ids), dtype=np.int64)
        return np.array([pool_of.pop(i, -1) for i in ids.tolist()], dtype=np.int64)

    def drain_itl(self, *, at_least: int = 0) -> None:
        """Fold the engines' token gaps into the ITL sketch, all replicas in one batch, and
        empty their lists — at every flush, and at a sample of the gauges once they hold
        ``at_least`` gaps (the lists grow with engine steps, not with requests)."""
        engines = [r.engine for r in self.fleet.replicas if r.engine.itl_durations]
        if not engines or sum(len(e.itl_durations) for e in engines) < at_least:
            return
        durations: list[float] = []
        weights: list[int] = []
        for e in engines:
            durations += e.itl_durations
            weights += e.itl_weights
            e.itl_durations.clear()
            e.itl_weights.clear()
        self.sketches.total.add_itl(durations, weights)


def simulate_fleet_streaming(
    fleet: FleetSpec,
    workload: WorkloadSpec | RequestArrays,
    seed: int,
    *,
    records: Path | None = None,
    relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY,
    progress: ProgressFn | None = None,
) -> FleetResult:
    """The streaming run of an open-loop workload (see the module doc)."""
    rng = np.random.default_rng(seed)
    if isinstance(workload, WorkloadSpec):
        # generate_arrays' draw; draw_chunks' own stream beyond (see stream_source)
        source = ChunkedSource(draw_chunks(workload, rng, CHUNK_REQUESTS), workload.num_requests or 0)
        horizon = expected_horizon_s(workload)
    else:
        source = ChunkedSource(chunked(workload), len(workload))
        horizon = float(workload.arrival_s[-1]) if len(workload) else 0.0
    server = make_fleet(fleet, seed, keep_ids=False)
    recorder = Recorder(server)
    dt = fleet.timeseries_interval_s or max(horizon or 3600.0, 1e-9) / 400
    # windows on a grid of the fleet's own (not the run's length): runs of one fleet merge
    window_s = fleet.ttft_window_s / TTFT_WINDOWS_PER_SPAN
    sketches = RunSketches(fleet.slo, window_s=window_s, relative_accuracy=relative_accuracy)
    writer = None
    if records is not None:
        pools = [p.name for p in fleet.pools]
        writer = ParquetRecordWriter(records, pools, source.tenant_names, source.class_names)
    acc = _Accumulator(server, source, sketches, request_overhead_s(fleet), writer)

    def gauges() -> tuple[float, int, int]:
        acc.drain_itl(at_least=ITL_DRAIN_GAPS)
        return recorder()

    observer = Observer(
        gauges,
        dt,
        progress=progress,
        expected_requests=source.expected_requests(),
        flush=acc,
        flush_every=FLUSH_REQUESTS,
    )
    recorder.observer = observer
    try:
        with gc_paused():
            run_loop(source, server, observer)
        acc(observer)
    finally:
        if writer is not None:
            writer.close()
    return _result(fleet, server, observer, recorder, sketches)


def _result(
    spec: FleetSpec, fleet: Pools, observer: Observer, recorder: Recorder, sketches: RunSketches
) -> FleetResult:
    horizon = max(observer.t_last_s, max((r.stopped_s or 0.0 for r in fleet.replicas), default=0.0))
    total = sketches.total
    summary = engine_figures(total.summary(observer.t_last_s), fleet, observer)
    stats, cost, gpu_s = replica_figures(spec, fleet, horizon)
    outcomes: dict[str, int] = {"ok": summary.completed, **total.errors}
    tokens = total.prompt_tokens_completed + total.output_tokens_completed
    p99 = [0.0 if q is None else q for q in sketches.rolling_quantiles(recorder.t, spec.ttft_window_s, 0.99)]
    ts = FleetTimeSeries(
        time_s=tuple(recorder.t),
        arrival_rate_req_s=tuple(recorder.rate),
        ready=tuple(recorder.ready),
        starting=tuple(recorder.starting),
        queue_depth=tuple(observer.ts_waiting),
        running=tuple(observer.ts_running),
        kv_usage=tuple(observer.ts_kv),
        p99_ttft_s=tuple(p99),
        replica_utilization=recorder.utilization(),
    )
    area = sum(r.area_s for r in fleet.replicas)
    dur = observer.t_last_s

    def by(axis: str) -> dict[str, RunSummary]:
        return {name: s.summary(dur) for name, s in sorted(sketches.groups[axis].items())}

    empty_i = np.zeros(0, dtype=np.int64)
    empty_f = np.zeros(0, dtype=np.float64)
    return FleetResult(
        summary=summary,
        columns=RecordColumns(empty_f, empty_f, empty_f, empty_i, empty_i, empty_i, empty_i, empty_f, ()),
        replica_of=(),
        replicas=tuple(stats),
        timeseries=ts,
        outcomes=outcomes,
        horizon_s=horizon,
        gpu_hours=gpu_s / 3600.0,
        cost_usd=cost,
        usd_per_million_tokens=cost / tokens * 1e6 if tokens else None,
        usd_per_user=None,
        retried=fleet.retried,
        scale_events=tuple(fleet.scale_events),
        gpu_log=tuple(fleet.gpu_log),
        mean_in_system=area / horizon if horizon > 0 else 0.0,
        by_tenant=by("tenant"),
        by_class=by("class"),
        by_pool=by("pool"),
        sketches=sketches,
        pd=pd_stats(fleet, horizon) if isinstance(fleet, PdFleet) else None,
    )
