"""A disaggregated fleet behind the loop's :class:`~servecap.sim.server.Server` seam: prefill
replicas, decode replicas and the KV link between them, on one simulated clock. The pools,
their autoscalers (every registered policy), cold starts, failures and lifecycle are the fleet
core's (:mod:`servecap.fleet.pools`); what this module adds is the hand-off.

A request's path (each step cited in :mod:`servecap.fleet.pd.replica` and
:mod:`servecap.core.kv_transfer`):

1. the P/D router's prefill policy picks a prefill replica; its engine computes the prompt
   (chunked prefill, prefix cache) and samples one token; the prompt's blocks stay held there;
2. the decode policy picks a decode replica (reading every decode replica as it stands then);
   the request waits in that replica's queue until its blocks can be reserved (backpressure:
   meanwhile the prefill side keeps holding the blocks);
3. the transfer books the sender's and the receiver's links (or the one shared link) first come,
   first served, and lands ``latency + occupancy + re-layout`` after it started; with
   ``kv_link.via: store`` the KV goes through the fleet's shared remote store instead
   (:func:`servecap.core.kv_tiers.store_hand_off_s`): the prefill's NIC puts the prompt's blocks
   the store lacks, then the decode side's NIC gets every block of the prompt; the blocks found
   there already (an earlier prefill's, or evicted there by any replica) are the store's hits;
4. the prefill replica releases its blocks; the decode replica's reservation becomes the
   request's own blocks and its engine admits it, computing the last prompt token and
   sampling the first output token (TTFT ends there, as the decode server streams it), then
   decodes the rest.

Failures: a crashed replica's requests (in its engine, held for a transfer, or waiting for room)
start again from step 1 while the fleet's retry budget lasts (``on_failure: retry``,
``max_retries``), else end as ``replica_failed``; the other side's blocks for them are released.

Time order: events that affect other replicas — a prefill step (its finishes start transfers),
a step of a decode replica with requests waiting for room (its finishes make room), a transfer
landing, a cold start, a crash, an autoscaler tick — run one at a time, earliest first; decode
replicas with nobody waiting for room run lazily, brought up to a time when the router reads
them or a transfer lands on them (nothing happens in them otherwise), with runs of decode-only
steps as in a co-located fleet.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Sequence
from typing import Final, cast

import numpy as np

from servecap.core.kv_tiers import store_hand_off_s
from servecap.core.kv_transfer import KvFootprint, TransferShape, exposed_bytes, occupancy_s, transfer_shape
from servecap.errors import ServecapError
from servecap.fleet.pd.link import KvLink, book_transfer
from servecap.fleet.pd.replica import PdReplica
from servecap.fleet.pd.times import PdTimes
from servecap.fleet.pd_spec import KvLinkSpec, PdRouterSpec
from servecap.fleet.pools import DRAINING, FAILED, OWN_TIMER, READY, STOPPED, PoolReplica, Pools
from servecap.fleet.spec import FleetSpec
from servecap.policy.pd_router import PdRouter
from servecap.policy.routers import LeastKv, RouteRequest
from servecap.sim.engine import Engine
from servecap.sim.kv_tiers import LruTier, private_key
from servecap.sim.request_state import RequestState
from servecap.sim.server import ArrivingRequest
from servecap.sim.setup import kv_fit_tokens
from servecap.workload.request import block_keys

# the hand-off's own timer (Final: compiled by mypyc, a constant rather than a global's look-up)
_LANDED: Final = OWN_TIMER
_INF: Final = float("inf")


class _Job:
    """One request's way through the fleet (one try)."""

    def __init__(self, spec: ArrivingRequest) -> None:
        self.spec = spec
        # its numbers, read once (``spec`` is read through its protocol's attributes)
        self.request_id = spec.request_id
        self.prompt_tokens = spec.prompt_tokens
        self.output_tokens = spec.output_tokens
        self.arrival_s = spec.arrival_s
        self.tries = 0
        self.prefill_id = -1
        self.decode_id = -1
        self.prefill_start_s = -1.0
        self.prefill_end_s = -1.0
        self.xfer_ready_s = -1.0
        self.xfer_start_s = -1.0
        self.landed_s = -1.0
        self.landing_s = -1.0  # when this try's transfer lands (an older try's landing is stale)
        self.queue_s: float | None = None
        self.cached = 0
        self.preemptions = 0
        self.nbytes = 0.0
        self.keys: Sequence[int] | None = None  # the prompt's block keys (the prefill side's block size)

    def reset(self) -> None:
        self.prefill_start_s = self.prefill_end_s = self.xfer_ready_s = self.xfer_start_s = self.landed_s = -1.0
        self.landing_s = -1.0
        self.queue_s = None
        self.cached = 0
        self.preemptions = 0
        self.nbytes = 0.0


