"""The windowed signals' values: a request's mean inter-token latency and the p99 over a window."""

from __future__ import annotations

import pytest

from servecap.fleet.recent import RecentValues, mean_itl_s


def test_mean_itl_by_hand() -> None:
    # first token at 1.0 s, the 11th and last at 1.5 s: 10 gaps of 50 ms
    assert mean_itl_s(1.0, 1.5, 11) == pytest.approx(0.05)
    assert mean_itl_s(1.0, 1.0, 1) is None  # one token: no gap


def test_p99_over_the_window_only() -> None:
    v = RecentValues()
    for t, x in ((0.0, 9.0), (5.0, 1.0), (6.0, 2.0), (7.0, 3.0)):
        v.add(t, x)
    # window [4, 7]: 1, 2, 3 -> numpy's linear p99 = 2 + 0.98 x (3 - 2) = 2.98; the 9 at 0 s left
    assert v.p99(7.0, 3.0) == pytest.approx(2.98)
    assert v.p99(20.0, 3.0) == 0.0  # nothing in [17, 20]
