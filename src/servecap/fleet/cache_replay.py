"""The cache-replay fidelity's core: a fleet's prefix caches, routing and queues per request.

The full simulation (:func:`servecap.fleet.simulate_fleet`) steps every replica's engine
iteration by iteration; a block-hash trace of a million requests takes it tens of CPU minutes.
This core instead does one admission per request, in arrival order, and keeps exactly the
bookkeeping that decides the hit rates -- which blocks each replica's GPU prefix cache holds
(least recently used first out, at the engine's block granularity, keyed by the trace's block
hashes as runs), which replica the router picks from those caches and the replicas' loads --
while the latencies come from the engine's step-time model at the batch the request joins.
:mod:`servecap.fleet.cache_replay_run` drives it over a stream of request chunks and states
what it models and what it does not (docs/workload.md, "Cache-replay fidelity").

Per replica: ``queue`` (its cached runs' :class:`Entry` objects in least recently used order, as a
queue of touches: a hit or a publish appends the run's entry, its earlier touches lapse),
``cached`` (blocks in the cache), ``ends`` (a heap of the requests it holds, :class:`Held`: end
time, private blocks and context), ``starts`` (a heap of the start times of those still
waiting). Across replicas an index maps a run key to the bitmask of replicas holding it and of
those holding it at its longest cached length (:class:`RunHolders`, itself the entry of the
replica that first cached the run): a request's leading hits on
every replica come from one walk of its runs, narrowing the mask, instead of one walk per
replica. Every table holds only what some replica's cache holds now, and each queue a few items
per cached run (:meth:`ReplicaCache.tidy`): memory is bounded by the replicas' KV capacities, not
by the trace.

Compiled by mypyc (setup.py) like the engine; the pure-Python module behaves identically.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from servecap.fleet.cache_replay_tiers import ReplayTiers
from servecap.sim.step_time import StepTimeModel

if TYPE_CHECKING:  # a native 64-bit integer when compiled (mypyc); annotations only, so not needed at run time
    from mypy_extensions import i64

ROUTERS = ("precise-prefix", "least-outstanding", "round-robin")
_NEVER = float("inf")  # an empty heap's head
_LISTED_BASES = 1 << 16  # step bases kept in a list by token count, at most (past it: the model's dict)


class ReplicaCache:
    """One replica's prefix cache (runs, LRU order), held requests and queue."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = capacity_blocks
        # the cached runs in least recently used order as a queue of touches: a hit or a publish
        # appends the run's entry (``Entry.pending`` counts its touches in the queue) and the
        # oldest touch that is an entry's last is its place in the LRU order. A touch is one
        # append (no neighbours to relink, so no cache lines of other entries to load)
        self.queue: list[Entry] = []
        self.head = 0  # the queue's first item not yet taken
        self.live = 0  # entries cached (each has its last touch in the queue past ``head``)
        self.cached = 0  # blocks of the runs in the list
        self.private = 0  # blocks of held requests outside the cache (their unkeyed tail, answer)
        self.used = 0  # blocks of held requests (kv usage, as the engine's pool counts held ones)
        self.ends: list[Held] = []  # a heap of the held requests, first to end first (Held.before)
        self.starts: list[float] = []  # start times of held requests still waiting
        # the heads of the two heaps (_NEVER: empty), read by the router for every replica
        self.next_end_s = _NEVER
        self.next_start_s = _NEVER
        self.waiting = 0  # len(starts)
        self.ctx = 0  # context tokens of the held requests (mid-answer)
        self.last_start_s = 0.0  # FCFS: a request starts no earlier than the one before it
        self.prefill_free_s = 0.0  # the replica computes one prompt at a time
        self.served = 0

    def touch(self, e: Entry) -> None:
        """``e`` becomes the most recently used."""
        e.pending += 1
        self.queue.append(e)

    def oldest(self) -> Entry:
        """Take the least recently used entry off the order (there is one: ``live`` > 0)."""
        q = self.queue
        h = self.head
        while True:
            e = q[h]
            h += 1
            e.pending -= 1
            if not e.pending:
                self.head = h
                return e

    def tidy(self) -> None:
        """Bound the queue by the entries cached: drop the taken items once they are half of it,
        and the superseded touches once they outnumber the entries."""
        q = self.queue
        h = self.head
        if len(q) - h > 2 * self.live + 64:
            # in place: each entry's last touch moves down to the next free slot (w <= k)
            w = 0
            for k in range(h, len(q)):
                e = q[k]
                e.pending -= 1
                if not e.pending:
                    q[w] = e
                    w += 1
            del q[w:]
            for k in range(w):
                q[k].pending = 1
            self.head = 0
        elif h > 1024 and 2 * h > len(q):
            del q[:h]
            self.head = 0

    def retire_ends(self, now_s: float) -> None:
        """Requests that ended by ``now_s`` let go of their blocks."""
        while self.next_end_s <= now_s:
            h = self.pop_end()
            self.private -= h.private
            self.used -= h.used
            self.ctx -= h.ctx

    def retire_starts(self, now_s: float) -> None:
        """Requests that started by ``now_s`` stop waiting."""
        starts = self.starts
        while self.next_start_s <= now_s:
            heapq.heappop(starts)
            self.waiting -= 1
            self.next_start_s = starts[0] if starts else _NEVER

    def push_end(self, item: Held) -> None:
        """Hold ``item`` (a binary heap in :meth:`Held.before` order)."""
        ends = self.ends
        ends.append(item)
        pos = len(ends) - 1
        while pos > 0:
            up = (pos - 1) >> 1
            p = ends[up]
            if not item.before(p):
                break
            ends[pos] = p
            pos = up
        ends[pos] = item
        self.next_end_s = ends[0].end_s

    def pop_end(self) -> Held:
        """Let go of the first held request to end (there is one); any min-heap of the same
        order pops the same sequence of values as heapq on ``(end_s, private, used, ctx)``."""
        ends = self.ends
        last = ends.pop()
        n = len(ends)
        if not n:
            self.next_end_s = _NEVER
            return last
        top = ends[0]
        pos = 0
        while True:
            c = 2 * pos + 1
            if c >= n:
                break
            child = ends[c]
            if c + 1 < n:
                right = ends[c + 1]
                if right.before(child):
                    child = right
                    c += 1
            if not child.before(last):
                break
            ends[pos] = child
            pos = c
        ends[pos] = last
        self.next_end_s = ends[0].end_s
        return top

    def push_start(self, start_s: float) -> None:
        starts = self.starts
        heapq.heappush(starts, start_s)
        self.waiting += 1
        self.next_start_s = starts[0]


