"""The gateway in front of a fleet: a :class:`~servecap.sim.server.Server` that wraps a
:class:`~servecap.fleet.pools.Pools` fleet (co-located or disaggregated) and runs the gateway's pure policies
(:mod:`servecap.policy.gateway`) in the order docs/gateway.md gives:

1. **rate limits** — a ``Reject`` ends the request (HTTP 429); a ``Queue`` parks it until its
   ``ready_at_s`` (or, for a concurrency cap, until one of the tenant's requests completes) and
   checks again;
2. **response cache** — a hit completes after the cache's latency and never reaches a replica;
3. **model routing**, then **overflow** on the pools' signals (queue depth: gateway and replica
   queues; p99 TTFT of the pool's requests whose first token came in the last
   ``ttft_window_s``), read as last scraped when the fleet's router scrapes
   (``scrape_interval_ms``);
4. the **gateway queue** (when configured): a request waits at the gateway while its pool is
   *saturated* — every ready replica of the pool holds ``max_num_seqs`` (its engine's batch
   limit) requests sent by the gateway and not yet finished, or no replica is ready — so the
   replicas' own waiting queues stay short and the gateway decides who goes first (tiers) and
   who is shed. Capacity and maximum wait apply per pool;
5. the pool: a fleet pool (its router picks the replica) or an **external provider** (a
   latency distribution, a price, a failure rate; no GPUs);
6. on a failure (the replica crashed and the fleet's ``on_failure`` gives up, no replica could
   ever take it, a provider failed) or a 429 from a pool (the engine's waiting queue refused
   it): **fallback** along the pool's chain within the retry budget, else the request fails.

On completion the limiter is told (post-charged tokens, concurrency released) and the cache
stores the answer. Each request ends in exactly one outcome
(:mod:`servecap.fleet.gateway_outcomes`). With an empty ``gateway:`` section every request goes
straight to the fleet's router at its arrival: the records are the fleet's own (a test pins it).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from servecap.errors import ServecapError
from servecap.fleet.gateway_outcomes import GatewayCounts, GatewayStats
from servecap.fleet.pools import READY, Pools
from servecap.policy.gateway import (
    CacheHit,
    ExternalProvider,
    Fallback,
    GatewayQueue,
    Overflow,
    PoolSignals,
    Queue,
    Reject,
    Route,
)
from servecap.policy.gateway.config import GatewayConfig, build_gateway
from servecap.results.record import RequestRecord
from servecap.sim.server import ArrivingRequest, FinishedRequest

_RETRY, _DONE, _PROVIDER_FAILED = 0, 1, 2
_INF = float("inf")
# the fleet's errors a fallback may retry, as the fallback policy's failure kinds
_FAILURE_KIND = {"replica_failed": "failed", "no_replica": "failed", "rejected": "rate_limited"}


def _record(
    req: ArrivingRequest,
    *,
    first_token_s: float | None = None,
    end_s: float | None = None,
    queue_time_s: float | None = None,
    error: str | None = None,
) -> RequestRecord:
    """The request's record as the gateway ends it (times from its original arrival)."""
    return RequestRecord(
        request_id=req.request_id,
        arrival_s=req.arrival_s,
        prompt_tokens=req.prompt_tokens,
        output_tokens=req.output_tokens,
        first_token_s=first_token_s,
        end_s=end_s,
        queue_time_s=queue_time_s,
        error=error,
        user_id=req.user_id,
        turn=req.turn,
    )


@dataclass(slots=True)
class _Flight:
    """A request the gateway has sent to a pool and not yet seen end."""

    req: ArrivingRequest
    pool: str | None  # None: any fleet pool (no model routing)


