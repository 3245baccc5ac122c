"""The fleet run's two outcome sinks (:func:`servecap.fleet.simulate.simulate_fleet` runs one
path and hands the outcomes to one of them); the percentile method is the only difference in
what they report.

- :class:`ExactSink` keeps every request's record (columns, in request-id order) and reads
  exact percentiles off them (:func:`~servecap.results.summary.summarize_columns`).
- :class:`SketchSink` keeps memory constant in the number of requests: every
  :data:`FLUSH_REQUESTS` finished requests the observer hands it its outcome columns; it joins
  them with the requests' arrival and lengths (the source is a
  :class:`~servecap.sim.traffic.ChunkedSource`: a workload spec drawn chunk by chunk), charges
  the per-request overhead (as ``charge_request_overhead`` does), and folds them into
  :class:`~servecap.results.sketch_set.RunSketches` (the run, each class, tenant and pool, and
  TTFT per time window), optionally writing each row to a Parquet file
  (:class:`~servecap.results.parquet_records.ParquetRecordWriter`); the engines' token gaps are
  folded into the ITL sketch then, and at a sample of the gauges once they hold
  :data:`ITL_DRAIN_GAPS`, and their lists emptied; replicas keep no list of the requests they
  served. Counters, token rates, goodput and SLO attainment are exact; percentiles are within
  the sketches' relative error (``RunSummary.percentile_method`` is ``"sketch"``); the time
  series' rolling p99 TTFT is read from the windows' sketches. Closed-loop users and gateway
  stages keep every request (they need them) and run exact.

Both sinks read the latencies with the same formulas (:func:`~servecap.results.summary.latencies`,
:func:`~servecap.results.summary.meets_slo`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from servecap.fleet.gateway_stage import GatewayStage
from servecap.fleet.pools import Pools
from servecap.fleet.run_result import Recorder, request_overhead_s
from servecap.fleet.spec import FleetSpec
from servecap.results import RecordColumns, RunSummary, summarize_columns, weighted_percentiles
from servecap.results.parquet_records import ParquetRecordWriter
from servecap.results.sketch_set import RunSketches
from servecap.results.summary import latencies
from servecap.sim.observer import Observer
from servecap.sim.simulate import charge_request_overhead, record_columns
from servecap.sim.traffic import ChunkedSource, TrafficSource
from servecap.workload import RequestArrays

FLUSH_REQUESTS = 16_384  # finished requests per batch folded into the accumulators
TTFT_WINDOWS_PER_SPAN = 4  # TTFT sketch windows per rolling p99 span (ttft_window_s: 15 s of 60)
ITL_DRAIN_GAPS = 262_144  # engine token gaps held before a sample folds them in (~10 MB)


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What a sink reports of a run's requests (the rest of a fleet result is the fleet's)."""

    summary: RunSummary  # before the engines' own figures
    columns: RecordColumns  # every request's (the exact sink), or none
    replica_of: tuple[int, ...]
    p99_ttft_s: tuple[float, ...]  # rolling, at the recorder's sample times
    outcomes: dict[str, int]
    tokens: int  # prompt + output tokens of the completed requests
    by_tenant: dict[str, RunSummary]
    by_class: dict[str, RunSummary]
    by_pool: dict[str, RunSummary]
    sketches: RunSketches | None = None
    served_summary: RunSummary | None = None


