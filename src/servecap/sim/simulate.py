"""The discrete-event simulation of one replica under a workload: ``simulate()`` returns a value.

Events are ordered by one explicit key ``(time_s, seq)``: open-loop arrivals get ``seq`` 0..N-1
(in arrival order) before the run starts; step ends and closed-loop turns take the next ``seq``
when they are created. The engine starts a step at time ``t`` only after every event at ``t``
has been handled, so requests arriving at the very instant a step ends are seen by the next
step (pinned by a test). The loop does no I/O and keeps no global state; randomness comes from
the generator passed in (it only draws the workload).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter

import numpy as np

from servecap.errors import ServecapError
from servecap.results import (
    RecordColumns,
    RequestRecord,
    RunSummary,
    Slo,
    TimeSeries,
    summarize_columns,
    weighted_percentiles,
)
from servecap.sim.engine import Engine, EngineStats
from servecap.sim.kernel import run_fast
from servecap.sim.setup import EngineSetup
from servecap.workload import (
    ClosedLoopUsers,
    RequestArrays,
    RequestSpec,
    WorkloadSpec,
    block_keys,
    generate_arrays,
)

ProgressFn = Callable[[int, int], None]
# (rid, first token, end, first scheduled, cached prompt tokens, preemptions) per finished request
FinishedColumns = tuple[list[int], list[float | None], list[float | None], list[float | None], list[int], list[int]]
_INF = float("inf")


@dataclass(frozen=True, slots=True)
class SimResult:
    summary: RunSummary
    columns: RecordColumns
    engine: EngineStats
    horizon_s: float  # time of the last event (the run drains: every admitted request ends)
    steps: int  # engine iterations
    events: int  # events handled by the loop (arrivals, step ends, decode runs)
    decode_runs: int  # runs of decode-only steps advanced in one event
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
        c = self.columns

        def opt(x: float) -> float | None:
            return None if np.isnan(x) else float(x)

        out = []
        for i in range(len(c)):
            out.append(
                RequestRecord(
                    request_id=i,
                    arrival_s=float(c.arrival_s[i]),
                    prompt_tokens=int(c.prompt_tokens[i]),
                    output_tokens=int(c.output_tokens[i]),
                    first_token_s=opt(c.first_token_s[i]),
                    end_s=opt(c.end_s[i]),
                    sent_s=None,
                    token_times_s=self.token_times_s[i] if self.token_times_s is not None else (),
                    cached_prompt_tokens=int(c.cached_prompt_tokens[i]),
                    preemptions=int(c.preemptions[i]),
                    queue_time_s=opt(c.queue_time_s[i]),
                    error=c.errors[i],
                    user_id=self.user_ids[i] if self.user_ids is not None else None,
                    turn=self.turns[i] if self.turns is not None else 1,
                )
            )
        return out


def simulate(
    setup: EngineSetup,
    workload: WorkloadSpec | RequestArrays | Sequence[RequestSpec],
    rng: np.random.Generator | None = None,
    *,
    slo: Slo | None = None,
    fast_forward: bool = True,
    kernel: bool = True,
    exact_step_time: bool = False,
    record_token_times: bool = False,
    timeseries_points: int = 400,
    check_invariants: bool = False,
    progress: ProgressFn | None = None,
) -> SimResult:
    """Simulate one replica serving ``workload`` until every request has finished.

    ``workload`` is a spec (drawn with ``rng``), or an already drawn open-loop stream.
    ``fast_forward=False`` is the step-by-step reference: one ``Engine._step`` call and one event
    per step. The default runs the same loop with the engine step written out inline
    (:mod:`servecap.sim.kernel`), identical results, several times faster; ``kernel=False``
    instead advances runs of decode-only steps in one event with ``Engine.advance_decode_run``
    (also identical per-request results). ``exact_step_time`` calls the roofline's ``step_time`` for every step instead of its
    affine read-off; ``check_invariants`` checks block conservation after every step (slow).
    ``progress(done, total)`` is called now and then (total is 0 when unknown).
    """
    users: ClosedLoopUsers | None = None
    specs: list[RequestSpec] = []
    if isinstance(workload, WorkloadSpec):
        if rng is None:
            raise ServecapError("rng", None, "a workload spec needs a random generator (seed)")
        if workload.closed_loop:
            users = ClosedLoopUsers(workload, rng)
            arrays = None
        else:
            arrays = generate_arrays(workload, rng)
    elif isinstance(workload, RequestArrays):
        arrays = workload
    else:
        specs = list(workload)
        arrays = _arrays_from_specs(specs)
    engine = Engine(setup, keep_finished=True, record_token_times=record_token_times, exact_step_time=exact_step_time)
    loop = _Loop(engine, setup, users, arrays, specs, timeseries_points, check_invariants, progress, fast_forward)
    if fast_forward and kernel:
        run_fast(loop)
    else:
        loop.run()
    return loop.result(slo)


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
    )


class _Loop:
    def __init__(
        self,
        engine: Engine,
        setup: EngineSetup,
        users: ClosedLoopUsers | None,
        arrays: RequestArrays | None,
        specs: list[RequestSpec],
        points: int,
        check: bool,
        progress: ProgressFn | None,
        fast_forward: bool,
    ) -> None:
        self.engine = engine
        self.setup = setup
        self.users = users
        self.check = check
        self.progress = progress
        self.fast_forward = fast_forward
        self.specs = specs
        if arrays is not None:
            self.arr = arrays.arrival_s.tolist()
            self.prompt = arrays.prompt_tokens.tolist()
            self.output = arrays.output_tokens.tolist()
            self.group = arrays.prefix_group.tolist()
            self.ptok = arrays.prefix_tokens.tolist()
        else:
            self.arr, self.prompt, self.output, self.group, self.ptok = [], [], [], [], []
        self.n_open = len(self.arr)
        self.seq = self.n_open
        self.uheap: list[tuple[float, int, RequestSpec]] = []
        self.closed: list[RequestSpec] = []
        self.errors: dict[int, str] = {}
        self.area = 0.0
        self.in_sys = 0
        self.t_last = 0.0
        self.events = 0
        self.runs = 0
        self.run_steps = 0
        self.admitted = 0
        self.finished = 0
        self.max_waiting = 0
        horizon = self.arr[-1] if self.arr else 0.0
        if users is not None:
            horizon = users.spec.duration_s or max(1.0, 60.0 * users.num_users)
        self.sample_dt = max(horizon, 1e-9) / max(1, points)
        self.next_sample = 0.0
        # (rid, first token, end, first scheduled, cached tokens, preemptions) of the finished
        # requests in finishing order, when the fast loop collected them
        self.finished_columns: FinishedColumns | None = None
        self.ts_t: list[float] = []
        self.ts_kv: list[float] = []
        self.ts_wait: list[int] = []
        self.ts_run: list[int] = []
        self.total_hint = self.n_open if users is None else (users.spec.num_requests or 0)
        self.next_progress = max(1, self.total_hint // 100) if self.total_hint else 1000

    # -- arrivals -------------------------------------------------------------------------------

    def _admit(self, rid: int, t: float, prompt: int, output: int, keys: tuple[int, ...] | None, prio: int) -> bool:
        if prompt + output > self.setup.max_model_len:
            self.errors[rid] = "too_long"
            return False
        if self.engine.add(rid, prompt, output, keys, prio, t):
            self.in_sys += 1
            self.admitted += 1
            return True
        self.errors[rid] = "rejected"
        return False

    def _keys(self, group: int, ptok: int, conv: int | None, total: int) -> tuple[int, ...] | None:
        if not self.engine.caching or (group < 0 and conv is None):
            return None
        return block_keys(
            prefix_group=None if group < 0 else group,
            prefix_tokens=ptok,
            conversation_id=conv,
            total_tokens=total,
            block_size=self.engine.bs,
        )

    def _turn(self, spec: RequestSpec, t: float) -> None:
        keys = self._keys(
            -1 if spec.prefix_group is None else spec.prefix_group,
            spec.prefix_tokens,
            spec.conversation_id,
            spec.total_tokens,
        )
        if not self._admit(spec.request_id, t, spec.prompt_tokens, spec.output_tokens, keys, spec.priority):
            self._follow_up(spec.request_id, t)  # a failed turn: the user thinks and tries again

    def _follow_up(self, rid: int, t: float) -> None:
        users = self.users
        if users is None:
            return
        uid = self.closed[rid].user_id
        assert uid is not None
        nxt = users.next_turn(uid, t)
        if nxt is not None:
            self.closed.append(nxt)
            heapq.heappush(self.uheap, (nxt.arrival_s, self.seq, nxt))
            self.seq += 1

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> None:
        engine = self.engine
        users = self.users
        if users is not None:
            for spec in users.first_turns():
                self.closed.append(spec)
                heapq.heappush(self.uheap, (spec.arrival_s, self.seq, spec))
                self.seq += 1
        arr, n_open = self.arr, self.n_open
        uheap = self.uheap
        ai = 0
        busy = False
        t_end = _INF
        end_seq = 0
        while True:
            ta = arr[ai] if ai < n_open else _INF
            tu = uheap[0][0] if uheap else _INF
            te = t_end if busy else _INF
            if ta <= tu and ta <= te:
                if ta == _INF:
                    break
                t = ta
                self.area += self.in_sys * (t - self.t_last)
                self.t_last = t
                total = self.prompt[ai] + self.output[ai]
                keys = self._keys(self.group[ai], self.ptok[ai], None, total) if self.group[ai] >= 0 else None
                self._admit(ai, t, self.prompt[ai], self.output[ai], keys, 0)
                ai += 1
            elif tu < te or (tu == te and uheap[0][1] < end_seq):
                t, _, spec = heapq.heappop(uheap)
                self.area += self.in_sys * (t - self.t_last)
                self.t_last = t
                self._turn(spec, t)
            else:
                t = te
                self.area += self.in_sys * (t - self.t_last)
                self.t_last = t
                busy = False
                done = engine.take_finished()
                if done:
                    self.in_sys -= len(done)
                    self.finished += len(done)
                    if users is not None:
                        for r in done:
                            self._follow_up(r.rid, t)
                    if self.progress is not None and self.finished >= self.next_progress:
                        self.progress(self.finished, self.total_hint)
                        self.next_progress = self.finished + max(1, self.total_hint // 100 or 1000)
                if self.check:
                    engine.check_invariants()
            self.events += 1
            if busy or not engine.has_work():
                continue
            # start a step at t once every event at t has been handled
            t_next = min(arr[ai] if ai < n_open else _INF, uheap[0][0] if uheap else _INF)
            if t_next <= t:
                continue
            if t >= self.next_sample:
                self._sample(t)
            waiting = engine.num_waiting
            if waiting > self.max_waiting:
                self.max_waiting = waiting
            if self.fast_forward and engine.can_fast_forward():
                k, t_run = engine.advance_decode_run(t, t_next)
                if k:
                    self.runs += 1
                    self.run_steps += k
                    busy, t_end, end_seq = True, t_run, self.seq
                    self.seq += 1
                    continue
            engine._step(t, False)
            end = engine._last_end
            if end <= t:
                raise RuntimeError("the engine has work but scheduled nothing")  # a bug, not input
            busy, t_end, end_seq = True, end, self.seq
            self.seq += 1
        if self.progress is not None:
            self.progress(self.finished, self.total_hint)

    def _sample(self, t: float) -> None:
        e = self.engine
        self.ts_t.append(t)
        self.ts_kv.append(e.pool.used / e.pool.total)
        self.ts_wait.append(e.num_waiting)
        self.ts_run.append(e.num_running)
        self.next_sample = t + self.sample_dt

    # -- the result -----------------------------------------------------------------------------

    def result(self, slo: Slo | None) -> SimResult:
        engine = self.engine
        if self.users is not None:
            specs = self.closed
            n = len(specs)
            arrival = np.array([s.arrival_s for s in specs], dtype=np.float64)
            prompt = np.array([s.prompt_tokens for s in specs], dtype=np.int64)
            output = np.array([s.output_tokens for s in specs], dtype=np.int64)
            user_ids: tuple[int | None, ...] | None = tuple(s.user_id for s in specs)
            turns: tuple[int, ...] | None = tuple(s.turn for s in specs)
        else:
            n = self.n_open
            arrival = np.asarray(self.arr, dtype=np.float64)
            prompt = np.asarray(self.prompt, dtype=np.int64)
            output = np.asarray(self.output, dtype=np.int64)
            user_ids = turns = None
        first = np.full(n, np.nan)
        end = np.full(n, np.nan)
        sched = np.full(n, np.nan)
        cached = np.zeros(n, dtype=np.int64)
        preempt = np.zeros(n, dtype=np.int64)
        done = engine.finished
        rec = self.finished_columns
        if rec is not None and rec[0]:  # collected by the kernel as requests finished
            ids = np.asarray(rec[0], dtype=np.int64)
            first[ids], end[ids], sched[ids] = rec[1], rec[2], rec[3]
            cached[ids], preempt[ids] = rec[4], rec[5]
        elif done:  # column by column
            ids = np.fromiter(map(attrgetter("rid"), done), dtype=np.int64, count=len(done))
            first[ids] = np.fromiter(map(attrgetter("first_token_s"), done), dtype=np.float64, count=len(done))
            end[ids] = np.fromiter(map(attrgetter("end_s"), done), dtype=np.float64, count=len(done))
            sched[ids] = np.fromiter(map(attrgetter("sched_s"), done), dtype=np.float64, count=len(done))
            cached[ids] = np.fromiter(map(attrgetter("cached_tokens"), done), dtype=np.int64, count=len(done))
            preempt[ids] = np.fromiter(map(attrgetter("preemptions"), done), dtype=np.int64, count=len(done))
        times: list[tuple[float, ...]] | None = [()] * n if engine.record_token_times else None
        ends = engine.decode_end_times
        if times is not None:
            for r in done:
                assert r.first_token_s is not None and r.segments is not None
                tok = [r.first_token_s]
                for a, b in r.segments:
                    tok.extend(ends[a:b])
                tok.extend(r.itl_extra or ())
                tok.sort()
                times[r.rid] = tuple(tok)
        err: list[str | None] = [None] * n
        for i, kind in self.errors.items():
            err[i] = kind
        errors = tuple(err)
        cols = RecordColumns(
            arrival_s=arrival,
            first_token_s=first,
            end_s=end,
            prompt_tokens=prompt,
            output_tokens=output,
            cached_prompt_tokens=cached,
            preemptions=preempt,
            queue_time_s=sched - arrival,
            errors=errors,
        )
        horizon = self.t_last
        itl = weighted_percentiles(engine.itl_durations, engine.itl_weights)
        summary = summarize_columns(cols, duration_s=horizon, slo=slo, itl=itl)
        stats = engine.stats
        mean_in = self.area / horizon if horizon > 0 else 0.0
        mean_run = engine.seq_time / horizon if horizon > 0 else 0.0
        summary = replace(
            summary,
            mean_batch_size=engine.seq_time / engine.busy_s if engine.busy_s > 0 else 0.0,
            max_batch_size=engine.max_batch,
            mean_kv_utilization=float(np.mean(self.ts_kv)) if self.ts_kv else 0.0,
            max_kv_utilization=float(np.max(self.ts_kv)) if self.ts_kv else 0.0,
            mean_queue_depth=max(0.0, mean_in - mean_run),
            max_queue_depth=self.max_waiting,
            prefix_cache_hit_rate=stats.prefix_cache_hit_rate,
            timeseries=TimeSeries(tuple(self.ts_t), tuple(self.ts_kv), tuple(self.ts_wait), tuple(self.ts_run)),
            preemptions=stats.preemptions,
        )
        return SimResult(
            summary=summary,
            columns=cols,
            engine=stats,
            horizon_s=horizon,
            steps=engine.steps,
            events=self.events,
            decode_runs=self.runs,
            decode_run_steps=self.run_steps,
            mean_in_system=mean_in,
            mean_running=mean_run,
            mean_waiting=max(0.0, mean_in - mean_run),
            admitted=self.admitted,
            user_ids=user_ids,
            turns=turns,
            token_times_s=tuple(times) if times is not None else None,
            notes=self.setup.notes,
        )