class _TtftWindow:
    """One pool's TTFT samples for the overflow signal, in the order they were taken: appended at
    the end, dropped from the front while the front's first token is older than the window (as a
    deque of (first token, TTFT) pairs was). The TTFTs sit in one numpy array, so a p99 reads a
    slice of it; copying the pairs into a new array on every read of the signals (each admission)
    was most of a gateway-fronted run's time. The p99 is kept until a sample comes or goes."""

    __slots__ = ("_at_s", "_head", "_p99", "_tail", "_ttft_s")

    def __init__(self) -> None:
        self._at_s: deque[float] = deque()
        self._ttft_s = np.empty(64)
        self._head = 0  # the live samples: _ttft_s[_head:_tail]
        self._tail = 0
        self._p99: float | None = None

    def append(self, at_s: float, ttft_s: float) -> None:
        if self._tail == len(self._ttft_s):  # full: move the live part to the front (grown if need be)
            live = self._ttft_s[self._head : self._tail]
            buf = self._ttft_s if 2 * len(live) <= len(self._ttft_s) else np.empty(2 * len(self._ttft_s))
            buf[: len(live)] = live
            self._ttft_s, self._head, self._tail = buf, 0, len(live)
        self._ttft_s[self._tail] = ttft_s
        self._tail += 1
        self._at_s.append(at_s)
        self._p99 = None

    def p99_since(self, start_s: float) -> float | None:
        """The p99 TTFT of the samples left after dropping those at the front before ``start_s``
        (None when none is left)."""
        at_s = self._at_s
        while at_s and at_s[0] < start_s:
            at_s.popleft()
            self._head += 1
            self._p99 = None
        if not at_s:
            return None
        if self._p99 is None:
            self._p99 = float(np.percentile(self._ttft_s[self._head : self._tail], 99))
        return self._p99


