"""KV tiers below GPU memory at the cache-replay fidelity: each replica's CPU DRAM and local SSD
tiers and the fleet's shared remote store, fed by the replay's GPU evictions and read past its
GPU prefix hits (:mod:`servecap.fleet.cache_replay`).

The tiers are the full simulation's own objects, so the rules are the engine's rules
(:mod:`servecap.sim.kv_tiers`, read there for the sources):

- one :class:`~servecap.sim.kv_tiers.TierStore` per replica, its private tiers (cpu, then ssd)
  exclusive, LRU, a tier over its capacity pushing its oldest block one tier down; capacities
  in logical blocks from the tier's bytes as the engine derives them
  (:meth:`~servecap.sim.kv_tiers.TierSetup.capacity_keys`: ``capacity_bytes //
  (block_bytes_per_gpu x gpus)``);
- one shared remote store for the fleet (:class:`~servecap.fleet.shared_kv_store.SharedKvStores`,
  as :func:`servecap.fleet.simulate_fleet` makes it), inclusive, written with every block a
  replica's GPU evicts;
- a run the replay's GPU cache evicts (:meth:`demote`) is written to the tiers block by block,
  block ``b`` of the run keyed ``run key + b`` (the engine's ``KeyRuns`` keys), last block
  first, as ``KvPool.on_evict`` feeds ``TierStore.demote_range``; writes take the tier's write
  bandwidth (a block is readable once written);
- on admission, past the GPU's prefix hit, the leading blocks found below GPU memory are
  counted at the fastest tier holding each (cpu, ssd, remote) up to the first block held
  nowhere, and promoted (``TierStore.promote``: the private tiers give them up, the remote store
  keeps them); the request then holds them in GPU memory like its other blocks, so the replay
  publishes them to its GPU cache. Their load time, ``latency + bytes / read bandwidth`` per
  tier (:func:`servecap.core.kv_tiers.load_s`), enters the prefill the way the engine charges it:
  the step that admits the request takes ``TierStore.step_s(load, compute)`` (layer-wise overlap,
  :func:`servecap.core.kv_tiers.with_load_s`), the later prefill chunks only their compute.
- the precise-prefix router's tier score (:class:`servecap.policy.routers.PrecisePrefix`:
  ``(gpu + cpu_weight x cpu + ssd_weight x ssd + remote_weight x remote) / blocks``, each block
  past a replica's GPU hit at the fastest tier holding it, reads only) is mirrored by
  :meth:`router_bonus`.

What differs from the engine: the replay has no preemptions, so no preempted request's private
blocks are offloaded; the tiers' clock is the request's arrival (the engine's is the step that
admits it), so a write still under way at arrival is not yet readable.
"""

from __future__ import annotations

from servecap.fleet.shared_kv_store import SharedKvStores
from servecap.sim.kv_tiers import LruTier, TierSetup, TierStore

TIER_ORDER = ("gpu", "cpu", "ssd", "remote")


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
        shared = SharedKvStores().store_for(setup)
        self.stores = [TierStore(setup, shared) for _ in range(num_replicas)]
        self.names = [t.tier.name for t in self.stores[0].levels]
        weight_of = {"cpu": tier_weights[0], "ssd": tier_weights[1], "remote": tier_weights[2]}
        self.level_weights = [weight_of[n] for n in self.names]
        self.load_s = 0.0

    def set_time(self, now_s: float) -> None:
        """Every replica's tiers read and start their writes at ``now_s``."""
        for s in self.stores:
            s.now_s = now_s

    def demote(self, replica: int, key: int, length: int) -> None:
        """Replica ``replica``'s GPU cache let go of the ``length`` blocks of run ``key``."""
        self.stores[replica].demote_range(key, 0, length)

    def _walk(
        self, store: TierStore, keys: list[int], run_ends: list[int], start: int, stop: int, out: list[int] | None
    ) -> list[int]:
        """Blocks found per level for the leading blocks ``[start, stop)`` of the runs ``keys``
        ending at ``run_ends`` (each at the fastest level holding it, up to the first held
        nowhere); their keys appended to ``out`` when given. Reads only."""
        levels = store.levels
        found = [0] * len(levels)
        now = store.now_s
        lo = 0
        for j in range(len(keys)):
            end = run_ends[j]
            if end > stop:
                end = stop
            b = start if start > lo else lo
            while b < end:
                k = keys[j] + (b - lo)
                hit = False
                for li in range(len(levels)):
                    ready = levels[li].lru.get(k)
                    if ready is not None and ready <= now:
                        found[li] += 1
                        hit = True
                        break
                if not hit:
                    return found
                if out is not None:
                    out.append(k)
                b += 1
            lo = run_ends[j]
            if lo >= stop:
                break
        return found

    def extend(
        self, replica: int, keys: list[int], run_ends: list[int], hit: int, max_blocks: int
    ) -> tuple[int, float]:
        """Past replica ``replica``'s GPU hit of ``hit`` blocks, the leading blocks (at most to
        ``max_blocks``) found in its tiers, promoted: ``(blocks, load seconds)``."""
        stop = run_ends[-1] if run_ends[-1] < max_blocks else max_blocks
        if hit >= stop:
            return 0, 0.0
        store = self.stores[replica]
        found_keys: list[int] = []
        self._walk(store, keys, run_ends, hit, stop, found_keys)
        n = len(found_keys)
        if not n:
            return 0, 0.0
        load = store.promote(found_keys, 0, n, self.block_size)
        self.load_s += load
        return n, load

    def step_s(self, replica: int, load_s: float, compute_s: float) -> float:
        """The admitting step's time: ``load_s`` of loads feeding ``compute_s`` (the engine's rule)."""
        return self.stores[replica].step_s(load_s, compute_s)

    def router_bonus(self, hits: list[int], keys: list[int], run_ends: list[int], keyed: int) -> list[float]:
        """Each replica's tier-weighted blocks past its GPU hit (``cpu_weight x cpu + ssd_weight x
        ssd + remote_weight x remote``), as PrecisePrefix adds them to the GPU's blocks."""
        out = [0.0] * len(self.stores)
        weights = self.level_weights
        for i in range(len(self.stores)):
            if hits[i] >= keyed:
                continue
            found = self._walk(self.stores[i], keys, run_ends, hits[i], keyed, None)
            s = 0.0
            for li in range(len(found)):
                s += weights[li] * found[li]
            out[i] = s
        return out

    def hit_tokens(self) -> dict[str, int]:
        """Prompt tokens loaded from each tier, summed over the replicas (cpu, ssd, remote order)."""
        out = dict.fromkeys(self.names, 0)
        for s in self.stores:
            for name, n in s.hit_tokens().items():
                out[name] += n
        return out

    def occupancy(self) -> list[tuple[str, int, int]]:
        """``(tier, blocks held, capacity)`` of every replica's private tiers and of the shared store."""
        rows: list[tuple[str, int, int]] = []
        for s in self.stores:
            for t in s.private:
                rows.append((t.tier.name, len(t.lru), t.capacity))
        remote: LruTier | None = self.stores[0].remote if self.stores else None
        if remote is not None:
            rows.append((remote.tier.name, len(remote.lru), remote.capacity))
        return rows
