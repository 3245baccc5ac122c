"""Response caches at the gateway: exact-match and semantic.

A hit is answered after the cache's ``latency_s`` with no GPU work. Both report the two risks
of answering from a cache (Redis LangCache and Milvus document them: a semantic cache "gives up
the guarantee that a cache hit is always correct"):

- **false hits** (semantic only): the nearest stored question was close enough for the
  similarity threshold but needed another answer. Lowering the threshold raises the hit rate and
  the false-hit rate together; the cache takes both as measured at its threshold
  (:meth:`SemanticCache.at_threshold` interpolates a measured curve).
- **stale answers on multi-turn traffic**: a later turn of a conversation (``turn > 1`` or with
  history) depends on context the cache key does not hold; every hit on one is flagged
  ``stale_risk``. ``skip_multi_turn=True`` bypasses the cache for such requests instead.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from servecap.errors import ServecapError
from servecap.policy.gateway.decision import CacheHit
from servecap.policy.gateway.request import GatewayRequest


def is_multi_turn(req: GatewayRequest) -> bool:
    """A later turn of a conversation: its answer depends on the history."""
    return req.turn > 1 or req.history_tokens > 0


@dataclass(slots=True)
class ExactCache:
    """Answers a request whose ``duplicate_group`` was answered before (and is still held).

    Entries are written when a response completes (:meth:`store`), kept for ``ttl_s``, and the
    least recently used is evicted past ``capacity`` entries. Requests without a duplicate group
    always miss.
    """

    capacity: int = 100_000
    ttl_s: float = math.inf
    latency_s: float = 0.005
    skip_multi_turn: bool = False
    _entries: OrderedDict[int, float] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ServecapError("gateway.cache.capacity", self.capacity, "must be at least 1 entry")
        if not self.ttl_s > 0:
            raise ServecapError("gateway.cache.ttl_s", self.ttl_s, "must be positive (seconds)")
        _check_latency(self.latency_s)

    def lookup(self, req: GatewayRequest, now_s: float, rng: random.Random | None = None) -> CacheHit | None:
        key = req.duplicate_group
        multi = is_multi_turn(req)
        if key is None or (multi and self.skip_multi_turn):
            return None
        stored = self._entries.get(key)
        if stored is None:
            return None
        if now_s - stored > self.ttl_s:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return CacheHit("exact", self.latency_s, false_hit=False, stale_risk=multi)

    def store(self, req: GatewayRequest, now_s: float) -> None:
        """The response to ``req`` completed at ``now_s``: cache it."""
        key = req.duplicate_group
        if key is None or (self.skip_multi_turn and is_multi_turn(req)):
            return
        self._entries[key] = now_s
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(slots=True)
class SemanticCache:
    """Answers a request from a similar earlier one with probability ``hit_rate``; a hit is a
    false hit with probability ``false_hit_rate``. Exact repeats (a ``duplicate_group`` answered
    before) are hits of kind ``exact`` through the embedded :class:`ExactCache`. ``classes``
    limits the cache to some request classes (None: all)."""

    hit_rate: float
    false_hit_rate: float = 0.0
    latency_s: float = 0.02
    classes: frozenset[str] | None = None
    skip_multi_turn: bool = False
    exact: ExactCache | None = None

    def __post_init__(self) -> None:
        _check_rate("gateway.cache.hit_rate", self.hit_rate)
        _check_rate("gateway.cache.false_hit_rate", self.false_hit_rate)
        _check_latency(self.latency_s)

    @classmethod
    def at_threshold(
        cls, threshold: float, curve: Sequence[tuple[float, float, float]], **kwargs: object
    ) -> SemanticCache:
        """The cache at similarity ``threshold``, its hit and false-hit rates interpolated
        linearly in a measured ``curve`` of ``(threshold, hit_rate, false_hit_rate)`` points."""
        pts = sorted(curve)
        if len(pts) < 1:
            raise ServecapError("gateway.cache.curve", list(curve), "needs at least one point")
        xs = [p[0] for p in pts]
        if len(set(xs)) != len(xs):
            raise ServecapError("gateway.cache.curve", list(curve), "thresholds must be distinct")
        if not xs[0] <= threshold <= xs[-1]:
            raise ServecapError("gateway.cache.threshold", threshold, f"outside the measured curve [{xs[0]}, {xs[-1]}]")
        i = bisect.bisect_left(xs, threshold)
        if xs[i] == threshold:
            _, hit, false = pts[i]
        else:
            (x0, h0, f0), (x1, h1, f1) = pts[i - 1], pts[i]
            w = (threshold - x0) / (x1 - x0)
            hit, false = h0 + w * (h1 - h0), f0 + w * (f1 - f0)
        return cls(hit, false, **kwargs)  # type: ignore[arg-type]

    def lookup(self, req: GatewayRequest, now_s: float, rng: random.Random) -> CacheHit | None:
        if self.classes is not None and req.request_class not in self.classes:
            return None
        multi = is_multi_turn(req)
        if multi and self.skip_multi_turn:
            return None
        if self.exact is not None:
            hit = self.exact.lookup(req, now_s)
            if hit is not None:
                return hit
        if rng.random() >= self.hit_rate:
            return None
        false_hit = rng.random() < self.false_hit_rate
        return CacheHit("semantic", self.latency_s, false_hit=false_hit, stale_risk=multi)

    def store(self, req: GatewayRequest, now_s: float) -> None:
        if self.exact is not None and (self.classes is None or req.request_class in self.classes):
            self.exact.store(req, now_s)


def _check_rate(name: str, v: float) -> None:
    if not 0.0 <= v <= 1.0:
        raise ServecapError(name, v, "must be a probability in [0, 1]")


def _check_latency(v: float) -> None:
    if not 0.0 <= v < math.inf:
        raise ServecapError("gateway.cache.latency_s", v, "must be >= 0 seconds")
