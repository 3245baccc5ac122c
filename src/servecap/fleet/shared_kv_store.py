"""The fleet's shared remote KV store (a Mooncake store, LMCache's remote backend): one LRU
tier object that every replica's engine writes its evicted blocks to and reads prefix hits
from, so a prefix computed on one replica is loaded, not recomputed, on another
(:mod:`servecap.sim.kv_tiers`).

Pools share a store when their blocks are the same bytes (same KV bytes per block on each GPU,
same GPUs per replica: in practice the same model and layout), since a block written by one is
only readable by a replica that lays the KV out the same way; its capacity is the first such
pool's ``remote_kv_tib``."""

from __future__ import annotations

from servecap.sim.kv_tiers import LruTier, TierSetup, shared_remote


class SharedKvStores:
    """The fleet's remote stores, one per block format, made on first use."""

    def __init__(self) -> None:
        self._stores: dict[tuple[int, int], LruTier] = {}

    def store_for(self, setup: TierSetup | None) -> LruTier | None:
        """The store a replica with ``setup``'s tiers reads and writes (None: it has none)."""
        if setup is None or setup.tier("remote") is None:
            return None
        key = (setup.key_bytes_per_gpu, setup.gpus)
        store = self._stores.get(key)
        if store is None:
            store = shared_remote(setup)
            assert store is not None
            self._stores[key] = store
        return store

    def occupancy(self) -> dict[tuple[int, int], tuple[int, int]]:
        """Blocks held and capacity, per block format."""
        return {k: (len(s.lru), s.capacity) for k, s in self._stores.items()}