class Held:
    """A request a replica holds: when it ends, its private blocks (outside the cache), the blocks
    it uses and its context tokens mid-answer."""

    def __init__(self, end_s: float, private: int, used: int, ctx: int) -> None:
        self.end_s = end_s
        self.private = private
        self.used = used
        self.ctx = ctx

    def before(self, o: Held) -> bool:
        """``(end_s, private, used, ctx) < o``'s, as tuples compare (the order heapq kept)."""
        if self.end_s != o.end_s:
            return self.end_s < o.end_s
        if self.private != o.private:
            return self.private < o.private
        if self.used != o.used:
            return self.used < o.used
        return self.ctx < o.ctx


class Entry:
    """Replica ``replica``'s cached blocks of one run: its ``length`` leading blocks and its
    touches in that replica's LRU queue (``pending``); :meth:`holders`, the run's holders."""

    def __init__(self, replica: int, length: int) -> None:
        self.replica = replica
        self.length = length
        self.pending = 0

    def holders(self) -> RunHolders:
        raise NotImplementedError


class Guest(Entry):
    """The entry of a replica that cached a run after its :class:`RunHolders` was made."""

    def __init__(self, replica: int, length: int, run: RunHolders) -> None:
        super().__init__(replica, length)
        self.run = run

    def holders(self) -> RunHolders:
        return self.run


