"""A bounded gateway queue with priority tiers, a maximum wait, and shedding of the lowest tier.

Requests wait in tiers (lower ``tier`` first, first come first served within a tier). The queue
holds at most ``capacity`` requests; when it is full, a new request of a better tier pushes out
the newest request of the worst tier (which is rejected as ``shed``), and a new request whose
tier is no better than the worst queued one is rejected (``queue_full``). A request that has
waited ``max_wait_s`` leaves with ``queue_timeout``. This is the admission control of the
overload literature: shed the least valuable work first (Welsh and Culler, "Adaptive overload
control for busy Internet servers", USITS 2003), with bounded waits (Envoy's
``max_pending_requests`` and route timeouts; LiteLLM's request timeout).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from servecap.errors import ServecapError

T = TypeVar("T")


@dataclass(slots=True)
class _Entry(Generic[T]):
    seq: int
    tier: int
    enqueued_s: float
    item: T
    live: bool = True


@dataclass(slots=True)
class GatewayQueue(Generic[T]):
    """``capacity`` places; ``max_wait_s`` (inf: wait for ever)."""

    capacity: int
    max_wait_s: float = math.inf
    _seq: int = 0
    _size: int = 0
    _best: list[tuple[int, int, _Entry[T]]] = field(default_factory=list)  # (tier, seq): next to serve
    _worst: list[tuple[int, int, _Entry[T]]] = field(default_factory=list)  # (-tier, -seq): next to shed
    _fifo: deque[_Entry[T]] = field(default_factory=deque)  # arrival order: next to time out

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ServecapError("gateway.queue.capacity", self.capacity, "must be at least 1")
        if not self.max_wait_s > 0:
            raise ServecapError("gateway.queue.max_wait_s", self.max_wait_s, "must be positive (seconds)")

    def __len__(self) -> int:
        return self._size

    def push(self, item: T, tier: int, now_s: float) -> tuple[bool, list[T]]:
        """Offer ``item``: ``(accepted, shed)`` — whether it got a place, and the items pushed out
        to make room (at most one). Not accepted means rejected as ``queue_full``."""
        shed: list[T] = []
        if self._size >= self.capacity:
            worst = self._peek_worst()
            assert worst is not None
            if tier >= worst.tier:
                return False, shed
            self._remove(worst)
            shed.append(worst.item)
        entry = _Entry(self._seq, tier, now_s, item)
        self._seq += 1
        heapq.heappush(self._best, (tier, entry.seq, entry))
        heapq.heappush(self._worst, (-tier, -entry.seq, entry))
        self._fifo.append(entry)
        self._size += 1
        return True, shed

    def pop(self, now_s: float) -> T | None:
        """The next item to serve (best tier, oldest first), after timing out the overdue."""
        self.expire(now_s)
        while self._best:
            _, _, e = heapq.heappop(self._best)
            if e.live:
                e.live = False
                self._size -= 1
                return e.item
        return None

    def peek(self, now_s: float) -> T | None:
        """The item :meth:`pop` would return, left in place."""
        self.expire(now_s)
        while self._best and not self._best[0][2].live:
            heapq.heappop(self._best)
        return self._best[0][2].item if self._best else None

    def expire(self, now_s: float) -> list[T]:
        """Remove and return the items that have waited longer than ``max_wait_s`` by ``now_s``."""
        out: list[T] = []
        while self._fifo:
            e = self._fifo[0]
            if not e.live:
                self._fifo.popleft()
                continue
            if now_s <= e.enqueued_s + self.max_wait_s:  # the same sum as next_timeout_s (no rounding gap)
                break
            self._fifo.popleft()
            self._remove(e)
            out.append(e.item)
        return out

    def next_timeout_s(self) -> float | None:
        """When the oldest waiting item times out (None: nothing waits, or no maximum wait)."""
        while self._fifo and not self._fifo[0].live:
            self._fifo.popleft()
        if not self._fifo or math.isinf(self.max_wait_s):
            return None
        return self._fifo[0].enqueued_s + self.max_wait_s

    def _peek_worst(self) -> _Entry[T] | None:
        while self._worst and not self._worst[0][2].live:
            heapq.heappop(self._worst)
        return self._worst[0][2] if self._worst else None

    def _remove(self, e: _Entry[T]) -> None:
        if e.live:
            e.live = False
            self._size -= 1
