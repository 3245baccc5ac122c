"""The paged KV block pool with vLLM-style prefix caching (automatic prefix caching).

Counts, not block ids: the simulator needs how many blocks are used, free and cached, not where.

- ``used``: blocks held by running requests (a shared block counted once);
- ``free``: blocks with no content;
- cached blocks whose last user finished stay in the pool with their content, evictable, in an
  LRU list (vLLM's free-block queue: freed blocks go to the tail, eviction takes the head); a
  request that hits one takes it back out of the list.

Conservation: ``used + free + evictable == total`` after every operation (the tests check it).
``on_evict`` (None by default): called with each key the pool evicts, the hook the KV tiers
below GPU memory are fed by (:mod:`servecap.sim.kv_tiers`).
A cached "block" is one logical block of a request, which spans ``blocks_per_key`` physical
blocks (one per KV-cache group).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence


class KvPool:
    def __init__(self, total_blocks: int, *, blocks_per_key: int = 1) -> None:
        self.total = total_blocks
        self.free = total_blocks
        self.used = 0
        self.per_key = blocks_per_key
        self.refs: dict[int, int] = {}  # key -> number of running requests holding it
        self.lru: OrderedDict[int, None] = OrderedDict()  # keys held by nobody, oldest first
        self.evictions = 0
        self.on_evict: Callable[[int], None] | None = None  # a tier below takes each evicted key

    @property
    def evictable(self) -> int:
        return len(self.lru) * self.per_key

    def available(self) -> int:
        """Blocks an allocation can get: free ones plus evictable cached ones."""
        return self.free + len(self.lru) * self.per_key

    def allocate(self, n: int) -> bool:
        """Take ``n`` blocks for a running request, evicting LRU cached blocks when needed."""
        if n <= 0:
            return True
        if n > self.free + len(self.lru) * self.per_key:
            return False
        while self.free < n:
            key, _ = self.lru.popitem(last=False)
            del self.refs[key]
            self.free += self.per_key
            self.evictions += 1
            if self.on_evict is not None:
                self.on_evict(key)
        self.free -= n
        self.used += n
        return True

    def release(self, n: int) -> None:
        """Give back ``n`` private (uncached) blocks."""
        self.used -= n
        self.free += n

    def longest_hit(self, keys: Sequence[int], max_blocks: int) -> tuple[int, int]:
        """(leading keys cached, how many of those are evictable, i.e. held by nobody now)."""
        hits = idle = 0
        refs = self.refs
        for i in range(min(len(keys), max_blocks)):
            count = refs.get(keys[i])
            if count is None:
                break
            hits += 1
            if count == 0:
                idle += 1
        return hits, idle

    def acquire(self, key: int) -> None:
        """A request takes a cached block (a hit)."""
        count = self.refs[key]
        if count == 0:
            del self.lru[key]
            self.used += self.per_key
        self.refs[key] = count + 1

    def publish(self, key: int) -> bool:
        """A request's own freshly computed block becomes cached (it keeps holding it). False:
        that content is already cached (the request keeps its duplicate as a private block)."""
        if key in self.refs:
            return False
        self.refs[key] = 1
        return True

    def drop(self, key: int) -> None:
        """A request lets go of a cached block; nobody holding it makes it evictable."""
        count = self.refs[key] - 1
        self.refs[key] = count
        if count == 0:
            self.lru[key] = None
            self.used -= self.per_key

    def check(self) -> None:
        """Raise AssertionError if blocks were created or lost."""
        idle = sum(1 for c in self.refs.values() if c == 0)
        assert idle == len(self.lru), (idle, len(self.lru))
        assert all(c >= 0 for c in self.refs.values())
        assert self.free >= 0 and self.used >= 0, (self.free, self.used)
        assert self.used + self.free + self.evictable == self.total, (
            self.used,
            self.free,
            self.evictable,
            self.total,
        )