class RunHolders(Entry):
    """Which replicas cache a run: ``any`` (a bitmask), ``full`` (those holding its longest
    cached length, ``longest`` blocks), and each one's :class:`Entry` (``entries``, one slot per
    replica, made when a second replica caches the run: until then its one entry is ``last``).
    It is itself the entry of the replica that first cached the run (``replica``; one object a
    run where one replica caches it, the common case); replicas caching it later get a
    :class:`Guest` entry (the first one's too, should it cache the run again after evicting it).

    Two shortcuts past the hash tables, both checked before use and dropped when the run leaves
    every cache (so they pin nothing): ``last``, the entry a replica last cached or touched (most
    runs have one holder), and ``child``, the holders of the run that followed this one in the
    last prompt walked or published (a session's next turn resends the same runs in the same
    order)."""

    def __init__(self, key: i64, kobj: object, replica: int, length: int) -> None:
        super().__init__(replica, length)
        self.key = key  # the run's key (signed 64 bits: compared unboxed)
        self.kobj = kobj  # the same key as the index's own key object (deleted by identity)
        self.any = 0
        self.full = 0
        self.longest = length
        self.entries: list[Entry | None] | None = None
        self.last: Entry | None = None
        self.child: RunHolders | None = None

    def holders(self) -> RunHolders:
        return self

    def entry(self, i: int) -> Entry | None:
        """Replica ``i``'s entry (None: it does not cache the run)."""
        e = self.last
        if e is not None and e.replica == i:
            return e
        entries = self.entries
        return entries[i] if entries is not None else None

    def add(self, e: Entry, num_replicas: int) -> None:
        """Replica ``e.replica`` caches the run (``e``: its entry, the last one)."""
        entries = self.entries
        if entries is not None:
            entries[e.replica] = e
        elif self.any:  # a second holder: the table of entries starts
            last = self.last
            assert last is not None
            table: list[Entry | None] = [None] * num_replicas
            table[last.replica] = last
            table[e.replica] = e
            self.entries = table
        self.last = e
        self.any |= 1 << e.replica

    def drop(self, e: Entry) -> None:
        """Replica ``e.replica`` no longer caches the run."""
        entries = self.entries
        if entries is not None:
            entries[e.replica] = None
        if self.last is e:
            self.last = None
        bit = 1 << e.replica
        self.any &= ~bit
        self.full &= ~bit


