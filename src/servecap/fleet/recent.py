"""The windowed autoscaling signals' values: each request's TTFT (stamped with its first token)
or mean inter-token latency (stamped with its last token), and the p99 of those stamped within
the last ``window_s`` (:data:`servecap.policy.signals.WINDOWED_SIGNALS`).

A request's mean inter-token latency is ``(end - first token) / (output tokens - 1)`` (its
TPOT); a request of one token has none.
"""

from __future__ import annotations

from collections import deque

import numpy as np


def mean_itl_s(first_token_s: float, end_s: float, output_tokens: int) -> float | None:
    """``(end_s - first_token_s) / (output_tokens - 1)``; None for fewer than two tokens."""
    if output_tokens < 2:
        return None
    return (end_s - first_token_s) / (output_tokens - 1)


class RecentValues:
    """Values stamped with a time, the oldest let go as the window moves on."""

    def __init__(self) -> None:
        self._points: deque[tuple[float, float]] = deque()

    def add(self, t_s: float, value: float) -> None:
        self._points.append((t_s, value))

    def p99(self, now_s: float, window_s: float) -> float:
        """The p99 of the values stamped in ``[now_s - window_s, ...]``; 0 when there is none."""
        start = now_s - window_s
        q = self._points
        while q and q[0][0] < start:
            q.popleft()
        vals = [v for t, v in q if t >= start]
        return float(np.percentile(vals, 99)) if vals else 0.0
