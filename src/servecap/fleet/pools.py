"""The one fleet core: replicas in pools, each pool with a role, its autoscaler, its cold starts,
its failures and its replicas' lifecycle, on one simulated clock.

A pool's role (:data:`servecap.fleet.pd_spec.ROLES`) is ``both`` (a co-located replica: it
prefills and decodes), ``prefill`` or ``decode``. What every layout shares is written here once:

- the lifecycle (requested -> starting -> ready -> draining -> stopped, or failed): a replica
  asked for at ``t`` is ready at ``t`` + one draw of its pool's cold start
  (:func:`servecap.fleet.lifecycle.cold_start_draw_s`); it is billed from ``t``;
- failures: a ready replica of a pool with ``mtbf_s`` crashes after an exponential time, one
  of a pool with ``crash_at_s`` at each time given; the deployment controller replaces a crashed
  ready replica at once (a new cold start); the requests it held are retried while the
  fleet's budget lasts (``on_failure: retry``, ``max_retries``), else end ``replica_failed``;
- autoscaling: every pool with an ``autoscaler`` runs the policy its settings name from the
  registry (:data:`servecap.policy.autoscalers.AUTOSCALERS`: every policy and preset) on the
  signal it names (:func:`servecap.policy.signals.signal_value`, as the monitor computes it,
  counting the requests waiting at the router for the pool); a scale-up starts replicas, a
  scale-down cancels starting replicas first and drains the least loaded ready ones
  (:func:`servecap.fleet.lifecycle.scale_down_choice`); any waiting work brings a pool up from
  zero (KEDA's activation);
- the windowed latency signals (p99 TTFT, p99 ITL), kept only where an autoscaler reads them;
- the outcome of a request no replica could take (``no_replica``) or that failed with its
  replica (``replica_failed``), and the seam's ``take_finished`` (sorted by end time).

What a layout adds (the subclasses): the co-located fleet (:class:`servecap.fleet.fleet.Fleet`,
role ``both``) routes a request to one replica; the disaggregated one
(:class:`servecap.fleet.pd.fleet.PdFleet`, roles ``prefill`` and ``decode``) adds the hand-off
— the KV link, the decode side's admission (a request waits on its decode replica until room
for its KV can be reserved: a status of the replica, ``prealloc``), the transfer's landing.
:func:`servecap.fleet.layouts.make_fleet` builds the one a
:class:`~servecap.fleet.spec.FleetSpec` describes.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from typing import Final

import numpy as np

from servecap.fleet.lifecycle import (
    DRAINING,
    FAILED,
    READY,
    STARTING,
    STOPPED,
    cold_start_draw_s,
    scale_down_choice,
)
from servecap.fleet.recent import RecentValues, mean_itl_s
from servecap.fleet.shared_kv_store import SharedKvStores
from servecap.fleet.spec import FleetSpec, Pool
from servecap.policy.autoscalers import Autoscaler, make_autoscaler
from servecap.policy.signals import signal_value
from servecap.results.record import RequestRecord
from servecap.sim.engine import Engine
from servecap.sim.server import ArrivingRequest, FinishedRequest
from servecap.sim.step_time import StepTimeModel

__all__ = ["DRAINING", "FAILED", "READY", "STARTING", "STOPPED", "PoolReplica", "Pools"]

# the core's timers; a layout numbers its own from OWN_TIMER
READY_TIMER: Final = 0
CRASH_TIMER: Final = 1
TICK_TIMER: Final = 2
OWN_TIMER: Final = 3
_INF: Final = float("inf")


class PoolReplica:
    """One replica of a pool: an engine, its lifecycle and the
    :class:`~servecap.policy.view.ReplicaView` routers and autoscalers read. It keeps what the
    results need: the time-average of requests in it (its ``area_s`` — the integral of requests
    in it over time — equals the sum of their times in it, ``sojourn_s``: Little's law per
    replica), the requests that finished here, and its billable span (``requested_s`` to
    ``stopped_s``). ``prealloc``: the requests waiting on a decode replica for room for their
    KV (empty in the other roles)."""

    def __init__(
        self, replica_id: int, pool: str, pool_index: int, role: str, engine: Engine, requested_s: float
    ) -> None:
        self.replica_id = replica_id
        self.pool = pool
        self.pool_index = pool_index
        self.role = role
        self.engine = engine
        self.state = STARTING
        self.requested_s = requested_s
        self.ready_s: float | None = None
        self.drain_s: float | None = None
        self.stopped_s: float | None = None
        self.routed = 0
        self.completed = 0
        self.served_ids: list[int] = []  # requests that finished here (kept unless streaming)
        self.area_s = 0.0  # ∫ requests in the replica dt
        self.sojourn_s = 0.0  # Σ (end - added) over its requests
        self.t_last_s = requested_s
        self.last_finish_s = requested_s
        self.next_s = _INF  # the time of its engine's next event, as the fleet last read it
        self.prealloc: deque[int] = deque()  # decode: ids waiting for room, in order

    # -- the view ---------------------------------------------------------------------------------

    @property
    def is_ready(self) -> bool:
        return self.state == READY

    @property
    def num_waiting(self) -> int:
        return self.engine.num_waiting + len(self.prealloc)

    @property
    def num_running(self) -> int:
        return self.engine.num_running

    @property
    def num_inflight_tokens(self) -> int:
        return self.engine.num_inflight_tokens

    @property
    def kv_usage(self) -> float:
        return self.engine.kv_usage

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        return self.engine.prefix_hit_blocks(block_keys)

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        return self.engine.prefix_tier_blocks(block_keys)

    # -- what the results read --------------------------------------------------------------------

    def has_work(self) -> bool:
        raise NotImplementedError

    def billed_s(self, horizon_s: float) -> float:
        end = self.stopped_s if self.stopped_s is not None else max(horizon_s, self.requested_s)
        return end - self.requested_s

    def busy_s(self) -> float:
        return self.engine.busy_s


class Pools:
    """The core every layout runs on (see the module doc); a layout supplies its replicas
    (:meth:`_new_replica`), its routing lists (:meth:`_listed`, :meth:`_unlisted`), its
    requests waiting at the router (:meth:`_release_pending`, :meth:`num_pending`), what a
    stopped replica's requests become (:meth:`_stop`, :meth:`_evict`) and its own timers
    (:meth:`_own_timer`)."""

    def __init__(self, spec: FleetSpec, seed: int, salt: int, *, ordered: bool, keep_ids: bool) -> None:
        self.spec = spec
        # ordered: replica events in time order, returning right after the first step that
        # finished requests, as the seam asks (a closed-loop source schedules the next turn from it)
        self.ordered = ordered
        # keep_ids: replicas list the requests they served (a sketched run keeps none: it
        # notes the pool of each finished request until its sink takes it, ``pool_of``)
        self.keep_ids = keep_ids
        self.pool_of: dict[int, int] | None = None if keep_ids or len(spec.pools) < 2 else {}
        self.rng = np.random.default_rng([seed, salt])
        self.replicas: list[PoolReplica] = []
        self.by_pool: list[list[PoolReplica]] = [[] for _ in spec.pools]
        self.roles = [p.role for p in spec.pools]
        self.autoscalers: list[Autoscaler | None] = [
            make_autoscaler(p.autoscaler) if p.autoscaler is not None else None for p in spec.pools
        ]
        self._events: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._step_models: list[StepTimeModel | None] = [None for _ in spec.pools]
        self.kv_stores = SharedKvStores()  # the shared remote KV store(s) every replica reads
        self.now_s = 0.0  # the time of the last advance_to (the recorder's clock)
        self._out: list[FinishedRequest] = []
        self.retried = 0
        # the requested GPUs over time, as (time, change): what the bill integrates
        self.gpu_log: list[tuple[float, int]] = []
        self.scale_events: list[tuple[float, str, int, int]] = []  # (time, pool, from, to)
        # the windowed autoscaling signals' values, kept only for an autoscaler that reads them
        self.recent_ttft = RecentValues()
        self.recent_itl = RecentValues()
        signals = {p.autoscaler.signal for p in spec.pools if p.autoscaler is not None}
        self._track_ttft = "p99_ttft_s" in signals
        self._track_itl = "p99_itl_s" in signals

    def _start_pools(self) -> None:
        """The pools' initial replicas (ready at 0), autoscaler ticks and scheduled crashes."""
        for pi, pool in enumerate(self.spec.pools):
            for _ in range(pool.replicas):
                self._start_replica(pi, 0.0, instant=True)
            if pool.autoscaler is not None:
                self._push(pool.autoscaler.interval_s, TICK_TIMER, pi)
            for t in pool.crash_at_s:
                self._push(t, CRASH_TIMER, -1 - pi)  # a ready replica of pool pi, chosen then

    # -- the layout's part ----------------------------------------------------------------------

    def _new_replica(self, pi: int, replica_id: int, engine: Engine, now_s: float) -> PoolReplica:
        raise NotImplementedError

    def _listed(self, r: PoolReplica) -> None:
        """``r`` became ready: list it where the layout routes."""
        raise NotImplementedError

    def _unlisted(self, r: PoolReplica) -> None:
        """``r`` stopped taking requests (draining, stopped or failed): route no more to it."""
        raise NotImplementedError

    def _release_pending(self, r: PoolReplica, now_s: float) -> None:
        """``r`` became ready: route the requests waiting for a replica of its pool."""
        raise NotImplementedError

    def num_pending(self, pi: int) -> int:
        """Requests waiting at the router for a replica of pool ``pi``."""
        raise NotImplementedError

    def num_pending_total(self) -> int:
        raise NotImplementedError

    def _close(self, r: PoolReplica, t_s: float, state: str) -> list[int]:
        """Stop (or fail) ``r``'s engine side at ``t_s``; the ids of the requests it held."""
        raise NotImplementedError

    def _evict(self, r: PoolReplica, t_s: float) -> None:
        """``r`` crashed at ``t_s``: retry what it held (:meth:`may_retry`) or fail it."""
        raise NotImplementedError

    def _own_timer(self, kind: int, arg: int, t_s: float) -> None:
        raise NotImplementedError

    # the server seam (:class:`~servecap.sim.server.Server`), and the gateway stage's entry

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        raise NotImplementedError

    def route(self, request: ArrivingRequest, now_s: float, pool: str | None = None) -> bool:
        """Route ``request`` at ``now_s`` to a replica of ``pool`` (any: None) — the entry a
        gateway stage in front of the router uses; False when refused (its record comes back
        from take_finished)."""
        raise NotImplementedError

    def advance_to(self, t_s: float) -> None:
        raise NotImplementedError

    def next_event_s(self) -> float:
        raise NotImplementedError

    def has_work(self) -> bool:
        raise NotImplementedError

    # -- lifecycle ------------------------------------------------------------------------------

    def _push(self, t_s: float, kind: int, arg: int) -> None:
        heapq.heappush(self._events, (t_s, self._seq, kind, arg))
        self._seq += 1

    def _start_replica(self, pi: int, now_s: float, *, instant: bool = False) -> PoolReplica:
        pool = self.spec.pools[pi]
        engine = Engine(
            pool.setup, step_model=self._step_models[pi], kv_remote=self.kv_stores.store_for(pool.setup.kv_tiers)
        )
        self._step_models[pi] = engine.model  # one price cache per pool
        r = self._new_replica(pi, len(self.replicas), engine, now_s)
        self.replicas.append(r)
        self.by_pool[pi].append(r)
        self.gpu_log.append((now_s, pool.gpus_per_replica))
        if instant:
            self._become_ready(r, now_s)
        else:
            self._push(now_s + self.cold_start_s(pool), READY_TIMER, r.replica_id)
        return r

    def cold_start_s(self, pool: Pool) -> float:
        """One draw of the pool's cold start (:func:`servecap.fleet.lifecycle.cold_start_draw_s`)."""
        return cold_start_draw_s(pool, self.rng)

    def _become_ready(self, r: PoolReplica, now_s: float) -> None:
        r.state = READY
        r.ready_s = now_s
        r.t_last_s = now_s
        self._listed(r)
        pool = self.spec.pools[r.pool_index]
        if pool.mtbf_s is not None:
            self._push(now_s + float(self.rng.exponential(pool.mtbf_s)), CRASH_TIMER, r.replica_id)
        self._release_pending(r, now_s)

    def _stop(self, r: PoolReplica, t_s: float, state: str) -> list[int]:
        """Stop (or fail) ``r`` at ``t_s`` (its bill ends); the ids of the requests it held."""
        self.gpu_log.append((t_s, -self.spec.pools[r.pool_index].gpus_per_replica))
        held = self._close(r, t_s, state)
        self._unlisted(r)
        r.engine.drop_cache()  # a stopped replica's prefix index is memory the run would keep
        return held

    def _drain(self, r: PoolReplica, now_s: float) -> None:
        r.state = DRAINING
        r.drain_s = now_s
        self._unlisted(r)
        if not r.has_work():
            self._stop(r, now_s, STOPPED)

    def _crash(self, r: PoolReplica, t_s: float) -> None:
        if r.state not in (READY, DRAINING):
            return
        replace = r.state == READY  # a draining replica was on its way out anyway
        self._evict(r, t_s)
        if replace:
            self._start_replica(r.pool_index, t_s)  # the deployment controller replaces it

    def may_retry(self, tries: int) -> bool:
        """A crashed replica's request that has been tried ``tries`` times again goes back to
        the router (counted in ``retried``): the fleet's ``on_failure`` and retry budget."""
        if self.spec.on_failure == "retry" and tries < self.spec.max_retries:
            self.retried += 1
            return True
        return False

    def _fail(self, spec: ArrivingRequest, arrival_s: float, error: str) -> None:
        self._out.append(
            RequestRecord(
                request_id=spec.request_id,
                arrival_s=arrival_s,
                prompt_tokens=spec.prompt_tokens,
                output_tokens=spec.output_tokens,
                error=error,
                user_id=spec.user_id,
                turn=spec.turn,
            )
        )

    def can_get_replica(self, pools: Sequence[int]) -> bool:
        """A replica of one of ``pools`` is starting, or an autoscaler may start one."""
        for pi in pools:
            if self.autoscalers[pi] is not None:
                return True
            for r in self.by_pool[pi]:
                if r.state == STARTING:
                    return True
        return False

    def _timer(self, kind: int, arg: int, t_s: float) -> None:
        """Handle the timer ``(kind, arg)`` due at ``t_s`` (the layout brought its replicas there)."""
        if kind == READY_TIMER:
            r = self.replicas[arg]
            if r.state == STARTING:
                self._become_ready(r, t_s)
        elif kind == CRASH_TIMER:
            if arg >= 0:
                self._crash(self.replicas[arg], t_s)
            else:
                for r in self.by_pool[-1 - arg]:
                    if r.state == READY:
                        self._crash(r, t_s)
                        break
        elif kind == TICK_TIMER:
            self._autoscale(arg, t_s)
        else:
            self._own_timer(kind, arg, t_s)

    def next_timer_s(self) -> float:
        """The time of the fleet's next own timer (a replica becoming ready, a crash, an
        autoscaler tick, a layout's own); ``inf`` when none is set."""
        return self._events[0][0] if self._events else _INF

    def take_finished(self) -> Sequence[FinishedRequest]:
        out = self._out
        if out:
            self._out = []
            if len(out) > 1:
                out.sort(key=_end_key)
        return out

    # -- autoscaling ----------------------------------------------------------------------------

    def _note_latencies(self, first_s: float, end_s: float | None, arrival_s: float, output_tokens: int) -> None:
        """A request's first token (and end): the windowed signals an autoscaler reads."""
        if self._track_ttft:
            self.recent_ttft.add(first_s, first_s - arrival_s)
        if self._track_itl and end_s is not None:
            itl = mean_itl_s(first_s, end_s, output_tokens)
            if itl is not None:
                self.recent_itl.add(end_s, itl)

    def p99_ttft_s(self, now_s: float, window_s: float) -> float:
        """p99 TTFT of the requests whose first token came in the last ``window_s``."""
        return self.recent_ttft.p99(now_s, window_s)

    def p99_itl_s(self, now_s: float, window_s: float) -> float:
        """p99 mean inter-token latency of the requests that finished in the last ``window_s``."""
        return self.recent_itl.p99(now_s, window_s)

    def signal(self, pi: int, name: str, now_s: float, window_s: float) -> float:
        """Signal ``name`` of pool ``pi`` (:func:`servecap.policy.signals.signal_value`, as the
        monitor computes it), counting the requests waiting at the router for the pool."""
        value = signal_value(
            name,
            self.by_pool[pi],
            lambda: self.p99_ttft_s(now_s, window_s),
            self.num_pending(pi),
            lambda: self.p99_itl_s(now_s, window_s),
        )
        return 0.0 if value is None else value

    def _autoscale(self, pi: int, now_s: float) -> None:
        scaler = self.autoscalers[pi]
        assert scaler is not None
        s = scaler.settings
        self._push(now_s + s.interval_s, TICK_TIMER, pi)
        members = [r for r in self.by_pool[pi] if r.state == STARTING or r.state == READY]
        current = len(members)
        desired = scaler.decide(now_s, current, self.signal(pi, s.signal, now_s, s.window_s))
        if desired == 0 and self.num_pending(pi):
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
            self._drain(r, now_s)

    # -- gauges ---------------------------------------------------------------------------------

    def gauges(self) -> tuple[float, int, int]:
        """Mean KV use of the ready replicas, requests waiting (in them and at the router),
        requests running."""
        kv = 0.0
        waiting = self.num_pending_total()
        running = 0
        n = 0
        for r in self.replicas:
            if r.state == READY:
                n += 1
                kv += r.kv_usage
                waiting += r.num_waiting
                running += r.num_running
        return (kv / n if n else 0.0), waiting, running

    def count(self, state: str) -> int:
        return sum(1 for r in self.replicas if r.state == state)


def _end_key(r: FinishedRequest) -> float:
    e = r.end_s
    return -1.0 if e is None else e
