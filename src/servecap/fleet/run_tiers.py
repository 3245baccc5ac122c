"""One KV tier's LRU order kept by runs of blocks, block for block the order of the engine's
per-block tier (:class:`servecap.sim.kv_tiers.LruTier`), for the cache replay's tiers
(:mod:`servecap.fleet.cache_replay_tiers`).

The engine's tier keys block ``b`` of a run ``key`` as ``key + b`` and holds one LRU entry (its
write end, ``ready_s``) per block. Here a tier holds :class:`Piece` objects instead: blocks
``[lo, hi)`` of one run, all readable from the same ``ready_s``, consecutive in the LRU order,
lowest block first (``asc``) or highest first (a run the GPU evicts is written last block
first). The pieces form a doubly linked list, oldest first, so the order of the blocks is the
order of the pieces and, in each, of its blocks: exactly the per-block tier's order, with
``len`` counted in blocks (``size``). Every operation is the per-block one applied to a range
of blocks at once:

- :meth:`RunTier.put` is ``LruTier.put`` on each block of a range in order: a block held moves
  to the most recent end keeping the earlier of its two ready times; a new one is appended and,
  with the tier over its capacity, the oldest blocks go (:meth:`RunTier.pop`: in order, to the
  next tier down); a tier of no capacity passes every new block on. Pieces are cut where a range
  meets a held block, so a block held while an earlier one of the same call pushed it out is
  new when its turn comes, as in the per-block loop.
- :meth:`RunTier.cut` takes blocks out in place (a promotion from a private tier: ``del``), and
  :meth:`RunTier.add` appends (a promotion from the shared store: ``move_to_end`` block by block,
  lowest first).

Two runs' blocks never share a key here (a piece names its run): in the engine's per-block
keys, ``key1 + b1 == key2 + b2`` for two runs of a block-hash trace would need two trace ids
whose difference times ``block_hash._MIX`` is within a few thousand of 0 modulo 2^64, which no
two ids closer than 2^40 give (tests/fleet/test_run_tiers.py), so the two stores hold the same
blocks in the same order.

Every run with a piece in any tier has one :class:`RunBelow` in the index shared by the tiers
(the fleet's tiers: every replica's private ones and the shared store), with its pieces and the
replicas whose private tiers hold some of its blocks (``mask``): a lookup reads a run's pieces
with one hash lookup, whatever the number of replicas.

Compiled by mypyc (setup.py); the pure-Python module behaves identically.
"""

from __future__ import annotations

from servecap.core.kv_tiers import KvTier


class RunBelow:
    """A run's pieces in the tiers below GPU memory: ``remote`` (the shared store's), ``private``
    (every replica's CPU and SSD tiers'), ``mask`` (the replicas holding some of them)."""

    def __init__(self, key: int) -> None:
        self.key = key
        self.remote: list[Piece] = []
        self.private: list[Piece] = []
        self.mask = 0


class Piece:
    """Blocks ``[lo, hi)`` of ``run`` in ``tier``, readable from ``ready_s``, consecutive in its
    LRU order, ``lo`` first (``asc``) or ``hi - 1`` first."""

    def __init__(self, tier: RunTier, run: RunBelow, lo: int, hi: int, asc: bool, ready_s: float) -> None:
        self.tier = tier
        self.run = run
        self.lo = lo
        self.hi = hi
        self.asc = asc
        self.ready_s = ready_s
        self.prev: Piece | None = None
        self.next: Piece | None = None


class Span:
    """Blocks ``[lo, hi)`` of ``run`` in order (``asc``: ``lo`` first), on their way to a tier."""

    def __init__(self, run: RunBelow, lo: int, hi: int, asc: bool) -> None:
        self.run = run
        self.lo = lo
        self.hi = hi
        self.asc = asc


