"""The paged KV block pool with vLLM-style prefix caching (automatic prefix caching).

Counts, not block ids: the simulator needs how many blocks are used, free and cached, not where.

- ``used``: blocks held by running requests (a shared block counted once);
- ``free``: blocks with no content;
- cached blocks whose last user finished stay in the pool with their content, evictable, in an
  LRU list (vLLM's free-block queue: freed blocks go to the tail, eviction takes the head); a
  request that hits one takes it back out of the list.

Conservation: ``used + free + evictable == total`` after every operation (the tests check it).
A cached "block" is one logical block of a request, which spans ``blocks_per_key`` physical
blocks (one per KV-cache group).

**Runs.** A cached block is ``(key, i)``: the ``i``-th block of a run of consecutive blocks with
one key (:class:`servecap.workload.block_hash.KeyRuns`: a block-hash trace's 512-token block is
one run of 32 engine blocks of 16; a plain key is a run of one block, ``(key, 0)``). The pool
keeps a run's cached blocks as *segments* ``[lo, hi)`` of blocks with one reference count, one
per run in the common case, and does every operation per segment rather than per block, with
exactly the per-block behaviour:

- a request lets go of its blocks last-first (its tail enters the LRU list first, evicted
  first), so a segment whose count reaches 0 enters the list as ``hi - 1, ..., lo``: one entry,
  evicted from ``hi`` down (an eviction of fewer blocks than it holds shortens it in place); a
  segment that enters right behind the list's tail and continues it (same key, ``hi`` = the
  tail's ``lo``) is merged into it, the order being the same;
- a hit on the leading ``h`` blocks of a segment splits it at ``h`` (the part left keeps its
  place in the list); every holder holds whole segments (segments are only created by a
  request's publish and split at its hits' ends).

``on_evict`` (None or a callable) is called with ``(key, lo, hi)`` for every range of blocks
evicted, in eviction order (blocks ``hi - 1`` down to ``lo``; block ``i``'s key is ``key + i``): the hook
the KV tiers below GPU memory are fed by (:mod:`servecap.sim.kv_tiers`).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Sequence

from servecap.workload.block_hash import KeyRuns


class Segment:
    """Blocks ``[lo, hi)`` of the run ``key``, cached, held by ``refs`` running requests."""

    __slots__ = ("hi", "key", "lo", "refs")

    def __init__(self, key: int, lo: int, hi: int, refs: int) -> None:
        self.key = key
        self.lo = lo
        self.hi = hi
        self.refs = refs


class KvPool:
    def __init__(self, total_blocks: int, *, blocks_per_key: int = 1) -> None:
        self.total = total_blocks
        self.free = total_blocks
        self.used = 0
        self.per_key = blocks_per_key
        self.segs: dict[int, list[Segment]] = {}  # run key -> its cached segments, by lo
        self.lru_segs: OrderedDict[Segment, None] = OrderedDict()  # segments held by nobody, oldest first
        self.idle = 0  # cached blocks (keys) held by nobody: the blocks of lru_segs
        self.evictions = 0
        self.on_evict: Callable[[int, int, int], None] | None = None

    # ---- counts -----------------------------------------------------------------------------

    @property
    def evictable(self) -> int:
        return self.idle * self.per_key

    def available(self) -> int:
        """Blocks an allocation can get: free ones plus evictable cached ones."""
        return self.free + self.idle * self.per_key

    @property
    def refs(self) -> dict[int, int]:
        """Run key -> its first cached segment's reference count (a view for tests and plain keys)."""
        return {k: s[0].refs for k, s in self.segs.items()}

    @property
    def lru(self) -> list[tuple[int, int, int]]:
        """The LRU list, oldest first, as ``(key, lo, hi)`` segments (evicted from ``hi`` down)."""
        return [(s.key, s.lo, s.hi) for s in self.lru_segs]

    def held_blocks(self) -> dict[tuple[int, int], int]:
        """``(key, i)`` -> reference count of every cached block held by a running request."""
        out: dict[tuple[int, int], int] = {}
        for segs in self.segs.values():
            for s in segs:
                if s.refs > 0:
                    for i in range(s.lo, s.hi):
                        out[(s.key, i)] = s.refs
        return out

    # ---- private blocks ---------------------------------------------------------------------

    def allocate(self, n: int) -> bool:
        """Take ``n`` blocks for a running request, evicting LRU cached blocks when needed."""
        if n <= 0:
            return True
        per_key = self.per_key
        if n > self.free + self.idle * per_key:
            return False
        if self.free < n:
            self._evict(-(-(n - self.free) // per_key))
        self.free -= n
        self.used += n
        return True

    def _evict(self, keys: int) -> None:
        """Evict ``keys`` cached blocks from the LRU head (the caller checked there are)."""
        lru = self.lru_segs
        hook = self.on_evict
        while keys > 0:
            s = next(iter(lru))
            take = s.hi - s.lo
            if take > keys:
                take = keys
            hi = s.hi
            s.hi = hi - take
            if s.hi == s.lo:
                del lru[s]
                segs = self.segs[s.key]
                segs.remove(s)
                if not segs:
                    del self.segs[s.key]
            keys -= take
            self.idle -= take
            self.free += take * self.per_key
            self.evictions += take
            if hook is not None:
                hook(s.key, hi - take, hi)

    def release(self, n: int) -> None:
        """Give back ``n`` private (uncached) blocks."""
        self.used -= n
        self.free += n

    # ---- cached blocks, by runs ---------------------------------------------------------------

    def longest_hit_runs(self, runs: KeyRuns, max_blocks: int) -> tuple[int, int]:
        """(leading blocks of ``runs`` cached, at most ``max_blocks``; how many of those are
        evictable, i.e. held by nobody now). Reads only."""
        hits = idle = 0
        table = self.segs
        start = 0
        for k, end in zip(runs.keys, runs.ends, strict=False):
            if start >= max_blocks:
                break
            want = (end if end < max_blocks else max_blocks) - start
            segs = table.get(k)
            if segs is None:
                break
            cur = 0
            for s in segs:
                if s.lo != cur:
                    break
                top = s.hi if s.hi < want else want
                n = top - cur
                hits += n
                if s.refs == 0:
                    idle += n
                cur = top
                if cur >= want:
                    break
            if cur < end - start:
                break
            start = end
        return hits, idle

    def acquire_runs(self, runs: KeyRuns, hits: int, held: list[int]) -> None:
        """A request takes the leading ``hits`` blocks of ``runs`` (cached: :meth:`longest_hit_runs`
        said so); appends the ``(key, lo, hi)`` ranges it now holds to ``held`` (flat)."""
        table = self.segs
        lru = self.lru_segs
        per_key = self.per_key
        start = 0
        for k, end in zip(runs.keys, runs.ends, strict=False):
            if start >= hits:
                break
            want = (end if end < hits else hits) - start
            segs = table[k]
            cur = 0
            j = 0
            while cur < want:
                s = segs[j]
                if s.hi > want:  # split: the hit takes [lo, want), the rest keeps its place
                    t = Segment(k, s.lo, want, s.refs)
                    s.lo = want
                    segs.insert(j, t)
                    if t.refs == 0:
                        self.idle -= want - t.lo
                        self.used += (want - t.lo) * per_key
                    t.refs += 1
                    cur = want
                    break
                if s.refs == 0:
                    del lru[s]
                    self.idle -= s.hi - s.lo
                    self.used += (s.hi - s.lo) * per_key
                s.refs += 1
                cur = s.hi
                j += 1
            held.append(k)
            held.append(0)
            held.append(want)
            start = end

    def publish_range(self, key: int, lo: int, hi: int, held: list[int]) -> int:
        """A request's own freshly computed blocks ``[lo, hi)`` of run ``key`` become cached (it
        keeps holding them), except those already cached (it keeps its duplicates as private
        blocks). Appends the ranges it now holds to ``held``; returns how many blocks."""
        segs = self.segs.get(key)
        if segs is None:
            self.segs[key] = [Segment(key, lo, hi, 1)]
            _hold(held, key, lo, hi)
            return hi - lo
        got = 0
        cur = lo
        j = 0
        while cur < hi:
            while j < len(segs) and segs[j].hi <= cur:
                j += 1
            if j < len(segs) and segs[j].lo <= cur:  # cached already: a private duplicate
                cur = segs[j].hi
                continue
            top = segs[j].lo if j < len(segs) and segs[j].lo < hi else hi
            segs.insert(j, Segment(key, cur, top, 1))
            _hold(held, key, cur, top)
            got += top - cur
            cur = top
            j += 1
        return got

    def publish_blocks(self, runs: KeyRuns, lo: int, hi: int, held: list[int]) -> int:
        """:meth:`publish_range` for the request's blocks ``[lo, hi)`` (positions in ``runs``),
        run by run; returns how many blocks it now holds of them."""
        ends = runs.ends
        keys = runs.keys
        j = bisect.bisect_right(ends, lo)  # the run holding block lo
        got = 0
        b = lo
        while b < hi:
            start = ends[j - 1] if j else 0
            end = ends[j] if ends[j] < hi else hi
            got += self.publish_range(keys[j], b - start, end - start, held)
            b = end
            j += 1
        return got

    def drop_held(self, held: list[int]) -> None:
        """A request lets go of its cached blocks (``held`` from :meth:`acquire_runs` and
        :meth:`publish_range`), last first; those nobody holds now become evictable."""
        table = self.segs
        lru = self.lru_segs
        per_key = self.per_key
        p = len(held) - 3
        while p >= 0:
            k = held[p]
            lo = held[p + 1]
            hi = held[p + 2]
            p -= 3
            segs = table[k]
            j = len(segs) - 1
            while j >= 0:
                s = segs[j]
                if s.lo >= hi:
                    j -= 1
                    continue
                if s.hi <= lo:
                    break
                s.refs -= 1
                if s.refs == 0:
                    n = s.hi - s.lo
                    self.idle += n
                    self.used -= n * per_key
                    tail = next(reversed(lru)) if lru else None
                    if tail is not None and tail.key == k and tail.lo == s.hi:
                        tail.lo = s.lo  # continues the tail: one entry, same order
                        del segs[j]
                    else:
                        lru[s] = None
                j -= 1

    # ---- one key per block (a run of one) ----------------------------------------------------

    def longest_hit(self, keys: Sequence[int], max_blocks: int) -> tuple[int, int]:
        """(leading keys cached, how many of those are evictable, i.e. held by nobody now)."""
        return self.longest_hit_runs(KeyRuns.unit(keys), max_blocks)

    def acquire(self, key: int) -> None:
        """A request takes a cached block (a hit); drop it with :meth:`drop`."""
        self.acquire_runs(KeyRuns((key,), (1,)), 1, [])

    def publish(self, key: int) -> bool:
        """A request's own freshly computed block becomes cached (it keeps holding it). False:
        that content is already cached (the request keeps its duplicate as a private block)."""
        return self.publish_range(key, 0, 1, []) == 1

    def drop(self, key: int) -> None:
        """A request lets go of a cached block; nobody holding it makes it evictable."""
        self.drop_held([key, 0, 1])

    def check(self) -> None:
        """Raise AssertionError if blocks were created or lost."""
        idle = 0
        for k, segs in self.segs.items():
            assert segs, k
            for j in range(1, len(segs)):
                a, b = segs[j - 1], segs[j]
                assert a.hi <= b.lo, (k, a.lo, a.hi, b.lo, b.hi)
            for s in segs:
                assert s.key == k and s.lo < s.hi, (k, s.lo, s.hi)
                assert s.refs >= 0, (k, s.refs)
                assert (s.refs == 0) == (s in self.lru_segs), (k, s.lo, s.hi, s.refs)
                if s.refs == 0:
                    idle += s.hi - s.lo
        assert idle == self.idle, (idle, self.idle)
        assert self.free >= 0 and self.used >= 0, (self.free, self.used)
        assert self.used + self.free + self.evictable == self.total, (
            self.used,
            self.free,
            self.evictable,
            self.total,
        )


def _hold(held: list[int], key: int, lo: int, hi: int) -> None:
    """Append ``(key, lo, hi)`` to a request's held ranges, extending its last one when it
    continues it (so a run published in several chunks is one range)."""
    n = len(held)
    if n >= 3 and held[n - 3] == key and held[n - 1] == lo:
        held[n - 1] = hi
    else:
        held.append(key)
        held.append(lo)
        held.append(hi)
