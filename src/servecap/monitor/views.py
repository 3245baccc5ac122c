"""Live replicas as :class:`servecap.policy.view.ReplicaView` values: what a router or an
autoscaler policy reads of a replica, here from its last ``/metrics`` scrape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servecap.monitor.scrape import Down
from servecap.monitor.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class ScrapedReplica:
    """A replica as last scraped. ``/metrics`` does not expose in-flight tokens or the prefix
    cache's block keys, so ``num_inflight_tokens`` is 0 and ``prefix_hit_blocks`` answers 0
    (the view's documented "cannot tell")."""

    replica_id: int
    pool: str
    is_ready: bool
    num_waiting: int
    num_running: int
    kv_usage: float
    num_inflight_tokens: int = 0

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        return 0

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        return (0, 0, 0, 0)


def replica_views(results: Sequence[Snapshot | Down], pool: str = "default") -> list[ScrapedReplica]:
    """One view per target, in order; a down target is a replica that is not ready."""
    out = []
    for i, r in enumerate(results):
        if isinstance(r, Down):
            out.append(ScrapedReplica(i, pool, False, 0, 0, 0.0))
        else:
            out.append(
                ScrapedReplica(
                    i,
                    pool,
                    True,
                    int(r.gauges.get("waiting", 0.0)),
                    int(r.gauges.get("running", 0.0)),
                    float(r.gauges.get("kv_usage", 0.0)),
                )
            )
    return out
