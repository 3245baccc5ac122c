"""A fixed-window counter: at most ``limit`` units per window of ``window_s`` seconds, the way
LiteLLM's proxy counts a key's, user's or team's ``rpm_limit`` and ``tpm_limit``.

LiteLLM 1.106.2, ``litellm/proxy/hooks/parallel_request_limiter_v3.py``, without Redis (one proxy
process, counters in memory):

- ``should_rate_limit``: ``now_int = int(now)``; a request first reads the counter and is refused
  if it is already over the limit (``is_cache_list_over_limit``: ``counter > limit``), with no
  other change;
- else ``_in_memory_cache_sliding_window`` counts it: when no window entry is there or ``now_int -
  window_start >= window_size``, the window restarts at ``now_int`` with the counter at 1; else the
  counter goes up by 1. The request is refused when the counter is then ``> limit``: exactly
  ``limit`` pass a window, and the first refused one leaves the counter at ``limit + 1``;
- the entries are written with ``ttl=window_size``, but ``InMemoryCache.set_cache``
  (``litellm/caching/in_memory_cache.py``, ``allow_ttl_override``) keeps the expiry of an entry
  that has not expired: the window's entries vanish ``window_size`` after the request that
  created them (its wall-clock time, not a whole second), however often the window restarted;
- ``window_size = LITELLM_RATE_LIMIT_WINDOW_SIZE`` (environment, default 60 s): ``rpm_limit``
  counts requests per such window.

Hence, for a window opened by a request at ``t`` (start ``floor(t)``, entries gone after ``t +
window_s``):

- if it ends over the limit (a request was refused), every request is refused until ``t +
  window_s`` (the stale counter fails the first read), then a new window opens;
- if it ends at or under the limit, a request from ``floor(t) + window_s`` on restarts it at its
  whole second — but the entries still vanish after ``t + window_s``, so what that restarted
  window counted in the fraction of a second before is forgotten, and a third window opens at the
  next request. A key can pass up to ``3 x limit`` within about a second there (measured with the
  proxy: docs/gateway.md).

Nothing refills inside a window (unlike a token bucket, :mod:`servecap.policy.gateway.bucket`).
Whole seconds are those of the clock passed in (the simulator's starts at 0 s).
"""

from __future__ import annotations

import math

from servecap.errors import ServecapError


class FixedWindow:
    """One counter; the clock is passed in and must not go backwards."""

    __slots__ = ("_expires_s", "_start_s", "_updated_s", "_used", "capacity", "window_s")

    def __init__(self, limit: float, window_s: float, *, field: str = "window") -> None:
        if not limit > 0 or math.isinf(limit):
            raise ServecapError(f"{field}.limit", limit, "must be a positive number (units per window)")
        if not window_s > 0 or math.isinf(window_s):
            raise ServecapError(f"{field}.window_s", window_s, "must be a positive number of seconds")
        self.capacity = float(limit)
        self.window_s = float(window_s)
        self._start_s: float | None = None  # the window's whole-second start (None: no entries)
        self._expires_s = -math.inf  # when the entries vanish
        self._used = 0.0
        self._updated_s = -math.inf

    def level(self, now_s: float) -> float:
        """Units a request at ``now_s`` could still take (negative: over the limit)."""
        return self.capacity - self._used_at(now_s)

    def can_take(self, n: float, now_s: float) -> bool:
        return self._used_at(now_s) + n <= self.capacity

    def try_take(self, n: float, now_s: float) -> bool:
        """Count ``n`` units and pass if the window has room; else refuse (counted as LiteLLM does)."""
        if self.can_take(n, now_s):
            self._count(n, now_s)
            return True
        self.refuse(n, now_s)
        return False

    def charge(self, n: float, now_s: float) -> None:
        """Count ``n`` admitted units whatever the level (a post-charged response)."""
        self._used_at(now_s)
        self._count(n, now_s)

    def refuse(self, n: float, now_s: float) -> None:
        """A request refused for lack of room: counted when it passed the first read (the
        counter not yet over the limit), which puts the window over the limit."""
        if self._used_at(now_s) <= self.capacity:
            self._count(n, now_s)

    def ready_at_s(self, n: float, now_s: float) -> float:
        """When ``n`` units will fit: now, the window's restart or its entries' expiry, or never
        (``n > limit``)."""
        if n > self.capacity:
            return math.inf
        if self.can_take(n, now_s):
            return now_s
        return self._free_at_s()

    def debt_paid_at_s(self, now_s: float) -> float:
        """When the counter is below the limit again (a post-charge past it): the window's end."""
        return now_s if self._used_at(now_s) < self.capacity else self._free_at_s()

    def _free_at_s(self) -> float:
        gone = math.nextafter(self._expires_s, math.inf)  # expired once the clock is past it
        if self._start_s is None or self._used > self.capacity:
            return gone  # over the limit: refused until the entries vanish
        return min(float(math.ceil(self._start_s + self.window_s)), gone)

    def _used_at(self, now_s: float) -> float:
        """What a request at ``now_s`` is counted against (drops expired entries)."""
        if now_s < self._updated_s:
            raise ServecapError("now_s", now_s, f"the clock went backwards (last {self._updated_s})")
        self._updated_s = now_s
        if self._start_s is not None and now_s > self._expires_s:
            self._start_s, self._used = None, 0.0
        if self._start_s is None:
            return 0.0
        if self._used > self.capacity:
            return self._used  # the first read refuses: no restart
        if math.floor(now_s) - self._start_s >= self.window_s:
            return 0.0  # counting it will restart the window
        return self._used

    def _count(self, n: float, now_s: float) -> None:
        if self._start_s is None:
            self._start_s, self._used, self._expires_s = float(math.floor(now_s)), 0.0, now_s + self.window_s
        elif self._used <= self.capacity and math.floor(now_s) - self._start_s >= self.window_s:
            self._start_s, self._used = float(math.floor(now_s)), 0.0  # the entries keep their expiry
        self._used += n
