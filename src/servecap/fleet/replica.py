"""One replica of a fleet: an engine behind :class:`~servecap.sim.engine_server.EngineServer`,
with a lifecycle (starting -> ready -> draining -> stopped, or failed) and the
:class:`~servecap.policy.view.ReplicaView` the router and autoscaler read.

The replica also keeps what the fleet's results need: the requests it holds (their specs, for
retries and records), the time-average of requests in it (Little's law per replica: its
``area_s`` — the integral of requests in it over time — equals the sum of their times in it),
and its billable span (from ``requested_s`` to ``stopped_s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servecap.errors import ServecapError
from servecap.fleet.pools import DRAINING, FAILED, READY, STARTING, STOPPED, PoolReplica
from servecap.sim.engine import Engine
from servecap.sim.engine_server import EngineServer
from servecap.sim.server import ArrivingRequest, FinishedRequest

__all__ = ["DRAINING", "FAILED", "READY", "STARTING", "STOPPED", "Replica", "ReplicaSnapshot"]


class Replica(PoolReplica):
    """A replica of a co-located pool (role ``both``): its lifecycle and view are the core's
    (:class:`~servecap.fleet.pools.PoolReplica`); it adds the engine's server and the requests
    it holds (their specs, for retries and records)."""

    def __init__(
        self, replica_id: int, pool: str, pool_index: int, engine: Engine, requested_s: float, *, keep_ids: bool = True
    ) -> None:
        super().__init__(replica_id, pool, pool_index, "both", engine, requested_s)
        self.server = EngineServer(engine)
        self.inflight: dict[int, tuple[ArrivingRequest, float]] = {}  # id -> (spec, time added here)
        self.keep_ids = keep_ids

    # -- serving ----------------------------------------------------------------------------------

    def _count(self, t_s: float) -> None:
        """Integrate the requests in the replica up to ``t_s`` (before one enters or leaves)."""
        self.area_s += len(self.inflight) * (t_s - self.t_last_s)
        self.t_last_s = t_s

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        """Hand the request to the engine at ``now_s`` (the caller advanced it to ``now_s``)."""
        try:
            ok = self.server.add(request, now_s)
        except ServecapError as err:  # name the pool of a request its pool can never hold
            raise ServecapError(err.field, err.value, f"{err.problem} (pool {self.pool!r})") from None
        if ok:
            self._count(now_s)
            self.inflight[request.request_id] = (request, now_s)
            self.routed += 1
        return ok

    def advance(self, t_s: float, *, early: bool = False) -> list[tuple[FinishedRequest, ArrivingRequest, float]]:
        """Run the engine up to ``t_s`` (the seam's tie rule); the requests that finished, in
        the order they finished, with their specs and the time they were added here. With
        ``early``, stop right after the first step that finished requests (the seam's rule)."""
        server = self.server
        out: list[tuple[FinishedRequest, ArrivingRequest, float]] = []
        while True:
            server.advance_to(t_s)
            done = server.take_finished()
            if not done:
                return out
            for r in done:
                end = r.end_s
                assert end is not None
                self._count(end)
                spec, added = self.inflight.pop(r.request_id)
                self.sojourn_s += end - added
                self.completed += 1
                if self.keep_ids:
                    self.served_ids.append(r.request_id)
                self.last_finish_s = end
                out.append((r, spec, added))
            if early:
                return out

    def take_refused(self) -> Sequence[FinishedRequest]:
        return self.server.take_finished()

    def has_work(self) -> bool:
        return self.server.has_work()

    def close(self, t_s: float, state: str) -> list[tuple[ArrivingRequest, float]]:
        """Stop (or fail) at ``t_s``; returns the requests it still held."""
        self._count(t_s)
        self.state = state
        self.stopped_s = t_s
        left = list(self.inflight.values())
        for _, added in left:
            self.sojourn_s += t_s - added
        self.inflight.clear()
        return left


@dataclass(frozen=True, slots=True)
class ReplicaSnapshot:
    """A replica's gauges as last scraped (the router's stale view); the prefix cache is read
    live (it is not a scraped metric: routers keep their own index)."""

    replica: Replica
    replica_id: int
    pool: str
    is_ready: bool
    num_waiting: int
    num_running: int
    num_inflight_tokens: int
    kv_usage: float

    @classmethod
    def of(cls, r: Replica) -> ReplicaSnapshot:
        return cls(r, r.replica_id, r.pool, r.is_ready, r.num_waiting, r.num_running, r.num_inflight_tokens, r.kv_usage)

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        return self.replica.prefix_hit_blocks(block_keys)

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        return self.replica.prefix_tier_blocks(block_keys)
