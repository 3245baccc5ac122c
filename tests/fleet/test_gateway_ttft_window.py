"""The gateway's TTFT window (the overflow signal's p99) is the deque of (first token, TTFT) pairs
it replaced: the same samples dropped from the front, the same p99, through growth and reuse of
its array and first-token times that arrive out of order."""

from __future__ import annotations

from collections import deque

import numpy as np

from servecap.fleet.gateway_stage import _TtftWindow


def test_the_window_reads_the_p99_of_the_deque_it_replaced() -> None:
    rng = np.random.default_rng(7)
    window, pairs = _TtftWindow(), deque[tuple[float, float]]()
    now_s, width_s = 0.0, 5.0
    for step in range(800):
        now_s += float(rng.exponential(0.05 if step < 400 else 0.3))  # the window fills, then drains
        for _ in range(int(rng.integers(0, 4))):
            first_s = now_s - float(rng.uniform(0, 1))  # finishes out of first-token order
            ttft_s = float(rng.lognormal(-1, 1))
            window.append(first_s, ttft_s)
            pairs.append((first_s, ttft_s))
        while pairs and pairs[0][0] < now_s - width_s:
            pairs.popleft()
        expected = float(np.percentile([v for _, v in pairs], 99)) if pairs else None
        assert window.p99_since(now_s - width_s) == expected
        assert window.p99_since(now_s - width_s) == expected  # read again: kept
    assert len(window._ttft_s) > 64  # it grew
