"""KV tiers below GPU memory at the cache-replay fidelity: each replica's CPU DRAM and local SSD
tiers and the fleet's shared remote store, fed by the replay's GPU evictions and read past its
GPU prefix hits (:mod:`servecap.fleet.cache_replay`).

The rules are the engine's (:class:`~servecap.sim.kv_tiers.TierStore`, read there for the
sources), block for block; only the bookkeeping differs: the tiers hold runs of blocks
(:mod:`servecap.fleet.run_tiers`), like the replay's GPU cache, where the engine's store holds
one LRU entry per block. The same calls give the same blocks in the same LRU order with the same
ready times, so the same hits, loads and occupancies (``tests/fleet/test_run_tiers.py`` drives
both with random calls and compares them after each):

- per replica, its private tiers (cpu, then ssd), exclusive, LRU, a tier over its capacity
  pushing its oldest blocks one tier down; capacities in logical blocks from the tier's bytes as
  the engine derives them (:meth:`~servecap.sim.kv_tiers.TierSetup.capacity_keys`:
  ``capacity_bytes // (block_bytes_per_gpu x gpus)``);
- one shared remote store for the fleet (as :func:`servecap.fleet.simulate_fleet` makes it:
  :class:`~servecap.fleet.shared_kv_store.SharedKvStores`), inclusive, written with every block
  a replica's GPU evicts;
- a run the replay's GPU cache evicts (:meth:`ReplayTiers.demote`) is written to the tiers as
  ``TierStore.demote_range`` writes it: block ``b`` of the run keyed ``run key + b``, last block
  first, each tier's new blocks booked as one write on the replica's channel into it
  (``n x store_s`` from when the channel is free; a block is readable once the write ends), the
  blocks a private tier pushes out written into the next one;
- on admission, past the GPU's prefix hit, the leading blocks found below GPU memory are
  counted at the fastest tier holding each readable (cpu, ssd, remote) up to the first block
  held nowhere, and promoted (``TierStore.promote``: the private tiers give them up, the remote
  store moves them to its recent end); the request then holds them in GPU memory like its other
  blocks, so the replay publishes them to its GPU cache. Their load time, ``latency + bytes /
  read bandwidth`` per tier (:func:`servecap.core.kv_tiers.load_s`), enters the prefill the way
  the engine charges it: the step that admits the request takes ``TierStore.step_s(load,
  compute)`` (layer-wise overlap, :func:`servecap.core.kv_tiers.with_load_s`), the later prefill
  chunks only their compute;
- the precise-prefix router's tier score (:class:`servecap.policy.routers.PrecisePrefix`:
  ``(gpu + cpu_weight x cpu + ssd_weight x ssd + remote_weight x remote) / blocks``, each block
  past a replica's GPU hit at the fastest tier holding it, reads only) is mirrored by
  :meth:`ReplayTiers.router_bonus`: a run's pieces in every tier come from one hash lookup, and a
  replica whose private tiers hold none of the run reads only the shared store's pieces.

What differs from the engine: the replay has no preemptions, so no preempted request's private
blocks are offloaded; the tiers' clock is the request's arrival (the engine's is the step that
admits it), so a write still under way at arrival is not yet readable.

Compiled by mypyc (setup.py); the pure-Python module behaves identically.
"""

from __future__ import annotations

from servecap.core.kv_tiers import KvTier, load_s, store_s, with_load_s
from servecap.fleet.run_tiers import Piece, RunBelow, RunTier, Span
from servecap.sim.kv_tiers import TierSetup

TIER_ORDER = ("gpu", "cpu", "ssd", "remote")


def _piece_lo(p: Piece) -> int:
    return p.lo