class ExactSink:
    """The exact run's sink: every request's record, exact percentiles."""

    flush_every = 0

    def __init__(self, spec: FleetSpec, fleet: Pools, arrays: RequestArrays | None) -> None:
        self.spec = spec
        self.fleet = fleet
        self.arrays = arrays

    def gauges(self, recorder: Recorder) -> Recorder:
        return recorder

    def outcomes(
        self, source: TrafficSource, observer: Observer, recorder: Recorder, stage: GatewayStage | None
    ) -> Outcomes:
        spec, fleet = self.spec, self.fleet
        cols = record_columns(source, observer)
        n = len(cols)
        # the replicas' API servers charge the requests they serve; answers from the gateway's
        # cache or an external provider do not pass through them
        on_replica = np.zeros(n, dtype=bool)
        for r in fleet.replicas:
            on_replica[r.served_ids] = True
        charge_request_overhead(cols, request_overhead_s(spec), on_replica)
        durs: list[float] = []
        weights: list[int] = []
        for r in fleet.replicas:
            durs.extend(r.engine.itl_durations)
            weights.extend(r.engine.itl_weights)
        itl = weighted_percentiles(durs, weights)
        dur = observer.t_last_s
        summary = summarize_columns(cols, duration_s=dur, slo=spec.slo, itl=itl)
        replica_of = [-1] * n
        for r in fleet.replicas:
            for rid in r.served_ids:
                replica_of[rid] = r.replica_id
        outcomes: dict[str, int] = {"ok": summary.completed}
        for e in cols.errors:
            if e is not None:
                outcomes[e] = outcomes.get(e, 0) + 1
        end = cols.end_s
        tokens = int(cols.prompt_tokens[np.isfinite(end)].sum() + cols.output_tokens[np.isfinite(end)].sum())
        first = cols.first_token_s
        p99 = rolling_p99(first - cols.arrival_s, first, recorder.t, spec.ttft_window_s)
        by_tenant: dict[str, RunSummary] = {}
        by_class: dict[str, RunSummary] = {}
        arrays = self.arrays
        if arrays is not None:
            for codes, names, into in (
                (arrays.tenant, arrays.tenant_names, by_tenant),
                (arrays.request_class, arrays.class_names, by_class),
            ):
                for code, name in enumerate(names):
                    idx = np.flatnonzero(codes == code)
                    if len(idx):
                        into[name] = summarize_columns(cols.take(idx), duration_s=dur, slo=spec.slo)
        served = None
        if stage is not None:
            ids = np.array(sorted(stage.served_ids), dtype=np.int64)
            # cache hits answer in the cache's latency and would hide the pools' own TTFT
            served = summarize_columns(cols.take(ids), duration_s=dur, slo=spec.slo)
        return Outcomes(
            summary=summary,
            columns=cols,
            replica_of=tuple(replica_of),
            p99_ttft_s=p99,
            outcomes=outcomes,
            tokens=tokens,
            by_tenant=by_tenant,
            by_class=by_class,
            by_pool={},
            served_summary=served,
        )


class SketchSink:
    """The sketched run's sink: the observer's flush folds outcome columns into sketches (and
    a Parquet file) as requests finish; :meth:`outcomes` reads the run's figures off them."""

    def __init__(
        self, spec: FleetSpec, fleet: Pools, source: ChunkedSource, records: Path | None, relative_accuracy: float
    ) -> None:
        self.fleet = fleet
        self.source = source
        # windows on a grid of the fleet's own (not the run's length): runs of one fleet merge
        window_s = spec.ttft_window_s / TTFT_WINDOWS_PER_SPAN
        self.sketches = RunSketches(spec.slo, window_s=window_s, relative_accuracy=relative_accuracy)
        self.overhead_s = request_overhead_s(spec)
        self.writer = None
        if records is not None:
            pools = [p.name for p in spec.pools]
            self.writer = ParquetRecordWriter(records, pools, source.tenant_names, source.class_names)
        self.pool_names = [p.name for p in fleet.spec.pools]

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
        errors: list[str | None] = [None] * n_ok + [kind for _, kind in err_items]
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
        batch = RecordColumns(
            rows.arrival_s,
            first[pos],
            end[pos],
            rows.prompt_tokens,
            rows.output_tokens,
            cached[pos],
            preempt[pos],
            queue[pos],
            (None,) * n if not err_items else tuple(errors[i] for i in pos.tolist()),
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

    flush_every = FLUSH_REQUESTS

    def gauges(self, recorder: Recorder) -> Callable[[], tuple[float, int, int]]:
        def sample() -> tuple[float, int, int]:
            self.drain_itl(at_least=ITL_DRAIN_GAPS)
            return recorder()

        return sample

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def outcomes(
        self, source: TrafficSource, observer: Observer, recorder: Recorder, stage: GatewayStage | None
    ) -> Outcomes:
        self(observer)  # the last batch
        sketches = self.sketches
        total = sketches.total
        dur = observer.t_last_s
        p99 = [
            0.0 if q is None else q for q in sketches.rolling_quantiles(recorder.t, self.fleet.spec.ttft_window_s, 0.99)
        ]

        def by(axis: str) -> dict[str, RunSummary]:
            return {name: s.summary(dur) for name, s in sorted(sketches.groups[axis].items())}

        empty_i = np.zeros(0, dtype=np.int64)
        empty_f = np.zeros(0, dtype=np.float64)
        return Outcomes(
            summary=total.summary(dur),
            columns=RecordColumns(empty_f, empty_f, empty_f, empty_i, empty_i, empty_i, empty_i, empty_f, ()),
            replica_of=(),
            p99_ttft_s=tuple(p99),
            outcomes={"ok": total.completed, **total.errors},
            tokens=total.prompt_tokens_completed + total.output_tokens_completed,
            by_tenant=by("tenant"),
            by_class=by("class"),
            by_pool=by("pool"),
            sketches=sketches,
        )


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
