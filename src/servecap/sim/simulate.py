"""The discrete-event simulation of one replica under a workload: ``simulate()`` returns a value.

It composes the pieces of :mod:`servecap.sim`: a traffic source (:mod:`~servecap.sim.traffic`:
the drawn open-loop stream, or closed-loop users), one engine behind the server seam
(:class:`~servecap.sim.engine_server.EngineServer`), an observer (:mod:`~servecap.sim.observer`)
and the event loop (:func:`~servecap.sim.loop.run_loop`), then turns what the observer and the
engine recorded into a :class:`SimResult`. The engine starts a step at time ``t`` only after
every request arriving at ``t`` was added, so requests arriving at the very instant a step ends
are seen by the next step (pinned by a test). No I/O, no global state; randomness comes from
the generator passed in (it only draws the workload).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from servecap.errors import ServecapError
from servecap.progress import ProgressFn
from servecap.results import (
    RecordColumns,
    RequestRecord,
    RunSummary,
    Slo,
    TimeSeries,
    records_from_columns,
    summarize_columns,
    weighted_percentiles,
)
from servecap.sim.engine import Engine, EngineStats
from servecap.sim.engine_server import EngineServer
from servecap.sim.gc_pause import gc_paused
from servecap.sim.loop import run_loop
from servecap.sim.observer import Observer
from servecap.sim.setup import EngineSetup
from servecap.sim.traffic import ClosedLoopSource, OpenLoopSource, SessionSource, TrafficSource
from servecap.workload import (
    ClosedLoopUsers,
    RequestArrays,
    RequestSpec,
    WorkloadSpec,
    generate_arrays,
)
from servecap.workload.generate import session_graph


@dataclass(frozen=True, slots=True)
class SimResult:
    summary: RunSummary
    columns: RecordColumns
    engine: EngineStats
    horizon_s: float  # time of the last event (the run drains: every admitted request ends)
    steps: int  # engine iterations
    events: int  # arrivals (turns included) plus engine steps
    decode_runs: int  # runs of decode-only steps advanced in one iteration of the server
    decode_run_steps: int
    mean_in_system: float  # time-average of requests in the system (waiting + running)
    mean_running: float
    mean_waiting: float
    admitted: int
    user_ids: tuple[int | None, ...] | None = None
    turns: tuple[int, ...] | None = None
    token_times_s: tuple[tuple[float, ...], ...] | None = None
    notes: tuple[str, ...] = ()

    def records(self) -> list[RequestRecord]:
        """Per-request records (the shared results schema)."""
        return records_from_columns(
            self.columns, user_ids=self.user_ids, turns=self.turns, token_times_s=self.token_times_s
        )


def simulate(
    setup: EngineSetup,
    workload: WorkloadSpec | RequestArrays | Sequence[RequestSpec],
    rng: np.random.Generator | None = None,
    *,
    slo: Slo | None = None,
    fast_forward: bool = True,
    exact_step_time: bool = False,
    record_token_times: bool = False,
    timeseries_points: int = 400,
    check_invariants: bool = False,
    progress: ProgressFn | None = None,
) -> SimResult:
    """Simulate one replica serving ``workload`` until every request has finished.

    ``workload`` is a spec (drawn with ``rng``), or an already drawn open-loop stream.
    ``fast_forward`` (default) lets the server advance runs of decode-only steps with an
    unchanging batch in one iteration (``Engine.advance_decode_run``); ``False`` takes every
    step one at a time — identical results either way. ``exact_step_time`` calls the roofline's
    ``step_time`` for every step instead of its affine read-off; ``check_invariants`` checks
    block conservation after every step (slow). ``progress`` gets a
    :class:`~servecap.progress.Progress` now and then (stage ``"simulate"``, unit requests).
    """
    source: TrafficSource
    if isinstance(workload, WorkloadSpec):
        if rng is None:
            raise ServecapError("rng", None, "a workload spec needs a random generator (seed)")
        graph = session_graph(workload)
        if graph is not None:
            source = SessionSource(graph, setup.efficiency.request_overhead_s)
            horizon = max(1.0, max(graph.arrival_s))
        elif workload.closed_loop:
            users = ClosedLoopUsers(workload, rng)
            source = ClosedLoopSource(users, setup.efficiency.request_overhead_s)
            horizon = users.spec.duration_s or max(1.0, 60.0 * users.num_users)
        else:
            source = OpenLoopSource(generate_arrays(workload, rng))
    elif isinstance(workload, RequestArrays):
        source = OpenLoopSource(workload)
    else:
        source = OpenLoopSource(_arrays_from_specs(list(workload)))
    if isinstance(source, OpenLoopSource):
        horizon = source.arrival_s[-1] if source.arrival_s else 0.0
    spec_rng = None
    if setup.spec_acceptance:  # accepted tokens drawn from their own stream, seeded from rng
        spec_rng = np.random.default_rng(int(rng.integers(1 << 62)) if rng is not None else 0)
    engine = Engine(
        setup,
        keep_finished=record_token_times,  # the token times are read off the finished requests
        record_token_times=record_token_times,
        exact_step_time=exact_step_time,
        spec_rng=spec_rng,
    )
    server = EngineServer(
        engine, decode_runs=fast_forward, check_invariants=check_invariants, stop_at_finishes=source.closed_loop
    )
    observer = Observer(
        engine_gauges(engine),
        max(horizon, 1e-9) / max(1, timeseries_points),
        progress=progress,
        expected_requests=source.expected_requests(),
    )
    with gc_paused():
        run_loop(source, server, observer)
    return sim_result(setup, engine, source, observer, slo, server.num_decode_runs, server.num_decode_run_steps)


def engine_gauges(engine: Engine) -> Callable[[], tuple[float, int, int]]:
    """The observer's gauges of one engine: (KV blocks used / total, waiting, running)."""

    def gauges() -> tuple[float, int, int]:
        return engine.pool.used / engine.pool.total, engine.num_waiting, engine.num_running

    return gauges