class ReplayTiers:
    """The tiers of a one-pool fleet of ``num_replicas`` replicas (see the module doc)."""

    def __init__(
        self,
        setup: TierSetup,
        num_replicas: int,
        block_size: int,
        tier_weights: tuple[float, float, float] = (0.8, 0.8, 0.5),
    ) -> None:
        self.setup = setup
        self.block_size = block_size
        self.index: dict[int, RunBelow] = {}
        kinds = [t for t in setup.tiers if t.name != "remote"]
        remote = setup.tier("remote")
        self.num_private = len(kinds)
        # private[i][level]: replica i's cpu and ssd tiers (those the setup has, fastest first)
        self.private: list[list[RunTier]] = [
            [RunTier(t, setup.capacity_keys(t), i, level, self.index) for level, t in enumerate(kinds)]
            for i in range(num_replicas)
        ]
        self.remote: RunTier | None = None
        if remote is not None:
            self.remote = RunTier(remote, setup.capacity_keys(remote), -1, len(kinds), self.index)
            kinds.append(remote)
        self.kinds: list[KvTier] = kinds
        self.num_levels = len(kinds)
        self.names = [t.name for t in kinds]
        weight_of = {"cpu": tier_weights[0], "ssd": tier_weights[1], "remote": tier_weights[2]}
        self.level_weights = [weight_of[n] for n in self.names]
        # seconds one block's write takes on each level (every GPU's shard in parallel), and when
        # each replica's channel into each level is free (replica i, level l: i x levels + l)
        self.write_block_s = [store_s(t, setup.key_bytes_per_gpu) for t in kinds]
        self.write_free_s = [0.0] * (num_replicas * len(kinds))
        self.hits = [0] * len(kinds)  # tokens loaded from each level, all replicas
        self.load_s = 0.0
        self.now_s = 0.0
        # the index entries of the last prompt router_bonus read (a copy of its keys), for extend()
        self._runs_keys: list[int] | None = None
        self._runs: list[RunBelow | None] = []

    def set_time(self, now_s: float) -> None:
        """Every replica's tiers read and start their writes at ``now_s``."""
        self.now_s = now_s

    def _write(self, replica: int, level: int, n: int) -> float:
        """Book ``n`` blocks' write on the replica's channel into ``level`` from now; returns when
        it ends (``TierStore._write_at``)."""
        slot = replica * self.num_levels + level
        free = self.write_free_s[slot]
        now = self.now_s
        start = now if now > free else free
        end = start + n * self.write_block_s[level]
        self.write_free_s[slot] = end
        return end

    def demote(self, replica: int, key: int, length: int) -> None:
        """Replica ``replica``'s GPU cache let go of the ``length`` blocks of run ``key``
        (``TierStore.demote_range(key, 0, length)``)."""
        self._runs_keys = None
        self._runs = []
        run = self.index.get(key)
        if run is None:
            run = RunBelow(key)  # indexed once a tier holds some of it
        if self.num_private:
            spans = [Span(run, 0, length, False)]
            tiers = self.private[replica]
            for level in range(self.num_private):
                t = tiers[level]
                new = 0
                for s in spans:
                    new += t.absent(s.run, s.lo, s.hi)
                ready = self._write(replica, level, new) if new else self.now_s
                out: list[Span] | None = [] if level + 1 < self.num_private else None
                for s in spans:
                    t.put(s.run, s.lo, s.hi, s.asc, ready, out)
                if not out:
                    break
                spans = out
        remote = self.remote
        if remote is not None:
            new = remote.absent(run, 0, length)
            ready = self._write(replica, self.num_private, new) if new else self.now_s
            remote.put(run, 0, length, False, ready, None)

    def _walk(
        self,
        replica: int,
        runs: list[RunBelow | None],
        keys: list[int],
        run_ends: list[int],
        start: int,
        stop: int,
        found: list[int],
        segs: list[Piece] | None,
    ) -> None:
        """Blocks found per level (added to ``found``) for the leading blocks ``[start, stop)`` of
        the runs ``keys`` ending at ``run_ends`` on replica ``replica``: each at the fastest level
        holding it readable, up to the first held nowhere (``TierStore.find``). ``runs``: the
        runs' index entries looked up so far (extended here). With ``segs``, the pieces the blocks
        were found in, each once per stretch of blocks, as ``Piece(tier, run, lo, hi)`` records
        (not linked). Reads only."""
        now = self.now_s
        bit = 1 << replica
        rlevel = self.num_private
        lo = 0
        for j in range(len(keys)):
            end = run_ends[j]
            if end > stop:
                end = stop
            b = start if start > lo else lo
            if b < end:
                while len(runs) <= j:
                    runs.append(self.index.get(keys[len(runs)]))
                run = runs[j]
                if run is None:
                    return
                o = b - lo
                e = end - lo
                mine = run.mask & bit
                while o < e:
                    best: Piece | None = None
                    level = rlevel + 1
                    if mine:
                        for p in run.private:
                            t = p.tier
                            if t.replica == replica and t.level < level and p.lo <= o < p.hi and p.ready_s <= now:
                                best = p
                                level = t.level
                    if best is None:
                        for p in run.remote:
                            if p.lo <= o < p.hi:
                                if p.ready_s <= now:
                                    best = p
                                    level = rlevel
                                break
                    if best is None:
                        return
                    x = best.hi if best.hi < e else e
                    if mine and level:  # a faster tier's blocks further on end the stretch
                        for p in run.private:
                            t = p.tier
                            if t.replica == replica and t.level < level and o < p.lo < x and p.ready_s <= now:
                                x = p.lo
                    found[level] += x - o
                    if segs is not None:
                        segs.append(Piece(best.tier, run, o, x, True, 0.0))
                    o = x
            lo = run_ends[j]
            if lo >= stop:
                break

    def extend(
        self, replica: int, keys: list[int], run_ends: list[int], hit: int, max_blocks: int
    ) -> tuple[int, float]:
        """Past replica ``replica``'s GPU hit of ``hit`` blocks, the leading blocks (at most to
        ``max_blocks``) found in its tiers, promoted (``TierStore.promote``): ``(blocks, load
        seconds)``."""
        stop = run_ends[-1] if run_ends[-1] < max_blocks else max_blocks
        if hit >= stop:
            return 0, 0.0
        found = [0] * self.num_levels
        segs: list[Piece] = []
        cached = self._runs_keys
        runs: list[RunBelow | None] = self._runs if cached is not None and cached == keys else []
        self._runs_keys = None
        self._runs = []
        self._walk(replica, runs, keys, run_ends, hit, stop, found, segs)
        if not segs:
            return 0, 0.0
        for s in segs:
            t = s.tier
            run = s.run
            p = t.find(run, s.lo)
            assert p is not None and p.hi >= s.hi
            if t.replica < 0:  # the shared store keeps them, now its most recently used
                ready = p.ready_s
                t.cut(p, s.lo, s.hi)
                t.add(run, s.lo, s.hi, True, ready)
            else:  # a private tier gives them up
                t.cut(p, s.lo, s.hi)
                t.size -= s.hi - s.lo
        n = 0
        total = 0.0
        key_bytes = self.setup.key_bytes_per_gpu
        for level in range(self.num_levels):
            m = found[level]
            if m:
                n += m
                self.hits[level] += m * self.block_size
                total += load_s(self.kinds[level], m * key_bytes)
        self.load_s += total
        return n, total

    def step_s(self, replica: int, load_s: float, compute_s: float) -> float:
        """The admitting step's time: ``load_s`` of loads feeding ``compute_s`` (the engine's rule,
        ``TierStore.step_s``)."""
        return with_load_s(load_s, compute_s, self.setup.num_layers, layerwise=self.setup.layerwise)

    def router_bonus(self, hits: list[int], keys: list[int], run_ends: list[int], keyed: int) -> list[float]:
        """Each replica's tier-weighted blocks past its GPU hit (``cpu_weight x cpu + ssd_weight x
        ssd + remote_weight x remote``), as PrecisePrefix adds them to the GPU's blocks.

        A replica whose private tiers hold none of the prompt's runs finds only the shared
        store's blocks: the stretch of them from its hit on, read off the store's readable
        stretches along the prompt (found once for every replica) instead of its own walk."""
        n = len(self.private)
        out = [0.0] * n
        weights = self.level_weights
        runs: list[RunBelow | None] = []
        mask = 0  # replicas whose private tiers hold some of the runs
        lo = 0
        for j in range(len(keys)):
            if lo >= keyed:
                break
            run = self.index.get(keys[j])
            runs.append(run)
            if run is not None:
                mask |= run.mask
            lo = run_ends[j]
        self._runs_keys = keys[:]  # extend() reads the same runs (no tier changes in between)
        self._runs = runs
        found = [0] * self.num_levels
        starts: list[int] | None = None  # the store's readable stretches [starts[k], ends[k])
        ends: list[int] = []
        rlevel = self.num_private
        for i in range(n):
            h = hits[i]
            if h >= keyed:
                continue
            for li in range(len(found)):
                found[li] = 0
            if (mask >> i) & 1:
                self._walk(i, runs, keys, run_ends, h, keyed, found, None)
            elif self.remote is not None:
                if starts is None:
                    starts = []
                    self._stretches(runs, run_ends, keyed, starts, ends)
                for k in range(len(starts)):
                    if starts[k] <= h < ends[k]:
                        found[rlevel] = ends[k] - h
                        break
            s = 0.0
            for li in range(len(found)):
                s += weights[li] * found[li]
            out[i] = s
        return out

    def _stretches(
        self, runs: list[RunBelow | None], run_ends: list[int], stop: int, starts: list[int], ends: list[int]
    ) -> None:
        """The shared store's blocks readable now among the prompt's first ``stop``, as maximal
        stretches ``[starts[k], ends[k])`` in prompt blocks, ascending."""
        now = self.now_s
        lo = 0
        for j in range(len(runs)):
            run = runs[j]
            end = run_ends[j] if run_ends[j] < stop else stop
            if run is not None and run.remote:
                # its readable pieces in block order (a run has one or a few)
                ps = sorted([p for p in run.remote if p.ready_s <= now and p.lo < end - lo], key=_piece_lo)
                for p in ps:
                    a = lo + p.lo
                    b = lo + p.hi if lo + p.hi < end else end
                    if ends and ends[-1] == a:
                        ends[-1] = b
                    else:
                        starts.append(a)
                        ends.append(b)
            lo = run_ends[j]
            if lo >= stop:
                break

    def hit_tokens(self) -> dict[str, int]:
        """Prompt tokens loaded from each tier, summed over the replicas (cpu, ssd, remote order)."""
        return dict(zip(self.names, self.hits, strict=True))

    def occupancy(self) -> list[tuple[str, int, int]]:
        """``(tier, blocks held, capacity)`` of every replica's private tiers and of the shared store."""
        rows: list[tuple[str, int, int]] = []
        for tiers in self.private:
            for t in tiers:
                rows.append((t.tier.name, t.size, t.capacity))
        if self.remote is not None:
            rows.append((self.remote.tier.name, self.remote.size, self.remote.capacity))
        return rows
