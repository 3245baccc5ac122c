"""Percentiles, one and several, plain and weighted (numpy's default "linear" method, Hyndman and Fan type 7)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

QUANTILES = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Summary of one latency, in seconds (``None`` everywhere when there were no samples)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    max: float | None
    count: int

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "p50": self.p50,
            "p90": self.p90,
            "p95": self.p95,
            "p99": self.p99,
            "mean": self.mean,
            "max": self.max,
            "count": self.count,
        }


EMPTY = Percentiles(None, None, None, None, None, None, 0)


def percentile(values: ArrayLike, q: float, *, empty: float = float("nan")) -> float:
    """The ``q``-th percentile (0-100) of ``values``, NaNs ignored, ``empty`` when there are
    none: numpy's "linear" method (Hyndman and Fan type 7), the one :func:`percentiles` uses.
    The project's one percentile function (load generator, self-checks, benchmarks)."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return empty
    return float(np.percentile(arr, q))


def percentiles(values: ArrayLike) -> Percentiles:
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return EMPTY
    q = np.percentile(arr, QUANTILES)
    return Percentiles(
        float(q[0]), float(q[1]), float(q[2]), float(q[3]), float(arr.mean()), float(arr.max()), int(arr.size)
    )


def weighted_percentiles(values: ArrayLike, weights: ArrayLike) -> Percentiles:
    """Percentiles of ``values`` each repeated ``weights`` times (integer weights), computed
    without expanding: equal to ``percentiles(np.repeat(values, weights))``."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.int64)
    keep = w > 0
    v, w = v[keep], w[keep]
    total = int(w.sum())
    if total == 0:
        return EMPTY
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)  # element k of the expanded array is v[searchsorted(cum, k, 'right')]
    out = []
    for q in QUANTILES:
        pos = q / 100.0 * (total - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, total - 1)
        a = v[int(np.searchsorted(cum, lo, side="right"))]
        b = v[int(np.searchsorted(cum, hi, side="right"))]
        out.append(float(a + (b - a) * (pos - lo)))
    mean = float((v * w).sum() / total)
    return Percentiles(out[0], out[1], out[2], out[3], mean, float(v[-1]), total)


def nan_array(values: list[float | None]) -> NDArray[np.float64]:
    return np.array([np.nan if x is None else x for x in values], dtype=np.float64)
