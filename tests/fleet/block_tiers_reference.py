"""The cache replay's KV tiers as they were kept before runs: the engine's per-block
:class:`~servecap.sim.kv_tiers.TierStore` (one ``OrderedDict`` entry per block) driven block by
block, the reference tests/fleet/test_run_tiers.py holds the run-keyed
:class:`servecap.fleet.cache_replay_tiers.ReplayTiers` equal to (same calls, same answers, same
blocks in the same LRU order with the same ready times)."""

from __future__ import annotations

from servecap.fleet.shared_kv_store import SharedKvStores
from servecap.sim.kv_tiers import LruTier, TierSetup, TierStore


class BlockReplayTiers:
    """The tiers of a one-pool fleet of ``num_replicas`` replicas, one ``TierStore`` each."""

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

    def blocks(self) -> list[list[tuple[int, float]]]:
        """Every tier's ``(key, ready_s)`` oldest first: each replica's private tiers, then the store."""
        rows = [list(t.lru.items()) for s in self.stores for t in s.private]
        if self.stores and self.stores[0].remote is not None:
            rows.append(list(self.stores[0].remote.lru.items()))
        return rows
