"""The co-located fleet behind the loop's :class:`~servecap.sim.server.Server` seam: pools of
``both`` replicas behind a router, on the fleet core (:mod:`servecap.fleet.pools`: per-pool
autoscalers, cold starts, failures, lifecycle), on one simulated clock.

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
from typing import Final, cast

from servecap.errors import ServecapError
from servecap.fleet.pools import DRAINING, FAILED, OWN_TIMER, READY, STOPPED, PoolReplica, Pools
from servecap.fleet.replica import Replica, ReplicaSnapshot
from servecap.fleet.spec import FleetSpec
from servecap.policy.routers import RouteRequest, make_router
from servecap.policy.view import ReplicaView
from servecap.results.record import RequestRecord
from servecap.sim.engine import Engine
from servecap.sim.server import ArrivingRequest, FinishedRequest
from servecap.workload.request import block_keys

_SCRAPE: Final = OWN_TIMER
_INF: Final = float("inf")


class Fleet(Pools):
    def __init__(self, spec: FleetSpec, seed: int, *, ordered: bool = False, keep_ids: bool = True) -> None:
        super().__init__(spec, seed, 0xF1EE7, ordered=ordered, keep_ids=keep_ids)
        self.router = make_router(spec.router, random.Random(seed), dict(spec.router_settings))
        self.ready: list[Replica] = []  # routable, by id
        self.live: list[Replica] = []  # ready or draining (their engines run), by id
        # waiting at the router for a ready replica (of the pool given, or any: None)
        self.pending: deque[tuple[ArrivingRequest, int | None]] = deque()
        self._pool_index = {p.name: i for i, p in enumerate(spec.pools)}
        self._all_pools = list(range(len(spec.pools)))
        self._retries: dict[int, int] = {}
        self._arrival: dict[int, ArrivingRequest] = {}  # requests not added at their arrival: original spec
        self._snapshots: dict[int, ReplicaSnapshot] = {}
        self._stale = spec.scrape_interval_s > 0 and self.router.needs_state
        self._uses_load = self.router.uses_load
        self._block_tokens = spec.pools[0].setup.block_size
        self._track_latency = self._track_ttft or self._track_itl
        self._start_pools()
        if self._stale:
            self._push(spec.scrape_interval_s, _SCRAPE, 0)
        self._scrape()

    # -- the core's hooks -----------------------------------------------------------------------

    def _new_replica(self, pi: int, replica_id: int, engine: Engine, now_s: float) -> PoolReplica:
        return Replica(replica_id, self.spec.pools[pi].name, pi, engine, now_s, keep_ids=self.keep_ids)

    def _listed(self, r: PoolReplica) -> None:
        rr = cast(Replica, r)
        insort(self.ready, rr, key=_replica_id)
        insort(self.live, rr, key=_replica_id)
        self._schedule(rr)
        self._snapshots[r.replica_id] = ReplicaSnapshot.of(rr)

    def _unlisted(self, r: PoolReplica) -> None:
        rr = cast(Replica, r)
        if rr in self.ready:
            self.ready.remove(rr)
        self._snapshots.pop(r.replica_id, None)
        self.router.forget(r.replica_id)
        if r.state != DRAINING and rr in self.live:
            self.live.remove(rr)

    def _release_pending(self, r: PoolReplica, now_s: float) -> None:
        if self.pending:
            waiting, self.pending = self.pending, deque()
            for spec, pi in waiting:  # in arrival order; those for another pool wait on
                if pi is None or pi == r.pool_index:
                    self._route(spec, now_s, pi)
                else:
                    self.pending.append((spec, pi))

    def num_pending(self, pi: int) -> int:
        return sum(1 for _, p in self.pending if p is None or p == pi)

    def num_pending_total(self) -> int:
        return len(self.pending)

    def _close(self, r: PoolReplica, t_s: float, state: str) -> list[int]:
        return [spec.request_id for spec, _ in cast(Replica, r).close(t_s, state)]

    def _evict(self, r: PoolReplica, t_s: float) -> None:
        held = [spec for spec, _ in cast(Replica, r).inflight.values()]
        self._stop(r, t_s, FAILED)
        for spec in held:
            original = self._arrival.get(spec.request_id, spec)
            tries = self._retries.get(spec.request_id, 0)
            if self.may_retry(tries):
                self._retries[spec.request_id] = tries + 1
                self._arrival.setdefault(spec.request_id, original)
                self._route(spec, t_s)
            else:
                self._fail_request(original, "replica_failed")

    def _own_timer(self, kind: int, arg: int, t_s: float) -> None:
        self._scrape()
        self._push(t_s + self.spec.scrape_interval_s, _SCRAPE, 0)

    def _fail_request(self, spec: ArrivingRequest, error: str) -> None:
        original = self._arrival.pop(spec.request_id, spec)
        self._fail(spec, original.arrival_s, error)

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
            if self.can_get_replica(self._all_pools if pi is None else (pi,)):
                if spec.arrival_s != now_s or spec.request_id in self._retries:
                    self._arrival.setdefault(spec.request_id, spec)
                self.pending.append((spec, pi))
                return True
            self._fail_request(spec, "no_replica")
            return True
        keys: Sequence[int] | None = None
        if self.router.uses_prefix and spec.hash_blocks is not None:
            keys = spec.hash_blocks.runs(self._block_tokens, spec.prompt_tokens)
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

    def _schedule(self, r: Replica) -> None:
        """Note the time of the replica's next own event (a scan of the live replicas finds the
        due ones: for fleets of tens to hundreds of replicas, cheaper than a heap of entries)."""
        r.next_s = r.server.next_event_s()

    def has_work(self) -> bool:
        if self.pending:
            return True
        return any(r.state in (READY, DRAINING) and r.has_work() for r in self.replicas)

    def advance_to(self, t_s: float) -> None:
        ev = self._events
        while ev and ev[0][0] <= t_s:
            te = ev[0][0]
            if self._advance_replicas(te):
                return
            _, _, kind, arg = heapq.heappop(ev)
            self._timer(kind, arg, te)
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
        if first is not None and self._track_latency:
            original = self._arrival.get(rec.request_id, spec)
            self._note_latencies(first, rec.end_s, original.arrival_s, spec.output_tokens)
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


def _replica_id(r: Replica) -> int:
    return r.replica_id