class RunTier:
    """One tier's blocks in LRU order, as pieces (see the module doc): ``capacity`` blocks,
    ``size`` held. ``replica``: the replica whose private tier it is (-1: the shared store);
    ``level``: its place among the replica's tiers (cpu, ssd, remote: the fastest first)."""

    def __init__(self, tier: KvTier, capacity: int, replica: int, level: int, index: dict[int, RunBelow]) -> None:
        self.tier = tier
        self.capacity = capacity
        self.replica = replica
        self.level = level
        self.index = index
        self.size = 0
        self.head: Piece | None = None  # the oldest
        self.tail: Piece | None = None

    # ---- the run's pieces in this tier ----------------------------------------------------------

    def _pieces(self, run: RunBelow) -> list[Piece]:
        return run.remote if self.replica < 0 else run.private

    def find(self, run: RunBelow, b: int) -> Piece | None:
        """The piece holding block ``b`` of ``run`` (None: this tier lacks it)."""
        for p in self._pieces(run):
            if p.tier is self and p.lo <= b < p.hi:
                return p
        return None

    def absent(self, run: RunBelow, lo: int, hi: int) -> int:
        """Blocks of ``[lo, hi)`` of ``run`` this tier lacks."""
        n = hi - lo
        for p in self._pieces(run):
            if p.tier is self and p.lo < hi and p.hi > lo:
                n -= (p.hi if p.hi < hi else hi) - (p.lo if p.lo > lo else lo)
        return n

    def _next_lo(self, run: RunBelow, b: int, hi: int) -> int:
        """The first block held above the missing block ``b`` of ``run``, ``hi`` at most."""
        for p in self._pieces(run):
            if p.tier is self and b < p.lo < hi:
                hi = p.lo
        return hi

    def _prev_hi(self, run: RunBelow, b: int, lo: int) -> int:
        """One past the last block held below the missing block ``b`` of ``run``, ``lo`` at least."""
        for p in self._pieces(run):
            if p.tier is self and lo < p.hi <= b:
                lo = p.hi
        return lo

    def _register(self, p: Piece) -> None:
        run = p.run
        if not run.remote and not run.private:
            self.index[run.key] = run
        if self.replica < 0:
            run.remote.append(p)
        else:
            run.private.append(p)
            run.mask |= 1 << self.replica

    def _unregister(self, p: Piece) -> None:
        run = p.run
        if self.replica < 0:
            run.remote.remove(p)
        else:
            run.private.remove(p)
            i = self.replica
            held = False
            for q in run.private:
                if q.tier.replica == i:
                    held = True
                    break
            if not held:
                run.mask &= ~(1 << i)
        if not run.remote and not run.private:
            del self.index[run.key]

    # ---- the order ------------------------------------------------------------------------------

    def _unlink(self, p: Piece) -> None:
        prev = p.prev
        nxt = p.next
        if prev is None:
            self.head = nxt
        else:
            prev.next = nxt
        if nxt is None:
            self.tail = prev
        else:
            nxt.prev = prev
        p.prev = None
        p.next = None

    def _drop(self, p: Piece) -> None:
        self._unlink(p)
        self._unregister(p)

    def add(self, run: RunBelow, lo: int, hi: int, asc: bool, ready_s: float) -> None:
        """Blocks ``[lo, hi)`` of ``run``, none of them held, become the most recently used (in
        order: ``lo`` first when ``asc``), readable from ``ready_s``; ``size`` is the caller's."""
        t = self.tail
        if t is not None and t.run is run and t.ready_s == ready_s:
            one_t = t.hi - t.lo == 1
            one = hi - lo == 1
            if t.hi == lo and (t.asc or one_t) and (asc or one):
                t.hi = hi
                t.asc = True
                return
            if t.lo == hi and (not t.asc or one_t) and (not asc or one):
                t.lo = lo
                t.asc = False
                return
        p = Piece(self, run, lo, hi, asc, ready_s)
        p.prev = t
        if t is None:
            self.head = p
        else:
            t.next = p
        self.tail = p
        self._register(p)

    def cut(self, p: Piece, lo: int, hi: int) -> None:
        """Take blocks ``[lo, hi)`` (within ``p``) out of the order, the rest of ``p`` keeping its
        place; ``size`` is the caller's."""
        if lo == p.lo:
            if hi == p.hi:
                self._drop(p)
            else:
                p.lo = hi
        elif hi == p.hi:
            p.hi = lo
        else:  # the middle: the older part stays ``p``, the newer follows it
            if p.asc:
                q = Piece(self, p.run, hi, p.hi, True, p.ready_s)
                p.hi = lo
            else:
                q = Piece(self, p.run, p.lo, lo, False, p.ready_s)
                p.lo = hi
            nxt = p.next
            q.prev = p
            q.next = nxt
            p.next = q
            if nxt is None:
                self.tail = q
            else:
                nxt.prev = q
            self._register(q)

    def pop(self, n: int, out: list[Span] | None) -> None:
        """Let the ``n`` oldest blocks go, appended in order to ``out`` (None: dropped)."""
        self.size -= n
        while n > 0:
            p = self.head
            assert p is not None
            have = p.hi - p.lo
            take = have if have < n else n
            if p.asc:
                lo = p.lo
                hi = lo + take
            else:
                hi = p.hi
                lo = hi - take
            run = p.run
            asc = p.asc
            if take == have:
                self._drop(p)
            elif asc:
                p.lo = hi
            else:
                p.hi = lo
            n -= take
            if out is not None:
                last = out[-1] if out else None
                if (
                    last is not None
                    and last.run is run
                    and last.asc == asc
                    and (last.hi == lo if asc else last.lo == hi)
                ):
                    if asc:
                        last.hi = hi
                    else:
                        last.lo = lo
                else:
                    out.append(Span(run, lo, hi, asc))

    def put(self, run: RunBelow, lo: int, hi: int, asc: bool, ready_s: float, out: list[Span] | None) -> None:
        """``LruTier.put(key + b, ready_s)`` for each block ``b`` of ``[lo, hi)`` of ``run`` in order
        (``lo`` first when ``asc``): one held moves to the most recent end with the earlier of its
        ready times, a new one is appended readable from ``ready_s``; the blocks the tier lets go
        are appended to ``out`` in order (None: dropped)."""
        if asc:
            b = lo
            while b < hi:
                p = self.find(run, b)
                if p is not None:
                    e = p.hi if p.hi < hi else hi
                    r = p.ready_s if p.ready_s < ready_s else ready_s
                    self.cut(p, b, e)
                    self.add(run, b, e, True, r)
                else:
                    e = self._next_lo(run, b, hi)
                    self._add_new(run, b, e, True, ready_s, out)
                b = e
        else:
            b = hi
            while b > lo:
                p = self.find(run, b - 1)
                if p is not None:
                    e = p.lo if p.lo > lo else lo
                    r = p.ready_s if p.ready_s < ready_s else ready_s
                    self.cut(p, e, b)
                    self.add(run, e, b, False, r)
                else:
                    e = self._prev_hi(run, b - 1, lo)
                    self._add_new(run, e, b, False, ready_s, out)
                b = e

    def _add_new(self, run: RunBelow, lo: int, hi: int, asc: bool, ready_s: float, out: list[Span] | None) -> None:
        """Blocks ``[lo, hi)`` the tier lacks: appended, then the oldest over the capacity let go
        (in bulk: the same blocks in the same order as one at a time, since the oldest block is
        never one appended later)."""
        if self.capacity <= 0:
            if out is not None:
                out.append(Span(run, lo, hi, asc))
            return
        self.add(run, lo, hi, asc, ready_s)
        self.size += hi - lo
        if self.size > self.capacity:
            self.pop(self.size - self.capacity, out)

    def blocks(self) -> list[tuple[int, float]]:
        """``(run key + block, ready_s)`` of every block held, oldest first: the per-block tier's
        ``lru.items()`` (for the tests)."""
        rows: list[tuple[int, float]] = []
        p = self.head
        while p is not None:
            k = p.run.key
            order = range(p.lo, p.hi) if p.asc else range(p.hi - 1, p.lo - 1, -1)
            for b in order:
                rows.append((k + b, p.ready_s))
            p = p.next
        return rows
