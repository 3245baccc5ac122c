"""A fixed-window counter: at most ``limit`` units per window of ``window_s`` seconds, the way
LiteLLM's proxy counts a key's, user's or team's ``rpm_limit`` and ``tpm_limit``.

LiteLLM 1.106.2, ``litellm/proxy/hooks/parallel_request_limiter_v3.py`` (no Redis: one proxy
process, counters in memory):

- ``should_rate_limit``: ``now_int = int(now)``; a request first reads the counter and is refused
  if it is already over the limit, else ``_in_memory_cache_sliding_window`` increments it;
- ``_in_memory_cache_sliding_window``: when no window is open or ``now_int - window_start >=
  window_size``, a new window opens at ``now_int`` with the counter at 1; else the counter goes
  up by 1 — so a window opens at the first request after the last one closed, at that request's
  whole second, not on a grid;
- ``is_cache_list_over_limit``: refused when ``counter > limit`` after the increment: exactly
  ``limit`` requests pass per window (checked, then counted, in one step under a lock);
- ``window_size = LITELLM_RATE_LIMIT_WINDOW_SIZE`` (environment, default 60 s): ``rpm_limit``
  counts requests per such window.

So, unlike a token bucket (:mod:`servecap.policy.gateway.bucket`), nothing refills during the
window, and a full burst is allowed again as soon as the next window opens: up to ``2 x limit``
within a couple of seconds across a window's end. A window's start is floored to a whole second
of the clock (LiteLLM's ``int(now)``; the simulator's clock starts at 0 s).

Not modelled: the counters' cache entries expire ``window_size`` after they were created
(``InMemoryCache.allow_ttl_override`` keeps the first TTL), so a window opened in the first
fraction of a second after the previous one's nominal end is forgotten when that fraction is
over (at most one second of requests counted in a window that then restarts).
"""

from __future__ import annotations

import math

from servecap.errors import ServecapError


class FixedWindow:
    """One counter; the clock is passed in and must not go backwards."""

    __slots__ = ("_start_s", "_updated_s", "_used", "capacity", "window_s")

    def __init__(self, limit: float, window_s: float, *, field: str = "window") -> None:
        if not limit > 0 or math.isinf(limit):
            raise ServecapError(f"{field}.limit", limit, "must be a positive number (units per window)")
        if not window_s > 0 or math.isinf(window_s):
            raise ServecapError(f"{field}.window_s", window_s, "must be a positive number of seconds")
        self.capacity = float(limit)
        self.window_s = float(window_s)
        self._start_s: float | None = None
        self._used = 0.0
        self._updated_s = -math.inf

    def level(self, now_s: float) -> float:
        """Units left in the window open at ``now_s`` (negative: charged past the limit)."""
        self._roll(now_s)
        return self.capacity - self._used

    def can_take(self, n: float, now_s: float) -> bool:
        self._roll(now_s)
        return self._used + n <= self.capacity

    def try_take(self, n: float, now_s: float) -> bool:
        """Count ``n`` units if the window has room; False (and nothing counted) otherwise."""
        if self.can_take(n, now_s):
            self._used += n
            return True
        return False

    def charge(self, n: float, now_s: float) -> None:
        """Count ``n`` units whatever the level (a post-charged response)."""
        self._roll(now_s)
        self._used += n

    def ready_at_s(self, n: float, now_s: float) -> float:
        """When ``n`` units will fit: now, the end of the open window, or never (``n > limit``)."""
        self._roll(now_s)
        if n > self.capacity:
            return math.inf
        if self._used + n <= self.capacity:
            return now_s
        return self.window_end_s()

    def debt_paid_at_s(self, now_s: float) -> float:
        """When the counter is below the limit again: the open window's end (counts reset)."""
        self._roll(now_s)
        return now_s if self._used < self.capacity else self.window_end_s()

    def window_end_s(self) -> float:
        """The first instant of the next window: the first whole second at least ``window_s`` after
        the open window's start (``inf`` before the first use)."""
        return math.inf if self._start_s is None else float(math.ceil(self._start_s + self.window_s))

    def _roll(self, now_s: float) -> None:
        if now_s < self._updated_s:
            raise ServecapError("now_s", now_s, f"the clock went backwards (last {self._updated_s})")
        self._updated_s = now_s
        if self._start_s is None or math.floor(now_s) - self._start_s >= self.window_s:
            # a new window at the first use after the last one closed, at that whole second
            # (LiteLLM: now_int - window_start >= window_size with now_int = int(now))
            self._start_s = float(math.floor(now_s))
            self._used = 0.0