def record_columns(source: TrafficSource, observer: Observer) -> RecordColumns:
    """Every issued request's record as columns, in request-id order: what the source issued
    (arrival, prompt and output tokens) and what the observer saw finish (first token, end,
    queue time, cached tokens, preemptions, error); NaN where a request never got that far.
    One engine's run and a fleet's are assembled the same way."""
    if isinstance(source, ClosedLoopSource):
        specs = source.issued
        arrival = np.array([s.arrival_s for s in specs], dtype=np.float64)
        prompt = np.array([s.prompt_tokens for s in specs], dtype=np.int64)
        output = np.array([s.output_tokens for s in specs], dtype=np.int64)
    else:
        assert isinstance(source, OpenLoopSource)
        arrival = np.asarray(source.arrival_s, dtype=np.float64)
        prompt = np.asarray(source.prompt_tokens, dtype=np.int64)
        output = np.asarray(source.output_tokens, dtype=np.int64)
    n = len(arrival)
    first = np.full(n, np.nan)
    end = np.full(n, np.nan)
    queue = np.full(n, np.nan)
    cached = np.zeros(n, dtype=np.int64)
    preempt = np.zeros(n, dtype=np.int64)
    if observer.ids:
        ids = np.asarray(observer.ids, dtype=np.int64)
        first[ids] = np.asarray(observer.first_token_s, dtype=np.float64)
        end[ids] = np.asarray(observer.end_s, dtype=np.float64)
        queue[ids] = np.asarray(observer.queue_time_s, dtype=np.float64)
        cached[ids] = observer.cached_prompt_tokens
        preempt[ids] = observer.preemptions
    err: list[str | None] = [None] * n
    for i, kind in observer.errors.items():
        err[i] = kind
    return RecordColumns(
        arrival_s=arrival,
        first_token_s=first,
        end_s=end,
        prompt_tokens=prompt,
        output_tokens=output,
        cached_prompt_tokens=cached,
        preemptions=preempt,
        queue_time_s=queue,
        errors=tuple(err),
    )


def charge_request_overhead(cols: RecordColumns, overhead_s: float, served: np.ndarray | None = None) -> None:
    """Add the server's per-request cost outside the engine (``Efficiency.request_overhead_s``)
    to the first token and end of the requests ``served`` (a boolean mask; every request when
    None), in place.

    The engine sees each request that long after the client sent it; with every arrival delayed
    by the same constant the engine runs exactly as it does undelayed, so a run is simulated on
    the arrival times and the client's first token and end are the engine's plus the cost (a
    closed-loop user's next turn reaches the engine the cost after its think time,
    ``ClosedLoopSource``). One engine's run and a fleet's are charged the same way."""
    if not overhead_s:
        return
    rows = slice(None) if served is None else served
    cols.first_token_s[rows] += overhead_s
    cols.end_s[rows] += overhead_s


