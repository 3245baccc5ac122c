"""The narrow, read-only view of one replica that policies see.

The fleet simulator implements it over an engine (exact, or as last scraped every
``scrape_interval``); the live monitor implements it over a server's ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class ReplicaView(Protocol):
    """What a router or an autoscaler may read of one replica."""

    @property
    def replica_id(self) -> int: ...

    @property
    def pool(self) -> str:
        """Name of the pool the replica belongs to."""
        ...

    @property
    def is_ready(self) -> bool:
        """Ready to take traffic (not starting, draining or failed)."""
        ...

    @property
    def num_waiting(self) -> int: ...

    @property
    def num_running(self) -> int: ...

    @property
    def num_inflight_tokens(self) -> int:
        """Prompt tokens not yet computed plus output tokens not yet produced, over its requests."""
        ...

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks in use, 0..1."""
        ...

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        """How many leading blocks of ``block_keys`` the replica's prefix cache holds (0 when it
        keeps no cache or the replica cannot tell)."""
        ...

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        """Leading blocks of ``block_keys`` by where the replica would take them from: its GPU
        cache, then (the blocks right after) its CPU tier, its SSD tier, the shared remote store;
        zeros where it has no such tier or cannot tell."""
        ...
