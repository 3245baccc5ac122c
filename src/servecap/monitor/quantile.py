"""Percentiles from a cumulative histogram, by Prometheus' ``histogram_quantile`` rule.

Prometheus (``promql/quantile.go``, ``bucketQuantile``; documented under "histogram_quantile()"
in the querying functions): with cumulative counts ``c_i`` at upper bounds ``le_i`` and total
``n = c_last`` (the ``+Inf`` bucket), the rank is ``r = q * n``; take the first bucket ``i`` with
``c_i >= r``; then

    quantile = lower + (upper - lower) * (r - c_{i-1}) / (c_i - c_{i-1})

with ``lower = le_{i-1}`` (0 for the first bucket when its bound is positive) and
``upper = le_i`` — linear interpolation inside the bucket, assuming observations spread evenly
within it. If the rank falls in the ``+Inf`` bucket the answer is the largest finite bound; with
no observations there is no answer (``None``; Prometheus returns NaN).

Worked example (tests/monitor/test_quantile.py): bounds (0.1, 0.5, 1.0, +Inf), cumulative counts
(10, 60, 90, 100); p50: r = 50, bucket (0.1, 0.5] holding ranks 10..60 ->
0.1 + 0.4 * (50 - 10) / 50 = 0.42 s; p99: r = 99, in +Inf -> 1.0 s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]) -> float | None:
    """The ``q``-quantile (0..1) of a histogram with upper ``bounds`` (the last may be +Inf)
    and their cumulative counts; ``None`` when it holds no observations."""
    if len(bounds) != len(cumulative) or not bounds:
        raise ValueError("bounds and cumulative counts must be non-empty and of equal length")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    total = cumulative[-1]
    if total <= 0:
        return None
    rank = q * total
    prev_count, prev_bound = 0.0, 0.0
    for i, (bound, count) in enumerate(zip(bounds, cumulative, strict=True)):
        if count >= rank and count > prev_count:
            if math.isinf(bound):
                return bounds[i - 1] if i > 0 else None
            lower = prev_bound if i > 0 else (0.0 if bound > 0 else bound)
            return lower + (bound - lower) * (rank - prev_count) / (count - prev_count)
        prev_count, prev_bound = count, bound
    finite = [b for b in bounds if not math.isinf(b)]
    return finite[-1] if finite else None