class _Transfer:
    """What a transfer of one prompt length between two pools costs before queueing (the same
    for every request of that length: worked out once)."""

    def __init__(self, shape: TransferShape, occupancy_s: float) -> None:
        self.shape = shape
        self.nbytes = shape.bytes
        self.occupancy_s = occupancy_s  # unstreamed (streaming's depends on the prefill's time)
        self.relayout_s = shape.relayout_s


class _Decoded:
    """A request the decode side finished, as the loop and the results read it (the fields of
    :class:`~servecap.results.record.RequestRecord`; a plain class costs a fraction of the
    frozen dataclass per request)."""

    def __init__(
        self,
        request_id: int,
        arrival_s: float,
        prompt_tokens: int,
        output_tokens: int,
        first_token_s: float,
        end_s: float,
        cached_prompt_tokens: int,
        preemptions: int,
        queue_time_s: float | None,
        user_id: int | None,
        turn: int,
    ) -> None:
        self.request_id = request_id
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.first_token_s: float | None = first_token_s
        self.end_s: float | None = end_s
        self.cached_prompt_tokens = cached_prompt_tokens
        self.preemptions = preemptions
        self.queue_time_s = queue_time_s
        self.error: str | None = None
        self.user_id = user_id
        self.turn = turn


class PdFleet(Pools):
    def __init__(
        self,
        spec: FleetSpec,
        seed: int,
        *,
        ordered: bool = False,
        keep_ids: bool = True,
        keep_link_log: bool = False,
    ) -> None:
        super().__init__(spec, seed, 0xD15A66, ordered=ordered, keep_ids=keep_ids)
        self.keep_link_log = keep_link_log
        rs = spec.pd_router or PdRouterSpec()
        self.router = PdRouter(rs.prefill, rs.decode, random.Random(seed), dict(spec.router_settings))
        # LeastKv's rule (the first lowest KV use), read natively in _route_decode
        self._decode_least_kv = type(self.router.decode) is LeastKv
        self.link_spec = spec.kv_link or KvLinkSpec()
        ls = self.link_spec  # its numbers, read once
        self._bandwidth, self._latency, self._overhead = ls.bandwidth, ls.latency, ls.overhead
        self._shared, self._streaming = ls.scope == "shared", ls.streaming
        self.shared_link: KvLink | None = (
            KvLink("shared", self.link_spec.bandwidth, keep_log=keep_link_log)
            if self.link_spec.scope == "shared"
            else None
        )
        self._role_pools = {role: [i for i, r in enumerate(self.roles) if r == role] for role in ("prefill", "decode")}
        self.jobs: dict[int, _Job] = {}
        self.pending: dict[str, deque[int]] = {"prefill": deque(), "decode": deque()}  # no ready replica yet
        self.prefilled = 0  # prefills finished (tries included)
        self.transfers = 0
        # the decoded requests' hand-off times, in the order they finished (see times()): seven
        # numbers a request, kept on the sketched path too (the P/D section's percentiles)
        self._done: list[tuple[float, float, float, float, float, float, float]] = []
        # per prefill pool x decode pool: prompt length -> its transfer's shape and occupancy
        self._transfers: list[dict[int, _Transfer]] = [{} for _ in range(len(spec.pools) ** 2)]
        self._max_len = min(p.setup.max_model_len for p in spec.pools)
        # the longest prompt every prefill pool's KV pool holds, and context every decode pool's
        # (a request past them could never run there: refused by name on arrival)
        self._fits = [(p.name, r, kv_fit_tokens(p.setup)) for p, r in zip(spec.pools, self.roles, strict=True)]
        self._prefill_fit = min((f for _, r, f in self._fits if r == "prefill"), default=1 << 62)
        self._decode_fit = min((f for _, r, f in self._fits if r == "decode"), default=1 << 62)
        self.ready_prefill: list[PdReplica] = []
        self.ready_decode: list[PdReplica] = []
        self.live: list[PdReplica] = []
        self.live_prefill: list[PdReplica] = []
        self.live_decode: list[PdReplica] = []
        for pool in spec.pools:
            if pool.kv is None:
                raise ServecapError(f"pools.{pool.name}.kv", None, "a P/D pool needs its KV footprint")
        # the hand-off through the shared remote store (kv_link.via: store)
        self._store: LruTier | None = None
        self.store_blocks = 0  # blocks the decode side got from the store
        self.store_hit_blocks = 0  # of them, there before the prefill put its own
        self.store_put_bytes = 0.0  # bytes the prefills put (all GPUs)
        if ls.via == "store":
            self._store = self._hand_off_store()
        self._start_pools()

    def _hand_off_store(self) -> LruTier:
        """The one store every pool reads and writes (``via: store`` needs it)."""
        stores = {id(self.kv_stores.store_for(p.setup.kv_tiers)): p for p in self.spec.pools}
        store = self.kv_stores.store_for(self.spec.pools[0].setup.kv_tiers)
        if store is None or len(stores) != 1:
            named = ", ".join(
                f"{p.name}={'remote' if p.setup.kv_tiers is not None and p.setup.kv_tiers.tier('remote') else 'none'}"
                for p in self.spec.pools
            )
            raise ServecapError(
                "kv_link.via",
                "store",
                "every P/D pool needs the one shared remote store (remote_kv_tib, prefix caching on, the same "
                f"model and layout); pools: {named}",
            )
        return store

    # -- the core's hooks -----------------------------------------------------------------------

    def _new_replica(self, pi: int, replica_id: int, engine: Engine, now_s: float) -> PoolReplica:
        pool = self.spec.pools[pi]
        kv = pool.kv
        assert kv is not None
        link = KvLink(f"{pool.name}/{replica_id}", self.link_spec.bandwidth * kv.tp, keep_log=self.keep_link_log)
        return PdReplica(replica_id, pool.name, pi, pool.role, engine, kv, link, now_s)

    def _listed(self, r: PoolReplica) -> None:
        self._relist()

    def _unlisted(self, r: PoolReplica) -> None:
        self.router.forget(r.replica_id)
        self._relist()

    def _release_pending(self, r: PoolReplica, now_s: float) -> None:
        waiting = self.pending[r.role]
        self.pending[r.role] = deque()
        for rid in waiting:
            if r.role == "prefill":
                self._route_prefill(self.jobs[rid], now_s)
            else:
                self._route_decode(self.jobs[rid], now_s)

    def num_pending(self, pi: int) -> int:
        return len(self.pending[self.roles[pi]])

    def num_pending_total(self) -> int:
        return len(self.pending["prefill"]) + len(self.pending["decode"])

    def _close(self, r: PoolReplica, t_s: float, state: str) -> list[int]:
        return cast(PdReplica, r).close(t_s, state)

    def _evict(self, r: PoolReplica, t_s: float) -> None:
        self._bring_decoders(t_s)
        for rid in self._stop(r, t_s, FAILED):
            job = self.jobs.get(rid)
            if job is None:
                continue
            self._abandon(job, t_s)
            if self.may_retry(job.tries):
                job.tries += 1
                job.reset()
                self._route_prefill(job, t_s)
            else:
                self._fail_job(job, "replica_failed")

    def _own_timer(self, kind: int, arg: int, t_s: float) -> None:
        self._landed(arg, t_s)

    def _replica(self, replica_id: int) -> PdReplica:
        return cast(PdReplica, self.replicas[replica_id])

    def _ready(self, role: str) -> list[PdReplica]:
        return self.ready_prefill if role == "prefill" else self.ready_decode

    def _relist(self) -> None:
        """The routable replicas of each role and the live (ready or draining) ones, by id."""
        pd = [cast(PdReplica, r) for r in self.replicas]
        self.ready_prefill = [r for r in pd if r.state == READY and r.role == "prefill"]
        self.ready_decode = [r for r in pd if r.state == READY and r.role == "decode"]
        self.live = [r for r in pd if r.state == READY or r.state == DRAINING]
        self.live_prefill = [r for r in self.live if r.role == "prefill"]
        self.live_decode = [r for r in self.live if r.role == "decode"]

    def _abandon(self, job: _Job, t_s: float) -> None:
        """Let go of whatever the live replicas keep for the job's current try."""
        rid = job.request_id
        for waiting in self.pending.values():
            if rid in waiting:
                waiting.remove(rid)
        for i in (job.prefill_id, job.decode_id):
            if i < 0:
                continue
            r = self._replica(i)
            if r.state == READY or r.state == DRAINING:
                r.drop(rid, t_s)
        job.prefill_id = job.decode_id = -1

    def _fail_job(self, job: _Job, error: str) -> None:
        self.jobs.pop(job.request_id, None)
        self._fail(job.spec, job.arrival_s, error)

    # -- the request's path ---------------------------------------------------------------------

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        job = _Job(request)
        self.jobs[request.request_id] = job
        n = len(self._out)
        if request.prompt_tokens + request.output_tokens > self._max_len:
            self._fail_job(job, "too_long")
            return False
        if (
            request.prompt_tokens > self._prefill_fit
            or request.prompt_tokens + request.output_tokens - 1 > self._decode_fit
        ):
            self._too_big(request)
        self._route_prefill(job, now_s)
        return len(self._out) == n

    def _too_big(self, request: ArrivingRequest) -> None:
        """Refuse ``request`` by name: its prompt (prefill) or its context (decode) is longer than
        what a pool's whole KV pool holds."""
        prompt, output = request.prompt_tokens, request.output_tokens
        for name, role, fit in self._fits:
            need = prompt if role == "prefill" else prompt + output - 1
            if need > fit:
                raise ServecapError(
                    "request",
                    request.request_id,
                    f"{prompt} prompt + {output} output tokens need a {role} context of {need} tokens; the whole "
                    f"KV pool of a replica of pool {name!r} holds {fit}: its max_model_len is past what the pool holds",
                )

    def route(self, request: ArrivingRequest, now_s: float, pool: str | None = None) -> bool:
        """A request from a gateway stage: it enters at the prefill pools as any does (the
        gateway names no pool of a P/D fleet: :func:`servecap.fleet.gateway_stage.check_pool_names`)."""
        if pool is not None:
            raise ServecapError("pool", pool, "a disaggregated fleet takes requests at its prefill pools as a whole")
        return self.add(request, now_s)

    def _route_prefill(self, job: _Job, now_s: float) -> None:
        spec = job.spec
        candidates = self._ready("prefill")
        if not candidates:
            if self.can_get_replica(self._role_pools["prefill"]):
                self.pending["prefill"].append(job.request_id)
            else:
                self._fail_job(job, "no_replica")
            return
        bs = candidates[0].engine.block_size
        keys: Sequence[int] | None = None
        if spec.hash_blocks is not None:
            keys = spec.hash_blocks.runs(bs, spec.prompt_tokens)
        elif spec.prefix_group is not None or spec.conversation_id is not None:
            keys = block_keys(
                prefix_group=spec.prefix_group,
                prefix_tokens=spec.prefix_tokens,
                conversation_id=spec.conversation_id,
                total_tokens=job.prompt_tokens + 1,
                block_size=bs,
            )
        prefill = self.router.prefill
        if keys is None and prefill.uses_prefix:
            # PdRouter.choose_prefill's rule, inline: nothing to be affine to, the load decides
            # (the first least loaded)
            best = 0
            eng = candidates[0].engine
            low = eng.num_waiting + eng.num_running
            for i in range(1, len(candidates)):
                eng = candidates[i].engine
                load = eng.num_waiting + eng.num_running
                if load < low:
                    best, low = i, load
            r = candidates[best]
        else:
            loads = None
            if prefill.uses_load or keys is None:  # read here rather than through the views
                loads = [r.engine.num_waiting + r.engine.num_running for r in candidates]
            session = spec.conversation_id if spec.conversation_id is not None else spec.user_id
            req = RouteRequest(job.request_id, job.prompt_tokens, job.output_tokens, session, keys, bs)
            r = candidates[prefill.choose(req, candidates, now_s, loads)]
        job.prefill_id = r.replica_id
        job.keys = keys
        if not r.add(job.request_id, job.prompt_tokens, 1, keys if r.engine.caching else None, spec.priority, now_s):
            self._fail_job(job, "rejected")

    def _prefilled(self, r: PdReplica, s: RequestState) -> None:
        """A prefill finished on ``r``: keep its blocks, pick the decode side."""
        job = self.jobs[s.request_id]
        end = s.end_s
        assert end is not None
        self.prefilled += 1
        job.prefill_end_s = end
        job.prefill_start_s = s.scheduled_s if s.scheduled_s is not None else end
        job.queue_s = None if s.scheduled_s is None else s.scheduled_s - job.arrival_s
        job.cached = s.cached_prompt_tokens
        job.preemptions += s.preemptions
        # its prompt's blocks, less those that other running requests share (a prefix cached
        # blocks: still in use, so not freed by this finish) where the pool is full
        ok = r.hold(s.request_id, min(r.blocks_for(job.prompt_tokens), r.engine.pool.available()))
        assert ok, "a finished prefill's blocks are free"
        self._route_decode(job, end)

    def _route_decode(self, job: _Job, now_s: float) -> None:
        candidates = self._ready("decode")
        if not candidates:
            if self.can_get_replica(self._role_pools["decode"]):
                self.pending["decode"].append(job.request_id)
            else:
                self._abandon(job, now_s)
                self._fail_job(job, "no_replica")
            return
        self._bring_decoders(now_s)
        if self._decode_least_kv:  # LeastKv.choose, reading the engines natively
            best = 0
            low = candidates[0].engine.kv_usage
            for i in range(1, len(candidates)):
                v = candidates[i].engine.kv_usage
                if v < low:
                    best, low = i, v
            d = candidates[best]
        else:
            req = RouteRequest(job.request_id, job.prompt_tokens, job.output_tokens, None, None, 1)
            loads = None
            if self.router.decode.uses_load:
                loads = [r.engine.num_waiting + len(r.prealloc) + r.engine.num_running for r in candidates]
            d = candidates[self.router.decode.choose(req, candidates, now_s, loads)]
        need = d.blocks_for(job.prompt_tokens)
        if need > d.engine.pool.total:
            self._abandon(job, now_s)
            self._fail_job(job, "too_long")
            return
        job.decode_id = d.replica_id
        d.prealloc.append(job.request_id)
        self._try_reserve(d, now_s)

    def _try_reserve(self, d: PdReplica, now_s: float) -> None:
        """Reserve room on ``d`` for the requests waiting for it, in order, and start their
        transfers; the rest wait for the next finish there."""
        eng = d.engine
        while d.prealloc:
            rid = d.prealloc[0]
            job = self.jobs[rid]
            need = d.blocks_for(job.prompt_tokens)
            if eng.pool.available() - need < eng.num_running or not d.hold(rid, need):
                return
            d.prealloc.popleft()
            self._send(job, self._replica(job.prefill_id), d, now_s)

    def _transfer(self, tokens: int, p: PdReplica, d: PdReplica) -> _Transfer:
        """The shape and unstreamed occupancy of a ``tokens``-token prompt's transfer from
        ``p``'s pool to ``d``'s (worked out once per length and pair of pools)."""
        pkv, dkv = p.kv, d.kv
        assert isinstance(pkv, KvFootprint) and isinstance(dkv, KvFootprint)
        shape = transfer_shape(
            pkv.bytes_per_gpu(tokens),
            pkv.tp,
            dkv.tp,
            dkv.bytes_per_gpu(tokens),
            dkv.hbm_bytes_s,
            shared=self._shared,
        )
        x = _Transfer(shape, occupancy_s(shape.bytes, shape, self._bandwidth, self._overhead))
        self._transfers[p.pool_index * len(self.roles) + d.pool_index][tokens] = x
        return x

    def _send(self, job: _Job, p: PdReplica, d: PdReplica, now_s: float) -> None:
        if self._store is not None:
            self._send_via_store(job, self._store, p, d, now_s)
            return
        tokens = job.prompt_tokens
        x = self._transfers[p.pool_index * len(self.roles) + d.pool_index].get(tokens)
        if x is None:
            x = self._transfer(tokens, p, d)
        occ = x.occupancy_s
        if self._streaming:
            shape = x.shape
            rate = self._bandwidth * shape.channels
            send = exposed_bytes(shape.bytes, p.kv.num_layers, rate, job.prefill_end_s - job.prefill_start_s)
            occ = occupancy_s(send, shape, self._bandwidth, self._overhead)
        else:
            send = x.nbytes
        links = (self.shared_link,) if self.shared_link is not None else (p.link, d.link)
        start = book_transfer(links, now_s, occ, send)
        job.xfer_ready_s = now_s
        job.xfer_start_s = start
        job.nbytes = x.nbytes
        self.transfers += 1
        job.landing_s = start + occ + self._latency + x.relayout_s
        self._push(job.landing_s, _LANDED, job.request_id)

    def _send_via_store(self, job: _Job, store: LruTier, p: PdReplica, d: PdReplica, now_s: float) -> None:
        """The hand-off through the shared store (module doc, step 3): the prompt's blocks the
        store lacks are put over the prefill replica's NIC, then every block is got over the
        decode replica's; a block without a prefix key is the request's own (:func:`private_key`)."""
        setup = p.engine.setup.kv_tiers
        assert setup is not None
        bs = p.engine.block_size
        n = -(-job.prompt_tokens // bs)
        keys = job.keys
        nk = 0 if keys is None else min(n, len(keys))
        rid = job.request_id
        block_keys = [keys[i] if keys is not None and i < nk else private_key(rid, i) for i in range(n)]
        hit = sum(1 for k in block_keys if store.holds(k, now_s))
        put_s, get_s = store_hand_off_s(store.tier, n - hit, n, setup.key_bytes_per_gpu)
        gpus = setup.gpus
        put_bytes = (n - hit) * setup.key_bytes_per_gpu * gpus
        get_bytes = n * setup.key_bytes_per_gpu * gpus
        start = now_s
        ready = now_s
        if put_s > 0:
            start = book_transfer((p.link,), now_s, put_s, put_bytes)
            ready = start + put_s
        for k in block_keys:  # the store holds them from the put's end (the LRU order refreshed)
            store.put(k, ready)
        got = book_transfer((d.link,), ready, get_s, get_bytes)
        if put_s <= 0:
            start = got
        self.store_blocks += n
        self.store_hit_blocks += hit
        self.store_put_bytes += put_bytes
        job.xfer_ready_s = now_s
        job.xfer_start_s = start
        job.nbytes = float(get_bytes)
        self.transfers += 1
        job.landing_s = got + get_s
        self._push(job.landing_s, _LANDED, rid)

    def _landed(self, rid: int, t_s: float) -> None:
        job = self.jobs.get(rid)
        if job is None or job.landing_s != t_s:
            return  # the transfer of a try abandoned since (a crash)
        p, d = self._replica(job.prefill_id), self._replica(job.decode_id)
        if p.state not in (READY, DRAINING) or d.state not in (READY, DRAINING):
            return
        self._bring(d, t_s)
        p.release(rid, t_s)
        d.release(rid, t_s)
        job.landed_s = t_s
        if not d.add_transferred(rid, job.prompt_tokens, job.output_tokens, t_s):
            self._abandon(job, t_s)
            self._fail_job(job, "rejected")

    def _decoded(self, d: PdReplica, s: RequestState) -> None:
        job = self.jobs.pop(s.request_id)
        spec = job.spec
        first, end = s.first_token_s, s.end_s
        assert first is not None and end is not None
        if self.keep_ids:
            d.served_ids.append(s.request_id)
        pool_of = self.pool_of
        if pool_of is not None:
            pool_of[s.request_id] = d.pool_index
        self._note_latencies(first, end, job.arrival_s, job.output_tokens)
        self._done.append(
            (
                job.request_id,
                job.prefill_end_s - job.arrival_s,
                job.xfer_ready_s - job.prefill_end_s,
                job.xfer_start_s - job.xfer_ready_s,
                job.landed_s - job.xfer_start_s,
                first - job.landed_s,
                job.nbytes,
            )
        )
        self._out.append(
            _Decoded(
                s.request_id,
                job.arrival_s,
                job.prompt_tokens,
                job.output_tokens,
                first,
                end,
                job.cached,
                job.preemptions + s.preemptions,
                job.queue_s,
                spec.user_id,
                spec.turn,
            )
        )

    # -- running replicas -----------------------------------------------------------------------

    def _run(self, r: PdReplica, t_s: float, *, early: bool) -> bool:
        done = r.advance(t_s, early=early)
        if r.is_prefill:
            for s in done:
                self._prefilled(r, s)
        else:
            for s in done:
                self._decoded(r, s)
        if done and not r.is_prefill and r.prealloc:
            end = done[-1].end_s
            assert end is not None
            self._try_reserve(r, end)
        if r.state == DRAINING and not r.has_work():
            assert r.drain_s is not None
            self._stop(r, max(r.drain_s, r.last_finish_s), STOPPED)
        return bool(done)

    def _bring(self, r: PdReplica, t_s: float) -> None:
        if r.next_s <= t_s:
            self._run(r, t_s, early=False)

    def _bring_decoders(self, t_s: float) -> None:
        """Every live decode replica up to ``t_s`` (the router reads them as they stand then)."""
        for r in self.live_decode:
            if r.next_s <= t_s:
                if r.prealloc:  # its finishes make room, one step at a time
                    while r.next_s <= t_s and self._run(r, t_s, early=True):
                        pass
                else:
                    self._run(r, t_s, early=False)

    def _watched(self, r: PdReplica) -> bool:
        return self.ordered or r.is_prefill or bool(r.prealloc)

    def advance_to(self, t_s: float) -> None:
        ev = self._events
        stuck: list[PdReplica] = []
        while True:
            best: PdReplica | None = None
            best_s = _INF
            ordered = self.ordered
            # the watched replica (see _watched) due first, the lowest id on ties: prefill
            # replicas, then decode ones with requests waiting for room
            for r in self.live if ordered else self.live_prefill:
                t = r.next_s
                if t <= t_s and t < best_s and (not stuck or r not in stuck):
                    best, best_s = r, t
            if not ordered:
                for r in self.live_decode:
                    if r.prealloc:
                        t = r.next_s
                        if (
                            t <= t_s
                            and (t < best_s or (best is not None and t == best_s and r.replica_id < best.replica_id))
                            and (not stuck or r not in stuck)
                        ):
                            best, best_s = r, t
            te_ev = ev[0][0] if ev and ev[0][0] <= t_s else _INF
            if best is None and te_ev == _INF:
                break
            if best is not None and best.next_s < te_ev:
                te = best.next_s
                target = t_s if te >= t_s else min(t_s, math.nextafter(te, _INF))
                finished = self._run(best, target, early=True)
                if finished and self.ordered and not best.is_prefill:
                    self.now_s = te
                    return
                if not finished and best.next_s == te and best.state != STOPPED:
                    stuck.append(best)  # idle until t_s itself: it starts after t_s's arrivals
                continue
            te, _, kind, arg = heapq.heappop(ev)
            self._bring_decoders(te)
            self._timer(kind, arg, te)
            stuck.clear()
        for r in self.live:
            if r.next_s > t_s:
                continue
            if r.is_prefill or r.prealloc:
                # finishes are handled one step at a time (a prefill's blocks are held before its
                # replica's next step starts; a decode replica's finishes make room for the
                # requests waiting for it)
                while r.next_s <= t_s and self._run(r, t_s, early=True):
                    pass
            else:
                # nothing waits on its finishes: the same steps in one go (as _bring_decoders)
                self._run(r, t_s, early=False)
        self.now_s = t_s

    # -- the server seam ------------------------------------------------------------------------

    def next_event_s(self) -> float:
        t = _INF
        for r in self.live:
            if r.next_s < t:
                t = r.next_s
        return t

    def has_work(self) -> bool:
        return bool(self.jobs) or bool(self.pending["prefill"]) or bool(self.pending["decode"])

    # -- results --------------------------------------------------------------------------------

    def links(self) -> list[KvLink]:
        if self.shared_link is not None:
            return [self.shared_link]
        return [cast(PdReplica, r).link for r in self.replicas]

    def times(self) -> PdTimes:
        cols = np.array(self._done, dtype=float).reshape(-1, 7)
        cols = cols[np.argsort(cols[:, 0], kind="stable")]
        return PdTimes(
            request_id=cols[:, 0].astype(np.int64),
            prefill_s=cols[:, 1],
            wait_for_room_s=cols[:, 2],
            link_queue_s=cols[:, 3],
            transfer_s=cols[:, 4],
            decode_first_s=cols[:, 5],
            kv_bytes=cols[:, 6],
        )
