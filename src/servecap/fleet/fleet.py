"""The fleet behind the loop's :class:`~servecap.sim.server.Server` seam: replicas of one or more
pools, a router, per-pool autoscalers, cold starts and failures, all on one simulated clock.

Own events (a heap ordered by ``(time_s, seq)``): a replica becoming ready, a replica crashing,
an autoscaler decision, a router scrape. :meth:`Fleet.advance_to` handles those due by ``t`` in
order, first bringing every live replica up to the event's time (so an autoscaler or a scrape
reads exact gauges, and a replica ready at ``t`` takes the requests arriving at ``t``), then runs
the replicas to ``t``. Finished requests come back sorted by end time.

Replicas are advanced lazily: each notes the time of its engine's next event (a step's end, or
the start of a step for an idle engine given work), and only those due by ``t`` run; the others'
state is exact as it stands (nothing happens in them before then). With ``ordered`` (closed-loop
traffic) the due replicas' events run one at a time in time order, so a user's next turn is
scheduled right after the finish that caused it and before any replica runs past it.

Request outcomes (each request ends in exactly one): finished (``error`` None), ``"rejected"``
or ``"too_long"`` by the replica's engine, ``"replica_failed"`` (its replica crashed and the
setting, or its retry budget, says fail), ``"no_replica"`` (no replica could ever take it).
Requests that find no ready replica wait at the router (in arrival order) for the next one to
become ready; their times count from their arrival.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import insort
from collections import deque
from collections.abc import Sequence

import numpy as np

from servecap.errors import ServecapError
from servecap.fleet.lifecycle import cold_start_draw_s, scale_down_choice
from servecap.fleet.recent import RecentValues, mean_itl_s
from servecap.fleet.replica import DRAINING, FAILED, READY, STARTING, STOPPED, Replica, ReplicaSnapshot
from servecap.fleet.spec import FleetSpec, Pool
from servecap.policy.autoscalers import Autoscaler, make_autoscaler
from servecap.policy.routers import RouteRequest, make_router
from servecap.policy.signals import signal_value
from servecap.policy.view import ReplicaView
from servecap.results.record import RequestRecord
from servecap.sim.engine import Engine
from servecap.sim.server import ArrivingRequest, FinishedRequest
from servecap.sim.step_time import StepTimeModel
from servecap.workload.request import block_keys

_READY, _CRASH, _TICK, _SCRAPE = 0, 1, 2, 3
_INF = float("inf")


class Fleet:
    def __init__(self, spec: FleetSpec, seed: int, *, ordered: bool = False, keep_ids: bool = True) -> None:
        self.spec = spec
        # keep_ids: replicas list the requests they served (a streaming run keeps none: it
        # notes the pool of each finished request until its accumulator takes it, ``pool_of``)
        self.keep_ids = keep_ids
        self.pool_of: dict[int, int] | None = None if keep_ids or len(spec.pools) < 2 else {}
        # ordered: replica events in time order, returning right after the first step that
        # finished requests, as the seam asks (a closed-loop source schedules the next turn from it)
        self.ordered = ordered
        self.rng = np.random.default_rng([seed, 0xF1EE7])
        self.router = make_router(spec.router, random.Random(seed), dict(spec.router_settings))
        self.replicas: list[Replica] = []
        self.by_pool: list[list[Replica]] = [[] for _ in spec.pools]
        self.ready: list[Replica] = []  # routable, by id
        self.live: list[Replica] = []  # ready or draining (their engines run), by id
        # waiting at the router for a ready replica (of the pool given, or any: None)
        self.pending: deque[tuple[ArrivingRequest, int | None]] = deque()
        self._pool_index = {p.name: i for i, p in enumerate(spec.pools)}
        self.autoscalers: list[Autoscaler | None] = [
            make_autoscaler(p.autoscaler) if p.autoscaler is not None else None for p in spec.pools
        ]
        self._events: list[tuple[float, int, int, int]] = []
        self._step_models: list[StepTimeModel | None] = [None for _ in spec.pools]
        self._seq = 0
        self.now_s = 0.0  # the time of the last advance_to (the recorder's clock)
        self._out: list[FinishedRequest] = []
        self._retries: dict[int, int] = {}
        self._arrival: dict[int, ArrivingRequest] = {}  # requests not added at their arrival: original spec
        self._snapshots: dict[int, ReplicaSnapshot] = {}
        self._stale = spec.scrape_interval_s > 0 and self.router.needs_state
        self._uses_load = self.router.uses_load
        self._block_tokens = spec.pools[0].setup.block_size
        # the requested GPUs over time, as (time, change): what the bill integrates
        self.gpu_log: list[tuple[float, int]] = []
        # the windowed autoscaling signals' values, kept only for an autoscaler that reads them
        self.recent_ttft = RecentValues()
        self.recent_itl = RecentValues()
        signals = {p.autoscaler.signal for p in spec.pools if p.autoscaler is not None}
        self._track_ttft = "p99_ttft_s" in signals
        self._track_itl = "p99_itl_s" in signals
        self.scale_events: list[tuple[float, str, int, int]] = []  # (time, pool, from, to)
        self.retried = 0
        for pi, pool in enumerate(spec.pools):
            for _ in range(pool.replicas):
                self._start_replica(pi, 0.0, instant=True)
            if pool.autoscaler is not None:
                self._push(pool.autoscaler.interval_s, _TICK, pi)
            for t in pool.crash_at_s:
                self._push(t, _CRASH, -1 - pi)  # a ready replica of pool pi, chosen then
        if self._stale:
            self._push(spec.scrape_interval_s, _SCRAPE, 0)
        self._scrape()

    # -- lifecycle ------------------------------------------------------------------------------

    def _push(self, t_s: float, kind: int, arg: int) -> None:
        heapq.heappush(self._events, (t_s, self._seq, kind, arg))
        self._seq += 1

    def _start_replica(self, pi: int, now_s: float, *, instant: bool = False) -> Replica:
        pool = self.spec.pools[pi]
        engine = Engine(pool.setup, step_model=self._step_models[pi])
        self._step_models[pi] = engine.model  # one price cache per pool
        r = Replica(len(self.replicas), pool.name, pi, engine, now_s, keep_ids=self.keep_ids)
        self.replicas.append(r)
        self.by_pool[pi].append(r)
        self.gpu_log.append((now_s, pool.gpus_per_replica))
        if instant:
            self._become_ready(r, now_s)
        else:
            self._push(now_s + self.cold_start_s(pool), _READY, r.replica_id)
        return r

    def cold_start_s(self, pool: Pool) -> float:
        """One draw of the pool's cold start (:func:`servecap.fleet.lifecycle.cold_start_draw_s`)."""
        return cold_start_draw_s(pool, self.rng)

    def _become_ready(self, r: Replica, now_s: float) -> None:
        r.state = READY
        r.ready_s = now_s
        r.t_last_s = now_s
        insort(self.ready, r, key=_replica_id)
        insort(self.live, r, key=_replica_id)
        self._schedule(r)
        self._snapshots[r.replica_id] = ReplicaSnapshot.of(r)
        pool = self.spec.pools[r.pool_index]
        if pool.mtbf_s is not None:
            self._push(now_s + float(self.rng.exponential(pool.mtbf_s)), _CRASH, r.replica_id)
        if self.pending:
            waiting, self.pending = self.pending, deque()
            for spec, pi in waiting:  # in arrival order; those for another pool wait on
                if pi is None or pi == r.pool_index:
                    self._route(spec, now_s, pi)
                else:
                    self.pending.append((spec, pi))

    def _leave(self, r: Replica) -> None:
        if r in self.ready:
            self.ready.remove(r)
        self._snapshots.pop(r.replica_id, None)
        self.router.forget(r.replica_id)

    def _stop(self, r: Replica, t_s: float, state: str) -> list[tuple[ArrivingRequest, float]]:
        self._leave(r)
        if r in self.live:
            self.live.remove(r)
        self.gpu_log.append((t_s, -self.spec.pools[r.pool_index].gpus_per_replica))
        return r.close(t_s, state)

    def _crash(self, r: Replica, t_s: float) -> None:
        if r.state not in (READY, DRAINING):
            return
        replace = r.state == READY  # a draining replica was on its way out anyway
        pool_index = r.pool_index
        for spec, _ in self._stop(r, t_s, FAILED):
            original = self._arrival.get(spec.request_id, spec)
            tries = self._retries.get(spec.request_id, 0)
            if self.spec.on_failure == "retry" and tries < self.spec.max_retries:
                self._retries[spec.request_id] = tries + 1
                self.retried += 1
                self._arrival.setdefault(spec.request_id, original)
                self._route(spec, t_s)
            else:
                self._fail(original, "replica_failed")
        if replace:
            self._start_replica(pool_index, t_s)  # the deployment controller replaces it

    def _fail(self, spec: ArrivingRequest, error: str) -> None:
        original = self._arrival.pop(spec.request_id, spec)
        self._out.append(
            RequestRecord(
                request_id=spec.request_id,
                arrival_s=original.arrival_s,
                prompt_tokens=spec.prompt_tokens,
                output_tokens=spec.output_tokens,
                error=error,
                user_id=spec.user_id,
                turn=spec.turn,
            )
        )

    # -- routing --------------------------------------------------------------------------------

    def route(self, request: ArrivingRequest, now_s: float, pool: str | None = None) -> bool:
        """Route ``request`` at ``now_s`` to a replica of ``pool`` (any pool: None) — the entry a
        gateway stage in front of the router uses (model routing, overflow, fallback); False
        when the replica's engine refused it (its record comes back from take_finished)."""
        if pool is not None and pool not in self._pool_index:
            raise ServecapError("pool", pool, f"no such pool; one of {', '.join(self._pool_index)}")
        return self._route(request, now_s, None if pool is None else self._pool_index[pool])

    def _route(self, spec: ArrivingRequest, now_s: float, pi: int | None = None) -> bool:
        candidates = self.ready if pi is None else [r for r in self.ready if r.pool_index == pi]
        if not candidates:
            if self._can_get_replica(pi):
                if spec.arrival_s != now_s or spec.request_id in self._retries:
                    self._arrival.setdefault(spec.request_id, spec)
                self.pending.append((spec, pi))
                return True
            self._fail(spec, "no_replica")
            return True
        keys = None
        if self.router.uses_prefix and spec.hash_blocks is not None:
            keys = spec.hash_blocks.keys(self._block_tokens, spec.prompt_tokens)
        elif self.router.uses_prefix and spec.prefix_group is not None:
            keys = block_keys(
                prefix_group=spec.prefix_group,
                prefix_tokens=spec.prefix_tokens,
                conversation_id=spec.conversation_id,
                total_tokens=spec.total_tokens,
                block_size=self._block_tokens,
            )
        # the workload's session id where the request carries one, else its conversation or user
        session = spec.session_id
        if session is None:
            session = spec.conversation_id if spec.conversation_id is not None else spec.user_id
        req = RouteRequest(spec.request_id, spec.prompt_tokens, spec.output_tokens, session, keys, self._block_tokens)
        views: Sequence[ReplicaView] = candidates
        loads: list[int] | None = None
        if self._stale:
            views = [self._snapshots[r.replica_id] for r in candidates]
        elif self._uses_load:  # read here, natively, rather than through the views
            loads = [r.engine.num_requests for r in candidates]
        r = candidates[self.router.choose(req, views, now_s, loads)]
        if now_s != spec.arrival_s:
            self._arrival.setdefault(spec.request_id, spec)
            spec = spec.arriving_at(now_s)
        if r.add(spec, now_s):
            self._schedule(r)
            return True
        for rec in r.take_refused():
            self._out.append(self._record(rec, spec))
        return False

    def _can_get_replica(self, pi: int | None) -> bool:
        """A replica (of pool ``pi``, or any) is starting, or an autoscaler may start one."""
        if pi is None:
            return any(r.state == STARTING for r in self.replicas) or any(a is not None for a in self.autoscalers)
        return any(r.state == STARTING for r in self.by_pool[pi]) or self.autoscalers[pi] is not None

    # -- the server seam ------------------------------------------------------------------------

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        return self._route(request, now_s)

    def next_event_s(self) -> float:
        """The next step end (or step start) of a replica; the fleet's own timers (autoscaler
        ticks, scrapes, cold starts) are handled in :meth:`advance_to` and not reported here:
        the observer samples by its own clock in between."""
        t = _INF
        for r in self.live:
            if r.next_s < t:
                t = r.next_s
        return t

    def next_timer_s(self) -> float:
        """The time of the fleet's next own timer (a replica becoming ready, a crash, an
        autoscaler tick, a scrape); ``inf`` when none is set."""
        return self._events[0][0] if self._events else _INF

    def _schedule(self, r: Replica) -> None:
        """Note the time of the replica's next own event (a scan of the live replicas finds the
        due ones: for fleets of tens to hundreds of replicas, cheaper than a heap of entries)."""
        r.next_s = r.server.next_event_s()

    def has_work(self) -> bool:
        if self.pending:
            return True
        return any(r.state in (READY, DRAINING) and r.has_work() for r in self.replicas)

    def take_finished(self) -> Sequence[FinishedRequest]:
        out = self._out
        if out:
            self._out = []
            out.sort(key=_end_key)
        return out

    def advance_to(self, t_s: float) -> None:
        ev = self._events
        while ev and ev[0][0] <= t_s:
            te = ev[0][0]
            if self._advance_replicas(te):
                return
            _, _, kind, arg = heapq.heappop(ev)
            if kind == _READY:
                r = self.replicas[arg]
                if r.state == STARTING:
                    self._become_ready(r, te)
            elif kind == _CRASH:
                if arg >= 0:
                    self._crash(self.replicas[arg], te)
                else:
                    live = [r for r in self.by_pool[-1 - arg] if r.state == READY]
                    if live:
                        self._crash(live[0], te)
            elif kind == _TICK:
                self._autoscale(arg, te)
            else:
                self._scrape()
                self._push(te + self.spec.scrape_interval_s, _SCRAPE, 0)
        if self._advance_replicas(t_s):
            return
        self.now_s = t_s

    def _advance_replicas(self, t_s: float) -> bool:
        """Bring the replicas whose next event is due by ``t_s`` up to ``t_s`` (the others have
        nothing to do before it: their state is exact as it stands; each runs on its own, so
        their order does not matter), or with ``ordered`` one event at a time in time order;
        True when ``ordered`` stopped right after a finish."""
        if self.ordered:
            return self._advance_in_order(t_s)
        for r in [r for r in self.live if r.next_s <= t_s]:
            self._run(r, t_s, early=False)
        return False

    def _advance_in_order(self, t_s: float) -> bool:
        """The ``ordered`` advance: one replica event at a time, the earliest first (ties by id),
        returning right after one that finished requests. A closed-loop user's next turn is
        then scheduled before any replica runs past its finish: the turn, wherever it is routed,
        finds its replica exactly as it stood at the turn's arrival (each event: the step
        ending at the replica's next event time, and the step it starts right then)."""
        stuck: list[Replica] = []  # idle until ``t_s`` itself: they start after its arrivals
        while True:
            best: Replica | None = None
            for r in self.live:
                if r.next_s <= t_s and (best is None or r.next_s < best.next_s) and r not in stuck:
                    best = r
            if best is None:
                return False
            te = best.next_s
            target = t_s if te >= t_s else min(t_s, math.nextafter(te, _INF))
            if self._run(best, target, early=True):
                return True
            if best.next_s == te and best.state != STOPPED:
                stuck.append(best)

    def _run(self, r: Replica, t_s: float, *, early: bool) -> bool:
        """Advance one replica to ``t_s`` and file what finished; True if anything did."""
        done = r.advance(t_s, early=early)
        out = self._out
        for rec, spec, _ in done:
            out.append(self._record(rec, spec))
        pool_of = self.pool_of
        if pool_of is not None:
            for rec, _, _ in done:
                pool_of[rec.request_id] = r.pool_index
        if r.state == DRAINING and not r.has_work():
            assert r.drain_s is not None
            self._stop(r, max(r.drain_s, r.last_finish_s), STOPPED)
        else:
            self._schedule(r)
        return bool(done)

    def _record(self, rec: FinishedRequest, spec: ArrivingRequest) -> FinishedRequest:
        first = rec.first_token_s
        if first is not None and self._track_ttft:
            original = self._arrival.get(rec.request_id, spec)
            self.recent_ttft.add(first, first - original.arrival_s)
        if first is not None and self._track_itl and rec.end_s is not None:
            itl = mean_itl_s(first, rec.end_s, spec.output_tokens)
            if itl is not None:
                self.recent_itl.add(rec.end_s, itl)
        original_spec = self._arrival.pop(rec.request_id, None)
        if original_spec is None:
            return rec
        shift = spec.arrival_s - original_spec.arrival_s
        queue = rec.queue_time_s
        return RequestRecord(
            request_id=rec.request_id,
            arrival_s=original_spec.arrival_s,
            prompt_tokens=spec.prompt_tokens,
            output_tokens=spec.output_tokens,
            first_token_s=first,
            end_s=rec.end_s,
            cached_prompt_tokens=rec.cached_prompt_tokens,
            preemptions=rec.preemptions,
            queue_time_s=None if queue is None else queue + shift,
            error=rec.error,
            user_id=spec.user_id,
            turn=spec.turn,
        )

    def _scrape(self) -> None:
        self._snapshots = {r.replica_id: ReplicaSnapshot.of(r) for r in self.ready}

    # -- autoscaling ----------------------------------------------------------------------------

    def p99_ttft_s(self, now_s: float, window_s: float) -> float:
        """p99 TTFT of the requests whose first token came in the last ``window_s``."""
        return self.recent_ttft.p99(now_s, window_s)

    def p99_itl_s(self, now_s: float, window_s: float) -> float:
        """p99 mean inter-token latency of the requests that finished in the last ``window_s``."""
        return self.recent_itl.p99(now_s, window_s)

    def signal(self, pi: int, name: str, now_s: float, window_s: float) -> float:
        """Signal ``name`` of pool ``pi`` (:func:`servecap.policy.signals.signal_value`, as the
        monitor computes it), counting the requests waiting at the router for the pool."""
        pending = sum(1 for _, p in self.pending if p is None or p == pi)
        value = signal_value(
            name,
            self.by_pool[pi],
            lambda: self.p99_ttft_s(now_s, window_s),
            pending,
            lambda: self.p99_itl_s(now_s, window_s),
        )
        return 0.0 if value is None else value

    def _autoscale(self, pi: int, now_s: float) -> None:
        scaler = self.autoscalers[pi]
        assert scaler is not None
        s = scaler.settings
        self._push(now_s + s.interval_s, _TICK, pi)
        members = [r for r in self.by_pool[pi] if r.state in (STARTING, READY)]
        current = len(members)
        desired = scaler.decide(now_s, current, self.signal(pi, s.signal, now_s, s.window_s))
        if desired == 0 and any(p is None or p == pi for _, p in self.pending):
            desired = 1  # KEDA's activation: any waiting work brings a pool up from zero
        if desired == current:
            return
        self.scale_events.append((now_s, self.spec.pools[pi].name, current, desired))
        if desired > current:
            for _ in range(desired - current):
                self._start_replica(pi, now_s)
            return
        # scale down: cancel starting replicas first (newest first), then drain the least loaded
        starting, ready = scale_down_choice(members, current - desired)
        for r in starting:
            self._stop(r, now_s, STOPPED)
        for r in ready:
            self._leave(r)
            r.state = DRAINING
            r.drain_s = now_s
            if not r.has_work():
                self._stop(r, now_s, STOPPED)

    # -- gauges ---------------------------------------------------------------------------------

    def gauges(self) -> tuple[float, int, int]:
        live = self.ready
        kv = sum(r.kv_usage for r in live) / len(live) if live else 0.0
        return kv, sum(r.num_waiting for r in live) + len(self.pending), sum(r.num_running for r in live)

    def count(self, state: str) -> int:
        return sum(1 for r in self.replicas if r.state == state)


def _replica_id(r: Replica) -> int:
    return r.replica_id


def _end_key(r: FinishedRequest) -> float:
    e = r.end_s
    return -1.0 if e is None else e