def sim_result(
    setup: EngineSetup,
    engine: Engine,
    source: TrafficSource,
    observer: Observer,
    slo: Slo | None,
    decode_runs: int = 0,
    decode_run_steps: int = 0,
) -> SimResult:
    """The result of a run of one engine, from its source, observer and engine."""
    user_ids: tuple[int | None, ...] | None = None
    turns: tuple[int, ...] | None = None
    if isinstance(source, ClosedLoopSource):
        user_ids = tuple(s.user_id for s in source.issued)
        turns = tuple(s.turn for s in source.issued)
    overhead = setup.efficiency.request_overhead_s
    cols = record_columns(source, observer)
    charge_request_overhead(cols, overhead)
    n = len(cols)
    times: list[tuple[float, ...]] | None = [()] * n if engine.record_token_times else None
    if times is not None:
        ends = engine.decode_end_times
        for r in engine.finished:
            assert r.first_token_s is not None and r.segments is not None
            tok = [r.first_token_s]
            for a, b in r.segments:
                tok.extend(ends[a:b])
            tok.extend(r.itl_extra_s or ())
            tok.sort()
            times[r.request_id] = tuple(t + overhead for t in tok)
    horizon = observer.t_last_s
    itl = weighted_percentiles(engine.itl_durations, engine.itl_weights)
    summary = summarize_columns(cols, duration_s=horizon, slo=slo, itl=itl)
    stats = engine.stats
    mean_in = observer.in_system_area / horizon if horizon > 0 else 0.0
    mean_run = engine.seq_time / horizon if horizon > 0 else 0.0
    ts_kv = observer.ts_kv
    summary = replace(
        summary,
        mean_batch_size=engine.seq_time / engine.busy_s if engine.busy_s > 0 else 0.0,
        max_batch_size=engine.max_batch,
        mean_kv_utilization=float(np.mean(ts_kv)) if ts_kv else 0.0,
        max_kv_utilization=float(np.max(ts_kv)) if ts_kv else 0.0,
        mean_queue_depth=max(0.0, mean_in - mean_run),
        max_queue_depth=engine.max_waiting,
        prefix_cache_hit_rate=stats.prefix_cache_hit_rate,
        kv_tier_hit_tokens={"gpu": stats.prefix_cache_hit_tokens, **dict(stats.tier_hit_tokens)}
        if engine.tiers is not None
        else None,
        kv_tier_query_tokens=stats.prefix_cache_query_tokens if engine.tiers is not None else 0,
        timeseries=TimeSeries(
            tuple(observer.ts_time_s), tuple(ts_kv), tuple(observer.ts_waiting), tuple(observer.ts_running)
        ),
        preemptions=stats.preemptions,
    )
    return SimResult(
        summary=summary,
        columns=cols,
        engine=stats,
        horizon_s=horizon,
        steps=engine.steps,
        events=observer.arrivals + engine.steps,
        decode_runs=decode_runs,
        decode_run_steps=decode_run_steps,
        mean_in_system=mean_in,
        mean_running=mean_run,
        mean_waiting=max(0.0, mean_in - mean_run),
        admitted=observer.admitted,
        user_ids=user_ids,
        turns=turns,
        token_times_s=tuple(times) if times is not None else None,
        notes=setup.notes,
    )


def _arrays_from_specs(specs: list[RequestSpec]) -> RequestArrays:
    for i, s in enumerate(specs):
        if s.request_id != i:
            raise ServecapError("request_id", s.request_id, f"requests must be numbered 0..N-1 in order (at {i})")
    arr = np.array([s.arrival_s for s in specs], dtype=np.float64)
    if np.any(np.diff(arr) < 0):
        raise ServecapError("arrival_s", "unsorted", "requests must be sorted by arrival time")
    return RequestArrays(
        arr,
        np.array([s.prompt_tokens for s in specs], dtype=np.int64),
        np.array([s.output_tokens for s in specs], dtype=np.int64),
        np.array([-1 if s.prefix_group is None else s.prefix_group for s in specs], dtype=np.int64),
        np.array([s.prefix_tokens for s in specs], dtype=np.int64),
        **_hash_columns(specs),
    )


def _hash_columns(specs: list[RequestSpec]) -> dict[str, Any]:
    """The requests' block hashes as the arrays' columns (none when no request has any)."""
    blocks = [s.hash_blocks for s in specs]
    if all(b is None for b in blocks):
        return {}
    sizes = {b.trace_block_tokens for b in blocks if b is not None}
    if len(sizes) > 1:
        raise ServecapError("hash_blocks", sorted(sizes), "requests' trace block sizes differ")
    offsets = np.zeros(len(specs) + 1, dtype=np.int64)
    np.cumsum([0 if b is None else len(b.ids) for b in blocks], out=offsets[1:])
    ids = np.fromiter((x for b in blocks if b is not None for x in b.ids), dtype=np.int64, count=int(offsets[-1]))
    return {"hash_ids": ids, "hash_offsets": offsets, "trace_block_tokens": sizes.pop()}