class CacheReplay:
    """Admit requests one by one in arrival order (see the module doc)."""

    def __init__(
        self,
        num_replicas: int,
        capacity_blocks: int,
        block_size: int,
        model: StepTimeModel,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        router: str,
        prefix_weight: float,
        queue_weight: float,
        kv_weight: float,
        caching: bool,
    ) -> None:
        self.replicas = [ReplicaCache(capacity_blocks) for _ in range(num_replicas)]
        self.capacity = capacity_blocks
        self.block_size = block_size
        self.model = model
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.router = router
        self.prefix_weight = prefix_weight
        self.queue_weight = queue_weight
        self.kv_weight = kv_weight
        self.caching = caching
        # run key -> holders, keyed by the key objects of the rows admitted (RunHolders.kobj)
        self.index: dict[object, RunHolders] = {}
        self.next_rr = 0
        self.hit_tokens = 0
        self.query_tokens = 0
        self.requests = 0
        self.peak_index_keys = 0
        self.last_end_s = 0.0
        # KV tiers below GPU memory (fleet/cache_replay_tiers.py), set by the caller; None: GPU only
        self.tiers: ReplayTiers | None = None
        # pricing a step: the roofline's slopes when it has their shape, as the engine prices it
        # (Engine._price: the same operations as StepTimeModel.time, so the same floats), with
        # the bases of the token counts a step can have in a list, else the model's own call
        slopes = model.roofline_slopes()
        self.kv_slope, self.wkv_slope, self.pairs_slope, self.wpairs_slope, self.seqs_slope = (
            slopes if slopes is not None else (0.0, 0.0, 0.0, 0.0, 0.0)
        )
        self.price_mode = 0 if slopes is None else (1 if slopes[1] == 0.0 and slopes[3] == 0.0 else 2)
        listed = max_num_batched_tokens + max_num_seqs + 1 if slopes is not None else 0
        self.bases: list[tuple[float, float, float] | None] = [None] * min(listed, _LISTED_BASES)

    def _price(self, num_tokens: int, num_seqs: int, kv: float, pairs: float, prompt: int) -> float:
        """:meth:`StepTimeModel.time` of a step reading ``kv`` context tokens (full and window
        alike) over ``pairs`` attention pairs, bit for bit (see ``roofline_slopes``)."""
        mode = self.price_mode
        if mode == 0 or num_tokens <= 0:
            return self.model.time(num_tokens, num_seqs, kv, kv, pairs, pairs, prompt)
        bases = self.bases
        if num_tokens < len(bases):
            got = bases[num_tokens]
            if got is None:
                got = self.model.base(num_tokens)
                bases[num_tokens] = got
            b = got
        else:
            b = self.model.base(num_tokens)
        if mode == 1:
            mem = b[0] + self.kv_slope * kv
            comp = b[1] + self.seqs_slope * num_seqs + self.pairs_slope * pairs
        else:
            mem = b[0] + self.kv_slope * kv + self.wkv_slope * kv
            comp = b[1] + self.seqs_slope * num_seqs + self.pairs_slope * pairs + self.wpairs_slope * pairs
        return (mem if mem > comp else comp) + b[2]

    # ---- the index ----------------------------------------------------------------------------

    def _find(self, parent: RunHolders | None, kobj: Any) -> RunHolders | None:
        """The holders of run ``kobj`` (None: no replica caches it), the run after ``parent`` in
        the prompt walked: ``parent.child`` when it is that run and still cached, else the index."""
        if parent is not None:
            c = parent.child
            if c is not None:
                key: i64 = kobj
                if c.key == key and c.any:
                    return c
            held = self.index.get(kobj)
            if held is not None:
                parent.child = held
            return held
        return self.index.get(kobj)

    def _hits(
        self, keys: list[Any], run_ends: list[int], lo: int, hi: int, max_blocks: int, path: list[RunHolders]
    ) -> list[int]:
        """Leading cached blocks of the runs ``keys[lo:hi]`` (ending at ``run_ends[lo:hi]``) on
        every replica (the engine's ``longest_hit_runs``); appends the holders of the runs it
        walked to ``path``."""
        n = len(self.replicas)
        hits = [0] * n
        mask = (1 << n) - 1
        start = 0
        parent: RunHolders | None = None
        for j in range(lo, hi):
            end = run_ends[j]
            if end > max_blocks:
                end = max_blocks
            want = end - start
            if want <= 0:
                break
            held = self._find(parent, keys[j])
            if held is None:
                break
            path.append(held)
            parent = held
            holders = held.any & mask
            dropped = mask & ~holders
            if start > 0:
                while dropped:
                    low = dropped & -dropped
                    hits[low.bit_length() - 1] = start
                    dropped ^= low
            mask = holders
            if not mask:
                break
            ok = held.full & holders if want <= held.longest else 0
            partial = holders & ~ok
            while partial:
                low = partial & -partial
                i = low.bit_length() - 1
                got_e = held.entry(i)
                assert got_e is not None
                got = got_e.length
                if got >= want:
                    ok |= low
                else:
                    hits[i] = start + got
                partial ^= low
            mask = ok
            start = end
            if not mask:
                break
        while mask:
            low = mask & -mask
            hits[low.bit_length() - 1] = start
            mask ^= low
        return hits

    def _hits_on(
        self, i: int, keys: list[Any], run_ends: list[int], lo: int, hi: int, max_blocks: int, path: list[RunHolders]
    ) -> int:
        """Leading cached blocks of the runs ``keys[lo:hi]`` on replica ``i``; appends the holders
        walked to ``path``."""
        start = 0
        parent: RunHolders | None = None
        for j in range(lo, hi):
            end = run_ends[j]
            if end > max_blocks:
                end = max_blocks
            want = end - start
            if want <= 0:
                break
            held = self._find(parent, keys[j])
            if held is None:
                break
            path.append(held)
            parent = held
            e = held.entry(i)
            if e is None:
                break
            if e.length < want:
                return start + e.length
            start = end
        return start

    def _hold(self, i: int, kobj: Any, length: int, held: RunHolders | None) -> RunHolders:
        """Replica ``i`` caches ``length`` leading blocks of run ``kobj`` (its holders ``held``,
        when known) as its most recently used; returns the run's holders."""
        rep = self.replicas[i]
        e: Entry | None = None
        if held is None:
            key: i64 = kobj
            fresh = RunHolders(key, kobj, i, length)
            held = self.index.setdefault(kobj, fresh)
            if held is fresh:  # a new run: its holders are replica i's entry
                e = fresh
                held.add(e, len(self.replicas))
                rep.cached += length
                rep.live += 1
        bit = 1 << i
        if e is None:
            e = held.entry(i)
        if e is None:
            e = Guest(i, length, held)
            held.add(e, len(self.replicas))
            rep.cached += length
            rep.live += 1
        elif e.length < length:
            rep.cached += length - e.length
            e.length = length
        rep.touch(e)
        held.last = e
        if e.length > held.longest:
            held.longest = e.length
            held.full = bit
        elif e.length == held.longest:
            held.full |= bit
        return held

    def _evict(self, i: int, room: int) -> None:
        """Replica ``i`` drops its least recently used runs until ``room`` blocks are free."""
        rep = self.replicas[i]
        while rep.live and rep.cached + rep.private + room > rep.capacity:
            e = rep.oldest()
            rep.live -= 1
            rep.cached -= e.length
            held = e.holders()
            if self.tiers is not None:  # demoted to the tiers below (CPU -> SSD, the shared store)
                self.tiers.demote(i, held.key, e.length)
            held.drop(e)
            if not held.any:
                del self.index[held.kobj]
                held.child = None

    # ---- routing ------------------------------------------------------------------------------

    def _choose(self, now_s: float, hits: list[int] | None, keyed: int, bonus: list[float] | None = None) -> int:
        reps = self.replicas
        # requests that ended by now let go of their blocks, those started stop waiting; the
        # longest and shortest waiting queues
        q_hi = -1
        q_lo = 1 << 62
        for rep in reps:
            if rep.next_end_s <= now_s:
                rep.retire_ends(now_s)
            if rep.next_start_s <= now_s:
                rep.retire_starts(now_s)
            q = rep.waiting
            if q > q_hi:
                q_hi = q
            if q < q_lo:
                q_lo = q
        if self.router == "round-robin":
            i = self.next_rr % len(reps)
            self.next_rr = i + 1
            return i
        if self.router == "least-outstanding":
            best = 0
            low = len(reps[0].ends)
            for j in range(1, len(reps)):
                load = len(reps[j].ends)
                if load < low:
                    low = load
                    best = j
            return best
        # precise-prefix (servecap.policy.routers.PrecisePrefix's score, term by term)
        span = q_hi - q_lo
        best = 0
        best_s = -1.0e300
        cap = float(self.capacity)
        pw, qw, kw = self.prefix_weight, self.queue_weight, self.kv_weight
        per_block = pw / keyed if hits is not None and keyed else 0.0
        for j in range(len(reps)):
            rep = reps[j]
            prefix = hits[j] * per_block if hits is not None else 0.0
            if bonus is not None:  # blocks below GPU memory, tier-weighted (PrecisePrefix)
                prefix += bonus[j] * per_block
            queue = 1.0 if span == 0 else (q_hi - rep.waiting) / span
            usage = rep.used / cap
            s = prefix + qw * queue + kw * (1.0 - (usage if usage < 1.0 else 1.0))
            if s > best_s:
                best_s = s
                best = j
        return best

    # ---- one request --------------------------------------------------------------------------

    def admit(
        self, arrival_s: float, prompt: int, output: int, keys: list[Any], run_ends: list[int], out: list[float]
    ) -> None:
        """Route and admit one request whose prompt's keyed blocks are the runs ``keys`` (signed
        64-bit ints) ending at blocks ``run_ends``
        (:func:`~servecap.workload.block_hash.engine_block_runs`); appends
        its (ttft_s, e2e_s, tpot_s) to ``out``."""
        self._admit(arrival_s, prompt, output, keys, run_ends, 0, len(keys), out)

    def _admit(
        self,
        arrival_s: float,
        prompt: int,
        output: int,
        keys: list[Any],
        run_ends: list[int],
        lo: int,
        hi: int,
        out: list[float],
    ) -> None:
        """:meth:`admit` of the runs ``keys[lo:hi]`` ending at ``run_ends[lo:hi]``."""
        bs = self.block_size
        if not self.caching:
            hi = lo
        keyed = run_ends[hi - 1] if hi > lo else 0
        max_hit = (prompt - 1) // bs
        path: list[RunHolders] = []
        hits = (
            self._hits(keys, run_ends, lo, hi, max_hit, path) if hi > lo and self.router == "precise-prefix" else None
        )
        tiers = self.tiers
        bonus: list[float] | None = None
        # the tiers read this request's own runs (a slice: the tiered replay is not the hot path)
        tier_keys = keys[lo:hi] if tiers is not None else keys
        tier_ends = run_ends[lo:hi] if tiers is not None else run_ends
        if tiers is not None and hi > lo:
            tiers.set_time(arrival_s)
            if hits is not None:
                bonus = tiers.router_bonus(hits, tier_keys, tier_ends, keyed)
        i = self._choose(arrival_s, hits, keyed, bonus)
        rep = self.replicas[i]
        if hits is not None:
            hit = hits[i]
        elif hi > lo:
            hit = self._hits_on(i, keys, run_ends, lo, hi, max_hit, path)
        else:
            hit = 0
        below = 0  # blocks past the GPU hit loaded from the tiers (promoted: published below)
        load_s = 0.0
        if tiers is not None and hi > lo:
            below, load_s = tiers.extend(i, tier_keys, tier_ends, hit, max_hit)
        # the request's runs become the most recently used of replica i's cache, its first run
        # last: the engine lets go of a request's blocks last first, so its deepest go first
        walked = len(path)
        chain: RunHolders | None = None
        end = run_ends[hi - 1] if hi > lo else 0
        for j in range(hi - 1, lo - 1, -1):
            begin = run_ends[j - 1] if j > lo else 0
            if end <= hit:  # cached whole: only its place in the order changes
                held = path[j - lo]
                last = held.last
                if last is not None and last.replica == i:
                    e = last
                else:
                    table = held.entries
                    assert table is not None
                    got_e = table[i]
                    assert got_e is not None
                    e = got_e
                    held.last = e
                e.pending += 1
                rep.queue.append(e)
            else:
                held = self._hold(i, keys[j], end - begin, path[j - lo] if j - lo < walked else None)
            # each run's holders link to the next run's (the walk's shortcut, see RunHolders)
            if j < hi - 1:
                held.child = chain
            chain = held
            end = begin
        total = -(-(prompt + output) // bs)
        private = total - keyed
        # room: at most max_num_seqs held and the blocks fit (least recently used runs go first;
        # held requests' blocks wait for them to end)
        start_s = arrival_s if arrival_s > rep.last_start_s else rep.last_start_s
        self._evict(i, private)
        while rep.ends and (len(rep.ends) >= self.max_num_seqs or rep.cached + rep.private + private > self.capacity):
            h = rep.pop_end()
            rep.private -= h.private
            rep.used -= h.used
            rep.ctx -= h.ctx
            if h.end_s > start_s:
                start_s = h.end_s
            self._evict(i, private)
        rep.retire_ends(start_s)
        # prefill: the uncached prompt in chunks of the token budget left by the decoders
        batch = len(rep.ends)
        prefill_from = start_s if start_s > rep.prefill_free_s else rep.prefill_free_s
        cached_tokens = (hit + below) * bs
        todo = prompt - cached_tokens
        budget = self.max_num_batched_tokens - batch
        if budget < 1:
            budget = 1
        steps = -(-todo // budget)
        chunk = -(-todo // steps)
        mid = cached_tokens + todo / 2.0
        kv = float(rep.ctx) + mid
        pairs = float(rep.ctx) + chunk * mid + chunk * (chunk + 1) / 2.0
        prefill_s = steps * self._price(chunk + batch, batch + 1, kv, pairs, chunk)
        if tiers is not None and load_s > 0.0:  # the admitting step takes the load (engine's rule)
            step1_s = prefill_s / steps
            prefill_s += tiers.step_s(i, load_s, step1_s) - step1_s
        first_s = prefill_from + prefill_s
        rep.prefill_free_s = first_s
        # decode: one token a step in a batch of the held requests and this one
        ctx = prompt + output // 2
        dkv = float(rep.ctx + ctx)
        tpot_s = self._price(batch + 1, batch + 1, dkv, dkv, 0) if output > 1 else 0.0
        end_s = first_s + (output - 1) * tpot_s
        if start_s > arrival_s:
            rep.push_start(start_s)
        rep.last_start_s = start_s
        rep.push_end(Held(end_s, private, total, ctx))
        rep.private += private
        rep.used += total
        rep.ctx += ctx
        self._evict(i, 0)
        rep.tidy()
        rep.served += 1
        self.requests += 1
        self.hit_tokens += hit * bs  # the GPU's hits (the tiers count their own)
        self.query_tokens += prompt
        if end_s > self.last_end_s:
            self.last_end_s = end_s
        if len(self.index) > self.peak_index_keys:
            self.peak_index_keys = len(self.index)
        out.append(first_s - arrival_s)
        out.append(end_s - arrival_s)
        out.append(tpot_s)

    def admit_chunk(
        self,
        arrival_s: list[float],
        prompt: list[int],
        output: list[int],
        offsets: list[int],
        keys: list[Any],
        run_ends: list[int],
        out: list[float],
    ) -> None:
        """:meth:`admit` for each row of a chunk (``offsets``: row ``r``'s runs are
        ``keys[offsets[r]:offsets[r + 1]]``, ending at ``run_ends[...]``; empty: no hashes)."""
        has = len(offsets) > 0
        empty: list[Any] = []
        for r in range(len(arrival_s)):
            if has:
                self._admit(arrival_s[r], prompt[r], output[r], keys, run_ends, offsets[r], offsets[r + 1], out)
            else:
                self._admit(arrival_s[r], prompt[r], output[r], empty, empty, 0, 0, out)
