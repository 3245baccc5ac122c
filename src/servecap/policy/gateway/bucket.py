"""A token bucket: at most ``capacity`` tokens, refilled continuously at ``rate_per_s``.

The bucket starts full (as Envoy's ``TokenBucket``, whose ``max_tokens`` "is also the number of
tokens that the bucket initially contains"). Over any window of length ``w`` the tokens taken
are at most ``rate_per_s x w + capacity``: the level never exceeds ``capacity`` at the start of
the window and rises by at most ``rate_per_s x w`` during it (Turner, "New directions in
communications", IEEE Communications Magazine 24(10), 1986; the (σ, ρ) envelope of Cruz,
IEEE Trans. Information Theory 37(1), 1991). :meth:`charge` may drive the level below zero (a
debt that later refills pay off): a gateway that charges tokens after a response completes.
"""

from __future__ import annotations

import math

from servecap.errors import ServecapError


class TokenBucket:
    """One bucket; the clock is passed in and must not go backwards."""

    __slots__ = ("_level", "_updated_s", "capacity", "rate_per_s")

    def __init__(self, capacity: float, rate_per_s: float, *, field: str = "bucket") -> None:
        if not capacity > 0 or math.isinf(capacity):
            raise ServecapError(f"{field}.capacity", capacity, "must be a positive number (the burst)")
        if not rate_per_s > 0 or math.isinf(rate_per_s):
            raise ServecapError(f"{field}.rate", rate_per_s, "must be a positive number (the refill rate)")
        self.capacity = float(capacity)
        self.rate_per_s = float(rate_per_s)
        self._level = float(capacity)
        self._updated_s = -math.inf

    def level(self, now_s: float) -> float:
        """Tokens in the bucket at ``now_s`` (negative: in debt)."""
        self._refill(now_s)
        return self._level

    def try_take(self, n: float, now_s: float) -> bool:
        """Take ``n`` tokens if the bucket holds them; False (and nothing taken) otherwise."""
        self._refill(now_s)
        if n <= self._level:
            self._level -= n
            return True
        return False

    def charge(self, n: float, now_s: float) -> None:
        """Take ``n`` tokens whatever the level (may leave a debt)."""
        self._refill(now_s)
        self._level -= n

    def can_take(self, n: float, now_s: float) -> bool:
        self._refill(now_s)
        return n <= self._level

    def ready_at_s(self, n: float, now_s: float) -> float:
        """When ``n`` tokens will be there (``now_s`` if they are; inf if ``n > capacity``)."""
        self._refill(now_s)
        if n > self.capacity:
            return math.inf
        if n <= self._level:
            return now_s
        return now_s + (n - self._level) / self.rate_per_s

    def refuse(self, n: float, now_s: float) -> None:
        """A request refused for lack of tokens: a bucket takes nothing (a fixed window counts it)."""

    def debt_paid_at_s(self, now_s: float) -> float:
        """When the level is above zero again (a debt paid off and a little more refilled):
        ``now_s`` if it is."""
        lvl = self.level(now_s)
        if lvl > 0:
            return now_s
        return now_s + (-lvl + 1e-6 * self.capacity) / self.rate_per_s

    def _refill(self, now_s: float) -> None:
        if now_s < self._updated_s:
            raise ServecapError("now_s", now_s, f"the clock went backwards (last {self._updated_s})")
        if self._updated_s != -math.inf:
            self._level = min(self.capacity, self._level + (now_s - self._updated_s) * self.rate_per_s)
        self._updated_s = now_s
