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
``cached`` (blocks in the cache), ``ends`` (a heap of the end times of the requests it holds,
with their private blocks and context), ``starts`` (a heap of the start times of those still
waiting). Across replicas an index maps a run key to the bitmask of replicas holding it and of
those holding it at its longest cached length (:class:`RunHolders`): a request's leading hits on
every replica come from one walk of its runs, narrowing the mask, instead of one walk per
replica. Every table holds only what some replica's cache holds now, and each queue a few items
per cached run (:meth:`ReplicaCache.tidy`): memory is bounded by the replicas' KV capacities, not
by the trace.

Compiled by mypyc (setup.py) like the engine; the pure-Python module behaves identically.
"""

from __future__ import annotations

import heapq

from servecap.fleet.cache_replay_tiers import ReplayTiers
from servecap.sim.step_time import StepTimeModel

ROUTERS = ("precise-prefix", "least-outstanding", "round-robin")
_NEVER = float("inf")  # an empty heap's head


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
        self.ends: list[tuple[float, int, int, int]] = []  # (end_s, private, used, context tokens)
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
            kept: list[Entry] = []
            for k in range(h, len(q)):
                e = q[k]
                e.pending -= 1
                if not e.pending:
                    kept.append(e)
            for e in kept:
                e.pending = 1
            self.queue = kept
            self.head = 0
        elif h > 1024 and 2 * h > len(q):
            del q[:h]
            self.head = 0

    def retire_ends(self, now_s: float) -> None:
        """Requests that ended by ``now_s`` let go of their blocks."""
        while self.next_end_s <= now_s:
            _, priv, used, ctx = self.pop_end()
            self.private -= priv
            self.used -= used
            self.ctx -= ctx

    def retire_starts(self, now_s: float) -> None:
        """Requests that started by ``now_s`` stop waiting."""
        starts = self.starts
        while self.next_start_s <= now_s:
            heapq.heappop(starts)
            self.waiting -= 1
            self.next_start_s = starts[0] if starts else _NEVER

    def push_end(self, item: tuple[float, int, int, int]) -> None:
        ends = self.ends
        heapq.heappush(ends, item)
        self.next_end_s = ends[0][0]

    def pop_end(self) -> tuple[float, int, int, int]:
        ends = self.ends
        item = heapq.heappop(ends)
        self.next_end_s = ends[0][0] if ends else _NEVER
        return item

    def push_start(self, start_s: float) -> None:
        starts = self.starts
        heapq.heappush(starts, start_s)
        self.waiting += 1
        self.next_start_s = starts[0]


class Entry:
    """Replica ``replica``'s cached blocks of one run: its ``length`` leading blocks, its touches
    in that replica's LRU queue (``pending``) and the run's holders (``run``)."""

    def __init__(self, replica: int, length: int, run: RunHolders) -> None:
        self.replica = replica
        self.length = length
        self.run = run
        self.pending = 0


class RunHolders:
    """Which replicas cache a run: ``any`` (a bitmask), ``full`` (those holding its longest
    cached length, ``length`` blocks), and each one's :class:`Entry` (``entries``, one slot per
    replica, made when a second replica caches the run: until then its one entry is ``last``).

    Two shortcuts past the hash tables, both checked before use and dropped when the run leaves
    every cache (so they pin nothing): ``last``, the entry a replica last cached or touched (most
    runs have one holder), and ``child``, the holders of the run that followed this one in the
    last prompt walked or published (a session's next turn resends the same runs in the same
    order)."""

    def __init__(self, key: int, length: int) -> None:
        self.key = key
        self.any = 0
        self.full = 0
        self.length = length
        self.entries: list[Entry | None] | None = None
        self.last: Entry | None = None
        self.child: RunHolders | None = None

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
        self.index: dict[int, RunHolders] = {}
        self.next_rr = 0
        self.hit_tokens = 0
        self.query_tokens = 0
        self.requests = 0
        self.peak_index_keys = 0
        self.last_end_s = 0.0
        # KV tiers below GPU memory (fleet/cache_replay_tiers.py), set by the caller; None: GPU only
        self.tiers: ReplayTiers | None = None

    # ---- the index ----------------------------------------------------------------------------

    def _find(self, parent: RunHolders | None, key: int) -> RunHolders | None:
        """The holders of run ``key`` (None: no replica caches it), the run after ``parent`` in
        the prompt walked: ``parent.child`` when it is that run and still cached, else the index."""
        if parent is not None:
            c = parent.child
            if c is not None and c.any and c.key == key:
                return c
            held = self.index.get(key)
            if held is not None:
                parent.child = held
            return held
        return self.index.get(key)

    def _hits(
        self, keys: list[int], run_ends: list[int], lo: int, hi: int, max_blocks: int, path: list[RunHolders]
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
            end = run_ends[j] if run_ends[j] < max_blocks else max_blocks
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
            ok = held.full & holders if want <= held.length else 0
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
        self, i: int, keys: list[int], run_ends: list[int], lo: int, hi: int, max_blocks: int, path: list[RunHolders]
    ) -> int:
        """Leading cached blocks of the runs ``keys[lo:hi]`` on replica ``i``; appends the holders
        walked to ``path``."""
        start = 0
        parent: RunHolders | None = None
        for j in range(lo, hi):
            end = run_ends[j] if run_ends[j] < max_blocks else max_blocks
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

    def _hold(self, i: int, k: int, length: int, held: RunHolders | None) -> RunHolders:
        """Replica ``i`` caches ``length`` leading blocks of run ``k`` (its holders ``held``, when
        known) as its most recently used; returns the run's holders."""
        rep = self.replicas[i]
        if held is None:
            fresh = RunHolders(k, length)
            held = self.index.setdefault(k, fresh)
        bit = 1 << i
        e = held.entry(i)
        if e is None:
            e = Entry(i, length, held)
            held.add(e, len(self.replicas))
            rep.cached += length
            rep.live += 1
        elif e.length < length:
            rep.cached += length - e.length
            e.length = length
        rep.touch(e)
        held.last = e
        if e.length > held.length:
            held.length = e.length
            held.full = bit
        elif e.length == held.length:
            held.full |= bit
        return held

    def _evict(self, i: int, room: int) -> None:
        """Replica ``i`` drops its least recently used runs until ``room`` blocks are free."""
        rep = self.replicas[i]
        while rep.live and rep.cached + rep.private + room > rep.capacity:
            e = rep.oldest()
            rep.live -= 1
            rep.cached -= e.length
            held = e.run
            if self.tiers is not None:  # demoted to the tiers below (CPU -> SSD, the shared store)
                self.tiers.demote(i, held.key, e.length)
            held.drop(e)
            if not held.any:
                del self.index[held.key]
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
        self, arrival_s: float, prompt: int, output: int, keys: list[int], run_ends: list[int], out: list[float]
    ) -> None:
        """Route and admit one request whose prompt's keyed blocks are the runs ``keys`` ending
        at blocks ``run_ends`` (:func:`~servecap.workload.block_hash.engine_block_runs`); appends
        its (ttft_s, e2e_s, tpot_s) to ``out``."""
        self._admit(arrival_s, prompt, output, keys, run_ends, 0, len(keys), out)

    def _admit(
        self,
        arrival_s: float,
        prompt: int,
        output: int,
        keys: list[int],
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
        for j in range(hi - 1, lo - 1, -1):
            end = run_ends[j]
            if end <= hit:  # cached whole: only its place in the order changes
                held = path[j - lo]
                e = held.entry(i)
                assert e is not None
                rep.touch(e)
                held.last = e
            else:
                held = self._hold(
                    i, keys[j], end - (run_ends[j - 1] if j > lo else 0), path[j - lo] if j - lo < walked else None
                )
            # each run's holders link to the next run's (the walk's shortcut, see RunHolders)
            if j < hi - 1:
                held.child = chain
            chain = held
        total = -(-(prompt + output) // bs)
        private = total - keyed
        # room: at most max_num_seqs held and the blocks fit (least recently used runs go first;
        # held requests' blocks wait for them to end)
        start_s = arrival_s if arrival_s > rep.last_start_s else rep.last_start_s
        self._evict(i, private)
        while rep.ends and (len(rep.ends) >= self.max_num_seqs or rep.cached + rep.private + private > self.capacity):
            end_s, p, u, c = rep.pop_end()
            rep.private -= p
            rep.used -= u
            rep.ctx -= c
            if end_s > start_s:
                start_s = end_s
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
        prefill_s = steps * self.model.time(chunk + batch, batch + 1, kv, kv, pairs, pairs, chunk)
        if tiers is not None and load_s > 0.0:  # the admitting step takes the load (engine's rule)
            step1_s = prefill_s / steps
            prefill_s += tiers.step_s(i, load_s, step1_s) - step1_s
        first_s = prefill_from + prefill_s
        rep.prefill_free_s = first_s
        # decode: one token a step in a batch of the held requests and this one
        ctx = prompt + output // 2
        dkv = float(rep.ctx + ctx)
        tpot_s = self.model.time(batch + 1, batch + 1, dkv, dkv, dkv, dkv, 0) if output > 1 else 0.0
        end_s = first_s + (output - 1) * tpot_s
        if start_s > arrival_s:
            rep.push_start(start_s)
        rep.last_start_s = start_s
        rep.push_end((end_s, private, total, ctx))
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
        keys: list[int],
        run_ends: list[int],
        out: list[float],
    ) -> None:
        """:meth:`admit` for each row of a chunk (``offsets``: row ``r``'s runs are
        ``keys[offsets[r]:offsets[r + 1]]``, ending at ``run_ends[...]``; empty: no hashes)."""
        has = len(offsets) > 0
        empty: list[int] = []
        for r in range(len(arrival_s)):
            if has:
                self._admit(arrival_s[r], prompt[r], output[r], keys, run_ends, offsets[r], offsets[r + 1], out)
            else:
                self._admit(arrival_s[r], prompt[r], output[r], empty, empty, 0, 0, out)