class GatewayStage:
    """The Server seam around ``fleet`` with the gateway ``config`` in front of it."""

    def __init__(
        self,
        fleet: Pools,
        config: GatewayConfig,
        seed: int,
    ) -> None:
        self.fleet = fleet
        self.config = config
        self.policies = build_gateway(config)
        self.rng = random.Random(seed * 1_000_003 + 0x6A7E)
        self.ordered = fleet.ordered
        self._pool_index = {p.name: i for i, p in enumerate(fleet.spec.pools)}
        self.providers: Mapping[str, ExternalProvider] = self.policies.providers
        check_pool_names(
            config, list(self._pool_index), list(self.providers), disaggregated=fleet.spec.is_disaggregated
        )
        self._queues: dict[str | None, GatewayQueue[ArrivingRequest]] = {}
        self._out: list[FinishedRequest] = []
        self._timers: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        # waiting for one of their tenant's requests to complete (a concurrency cap), in order
        self._limit_waiters: dict[str | None, deque[ArrivingRequest]] = {}
        self._waited: set[int] = set()
        self._flights: dict[int, _Flight] = {}
        self._inflight: dict[str | None, int] = {}
        self._ttft: dict[str | None, _TtftWindow] = {}
        self._signals: dict[str, PoolSignals] = {}
        self._signals_at_s = -_INF
        self.counts = GatewayCounts()
        self.provider_requests: dict[str, int] = {}
        self.provider_cost_usd = 0.0
        self.served_ids: set[int] = set()
        self.now_s = 0.0
        self._fleet_t_s = -_INF  # the last time the fleet was brought to

    # -- the server seam ------------------------------------------------------------------------

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        self.counts.arrive(request.tenant)
        before = len(self._out)
        self._admit(request, now_s)
        # refused at the door (a 429 or a full queue): the loop takes its record at once
        return not (
            len(self._out) > before and self._out[-1].request_id == request.request_id and _is_door(self._out[-1])
        )

    def next_event_s(self) -> float:
        t = self.fleet.next_event_s()
        own = self._next_own_s()
        return own if own < t else t

    def has_work(self) -> bool:
        return bool(
            self.fleet.has_work()
            or self._timers
            or self._num_limit_waiters()
            or any(len(q) for q in self._queues.values())
            or self._flights
        )

    def take_finished(self) -> Sequence[FinishedRequest]:
        out = self._out
        if out:
            self._out = []
            out.sort(key=_end_key)
        return out

    def advance_to(self, t_s: float) -> None:
        while True:
            te = self._next_own_s()
            # the fleet's own timers (a replica becoming ready) free gateway-queue slots too
            if any(len(q) for q in self._queues.values()):
                te = min(te, self.fleet.next_timer_s())
            if te > t_s:
                self._advance_fleet(t_s)
                if not (self.ordered and self._out):
                    self.now_s = t_s
                return
            self._advance_fleet(te)
            if self.ordered and self._out:
                return
            self._own_events(te)
            if self.ordered and self._out:
                return

    # -- events ---------------------------------------------------------------------------------

    def _next_own_s(self) -> float:
        t = self._timers[0][0] if self._timers else _INF
        for q in self._queues.values():
            to = q.next_timeout_s()
            if to is not None:
                to = math.nextafter(to, _INF)  # at exactly the maximum wait it still waits
                if to < t:
                    t = to
        if self._num_limit_waiters() or any(len(q) for q in self._queues.values()):
            # a completion may release a waiter: step the fleet one event at a time (work that
            # starts at the time the fleet was brought to starts on the next call: just after)
            fe = self.fleet.next_event_s()
            if fe <= self._fleet_t_s:
                fe = math.nextafter(self._fleet_t_s, _INF)
            t = min(t, fe)
        return t

    def _advance_fleet(self, t_s: float) -> None:
        self._fleet_t_s = t_s
        self.fleet.advance_to(t_s)
        self._take_fleet(t_s)
        self._release(t_s)

    def _own_events(self, t_s: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= t_s:
            _, _, kind, payload = heapq.heappop(timers)
            if kind == _RETRY:
                self._admit(payload, t_s)
            elif kind == _DONE:
                req, record, served_by = payload
                self._end(req, record, t_s, served_by)
            else:
                req, pool = payload
                self._on_failure(req, pool, "provider_failed", "failed", t_s)
        self._release(t_s)

    def _push(self, t_s: float, kind: int, payload: Any) -> None:
        heapq.heappush(self._timers, (t_s, self._seq, kind, payload))
        self._seq += 1

    # -- stages ---------------------------------------------------------------------------------

    def _admit(self, req: ArrivingRequest, now_s: float) -> None:
        """Rate limits, then the cache, then routing."""
        limiter = self.policies.limiter
        if limiter is not None:
            d = limiter.check(req, now_s, self.rng)
            if isinstance(d, Reject):
                self._reject(req, "rate_limited_" + d.reason, now_s)
                return
            if isinstance(d, Queue):
                if req.request_id not in self._waited:
                    self._waited.add(req.request_id)
                    self.counts.decision(req.tenant, "queued_for_limit")
                if d.ready_at_s is None:
                    self._limit_waiters.setdefault(req.tenant, deque()).append(req)
                else:  # strictly later: a bucket's refill time can round to just short of it
                    self._push(max(d.ready_at_s, math.nextafter(now_s, _INF)), _RETRY, req)
                return
        cache = self.policies.cache
        if cache is not None:
            hit = cache.lookup(req, now_s, self.rng)
            if hit is not None:
                self._cache_hit(req, hit, now_s)
                return
        pool: str | None = None
        router = self.policies.router
        if router is not None:
            pool = router.route(req, self.rng).pool
        if pool is not None and self.policies.overflow:
            signals = self._pool_signals(now_s)
            for policy in self.policies.overflow:
                d2 = policy.decide(Route(pool), signals)
                if isinstance(d2, Overflow):
                    self.counts.decision(req.tenant, "overflowed")
                    pool = d2.to_pool
                    break
        self._send(req, pool, now_s)

    def _cache_hit(self, req: ArrivingRequest, hit: CacheHit, now_s: float) -> None:
        if hit.false_hit:
            self.counts.decision(req.tenant, "false_hit")
        if hit.stale_risk:
            self.counts.decision(req.tenant, "stale_risk")
        end = now_s + hit.latency_s
        record = _record(req, first_token_s=end, end_s=end, queue_time_s=0.0)
        self._flights[req.request_id] = _Flight(req, None)
        self._push(end, _DONE, (req, record, "cache_hit_" + hit.kind))

    def _send(self, req: ArrivingRequest, pool: str | None, now_s: float) -> None:
        """To a provider, to the gateway queue (pool saturated), or to the fleet's router."""
        if pool is not None and pool in self.providers:
            self._to_provider(req, pool, now_s)
            return
        if self.policies.queue is not None and self._saturated(pool):
            q = self._queues.get(pool)
            if q is None:
                q = self._queues[pool] = GatewayQueue(self.policies.queue.capacity, self.policies.queue.max_wait_s)
            accepted, shed = q.push(req, self.policies.tiers.of(req), now_s)
            for s in shed:
                self._reject(s, "shed", now_s)
            if not accepted:
                self._reject(req, "queue_full", now_s)
            else:
                self.counts.decision(req.tenant, "queued_at_gateway")
            return
        self._to_fleet(req, pool, now_s)

    def _to_fleet(self, req: ArrivingRequest, pool: str | None, now_s: float) -> None:
        self._flights[req.request_id] = _Flight(req, pool)
        self._inflight[pool] = self._inflight.get(pool, 0) + 1
        self.fleet.route(req, now_s, pool)
        self._take_fleet(now_s)  # refused at once (a full engine queue, no replica): act now

    def _to_provider(self, req: ArrivingRequest, name: str, now_s: float) -> None:
        prov = self.providers[name]
        self._flights[req.request_id] = _Flight(req, name)
        ttft = prov.sample_ttft_s(self.rng)
        if prov.fails(self.rng):
            self._push(now_s + ttft, _PROVIDER_FAILED, (req, name))
            return
        record = _record(
            req,
            first_token_s=now_s + ttft,
            end_s=now_s + prov.e2e_s(ttft, req.output_tokens),
            queue_time_s=now_s - req.arrival_s,
        )
        assert record.end_s is not None
        self._push(record.end_s, _DONE, (req, record, "provider:" + name))

    def _saturated(self, pool: str | None) -> bool:
        fleet = self.fleet
        if pool is None:
            members = [r for r in fleet.replicas if r.state == READY]
        else:
            members = [r for r in fleet.by_pool[self._pool_index[pool]] if r.state == READY]
        if not members:
            return True
        slots = sum(fleet.spec.pools[r.pool_index].setup.max_num_seqs for r in members)
        return self._inflight.get(pool, 0) >= slots

    def _release(self, now_s: float) -> None:
        """Hand queued requests to pools with room, and retry requests waiting on a limit."""
        for pool, q in self._queues.items():
            for req in q.expire(now_s):
                self._reject(req, "queue_timeout", now_s)
            while len(q) and not self._saturated(pool):
                nxt = q.pop(now_s)  # (nothing expires inside: expired above, same time)
                if nxt is None:
                    break
                self._to_fleet(nxt, pool, now_s)

    # -- endings --------------------------------------------------------------------------------

    def _take_fleet(self, now_s: float) -> None:
        for rec in self.fleet.take_finished():
            fl = self._flights.get(rec.request_id)
            if fl is None:  # not the gateway's (cannot happen: every request comes through here)
                self._out.append(rec)
                continue
            self._inflight[fl.pool] = self._inflight.get(fl.pool, 1) - 1
            err = rec.error
            if err is None:
                first = rec.first_token_s
                if first is not None and self.policies.overflow:
                    window = self._ttft.get(fl.pool)
                    if window is None:
                        window = self._ttft[fl.pool] = _TtftWindow()
                    window.append(first, first - rec.arrival_s)
                end = rec.end_s
                assert end is not None
                self._end(fl.req, rec, end, "fleet")
                continue
            kind = _FAILURE_KIND.get(err)
            t = max(now_s, rec.end_s or 0.0)
            if kind is None:  # too long for the model: no pool would take it
                self._fail(fl.req, rec, t)
            else:
                self._on_failure(fl.req, fl.pool, err, kind, t, rec)

    def _on_failure(
        self,
        req: ArrivingRequest,
        pool: str | None,
        error: str,
        kind: str,
        now_s: float,
        rec: FinishedRequest | None = None,
    ) -> None:
        fb = self.policies.fallback
        if fb is not None and pool is not None and kind in fb.on:
            d = fb.on_failure(
                req.request_id, pool, "failed" if kind == "failed" else "rate_limited", len(self._flights)
            )
            if isinstance(d, Fallback):
                self.counts.decision(req.tenant, "fell_back")
                self._flights.pop(req.request_id, None)
                self._send(req, d.to_pool, now_s)
                return
        if rec is None:
            rec = _record(req, error=error)
        self._fail(req, rec, now_s)

    def _fail(self, req: ArrivingRequest, rec: FinishedRequest, now_s: float) -> None:
        self._finish(req, now_s, 0)
        self.counts.outcome(req.tenant, "failed")
        self._out.append(rec)

    def _end(self, req: ArrivingRequest, rec: FinishedRequest, now_s: float, served_by: str) -> None:
        self._finish(req, now_s, req.output_tokens)
        if served_by.startswith("cache_hit_"):
            self.counts.outcome(req.tenant, served_by)
        else:
            self.counts.outcome(req.tenant, "completed")
            self.served_ids.add(req.request_id)
            if self.policies.cache is not None:
                self.policies.cache.store(req, now_s)
            if served_by.startswith("provider:"):
                name = served_by.removeprefix("provider:")
                self.provider_requests[name] = self.provider_requests.get(name, 0) + 1
                self.provider_cost_usd += self.providers[name].cost_usd(req.prompt_tokens, req.output_tokens)
        self._out.append(rec)

    def _finish(self, req: ArrivingRequest, now_s: float, output_tokens: int) -> None:
        self._flights.pop(req.request_id, None)
        if self.policies.limiter is not None:
            self.policies.limiter.complete(req, now_s, output_tokens)
            waiting = self._limit_waiters.get(req.tenant)
            while waiting:  # the oldest first, until one has to wait again
                w = waiting.popleft()
                self._admit(w, now_s)
                if waiting and waiting[-1] is w:
                    waiting.pop()
                    waiting.appendleft(w)
                    break
        if self.policies.fallback is not None:
            self.policies.fallback.done(req.request_id)

    def _reject(self, req: ArrivingRequest, outcome: str, now_s: float) -> None:
        self.counts.outcome(req.tenant, outcome)
        # a request the limits admitted and the queue then refused gives back its slot
        self._finish(req, now_s, 0)
        self._out.append(_record(req, error=outcome))

    # -- signals --------------------------------------------------------------------------------

    def _pool_signals(self, now_s: float) -> Mapping[str, PoolSignals]:
        interval = self.fleet.spec.scrape_interval_s
        if interval > 0 and now_s - self._signals_at_s < interval:
            return self._signals
        window = self.fleet.spec.ttft_window_s
        out: dict[str, PoolSignals] = {}
        for name, pi in self._pool_index.items():
            depth = int(self.fleet.signal(pi, "num_requests_waiting", now_s, window))
            q = self._queues.get(name)
            depth += len(q) if q is not None else 0
            samples = self._ttft.get(name)
            p99 = samples.p99_since(now_s - window) if samples is not None else None
            out[name] = PoolSignals(depth, p99)
        self._signals, self._signals_at_s = out, now_s
        return out

    def _num_limit_waiters(self) -> int:
        return sum(len(w) for w in self._limit_waiters.values())

    def queued(self) -> int:
        """Requests waiting at the gateway (its queue and the rate limits)."""
        return (
            sum(len(q) for q in self._queues.values())
            + self._num_limit_waiters()
            + sum(1 for t in self._timers if t[2] == _RETRY)
        )

    def stats(self) -> GatewayStats:
        return GatewayStats(
            outcomes_by_tenant={t: dict(c) for t, c in sorted(self.counts.outcomes.items())},
            decisions_by_tenant={t: dict(c) for t, c in sorted(self.counts.decisions.items())},
            arrivals_by_tenant=dict(sorted(self.counts.arrivals.items())),
            provider_requests=dict(self.provider_requests),
            provider_cost_usd=self.provider_cost_usd,
            served_ids=frozenset(self.served_ids),
        )


def pool_references(config: GatewayConfig) -> list[tuple[str, str]]:
    """Every pool (or provider) name the gateway's config gives, as (field, name)."""
    refs: list[tuple[str, str]] = []
    r = config.routing
    if r is not None:
        if r.kind == "class":
            refs += [(f"gateway.routing.pools.{k}", v) for k, v in r.pools.items()]
            refs.append(("gateway.routing.default", r.default))
        elif r.kind == "prompt_length":
            refs += [(f"gateway.routing.steps[{i}].pool", s.pool) for i, s in enumerate(r.steps)]
            refs.append(("gateway.routing.default", r.default))
        else:
            refs += [(f"gateway.routing.shares.{k}", k) for k in r.shares]
    for i, o in enumerate(config.overflow):
        refs += [(f"gateway.overflow[{i}].from_pool", o.from_pool), (f"gateway.overflow[{i}].to_pool", o.to_pool)]
    if config.fallback is not None:
        for k, chain in config.fallback.chains.items():
            refs.append((f"gateway.fallback.chains.{k}", k))
            refs += [(f"gateway.fallback.chains.{k}[{j}]", v) for j, v in enumerate(chain)]
    return refs


def check_pool_names(
    config: GatewayConfig, pools: Sequence[str], providers: Sequence[str], *, disaggregated: bool = False
) -> None:
    """Every pool the gateway names is a pool of the fleet or an external provider; in front of
    a disaggregated fleet (its requests enter at the prefill pools as a whole) only providers."""
    known = [*pools, *providers]
    clash = sorted(set(pools) & set(providers))
    if clash:
        raise ServecapError("gateway.providers.name", clash[0], "a provider cannot share a pool's name")
    for field, name in pool_references(config):
        if disaggregated and name in pools:
            raise ServecapError(
                field, name, "a disaggregated fleet takes requests at its prefill pools as a whole; name a provider"
            )
        if name not in known:
            from servecap.errors import did_you_mean

            raise ServecapError(
                field, name, f"no such pool or provider; one of {', '.join(known)}" + did_you_mean(name, known)
            )


_DOOR = frozenset(
    {
        "rate_limited_rpm",
        "rate_limited_tpm",
        "rate_limited_concurrency",
        "rate_limited_daily_budget",
        "queue_full",
    }
)


def _is_door(rec: FinishedRequest) -> bool:
    return rec.error in _DOOR


def _end_key(r: FinishedRequest) -> float:
    e = r.end_s
    return -1.0 if e is None else e
