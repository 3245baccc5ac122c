"""A mergeable quantile sketch with a stated relative error, fed in vectorised batches.

The sketch is DDSketch (Masson, Rim and Lee, "DDSketch: a fast and fully-mergeable quantile
sketch with relative-error guarantees", PVLDB 12(12), 2019), from its maintainers' ``ddsketch``
package. A value ``x > 0`` goes to bucket ``k = ceil(log_γ x)`` with ``γ = (1 + α) / (1 - α)``;
the bucket answers ``2 γ^k / (1 + γ)``, within ``α`` of every value in ``(γ^(k-1), γ^k]``. So
any quantile the sketch returns is within relative error ``α`` of the exact value at that rank,
whatever the distribution, and two sketches merge exactly (bucket counts add): windows, seeds,
pools and sweep points combine by merging. Why DDSketch rather than HdrHistogram: latencies here
span microseconds to hours and the guarantee is relative on every value (HdrHistogram's needs a
fixed lowest/highest trackable value and integer units chosen up front), and its merge is a plain
sum of counts, so a merged sketch is the sketch of the pooled values.

Speed: the package adds one value per Python call (a few µs); tens of millions of values are
instead gathered in numpy arrays and folded into the package's own bucket store in one step per
batch (bucket keys with ``numpy.log2``, counts with ``numpy.bincount``, then the package's
``DenseStore.merge``). The package's ``DDSketch`` stays the mergeable object; a test pins the
folded buckets equal to the package's one-by-one ``add``.

Quantiles: at rank ``q (n - 1)`` with linear interpolation between the two neighbouring ranks,
numpy's default ("linear", Hyndman and Fan type 7) method. Each neighbour's value is within
``α`` of the exact order statistic, so their convex combination is within ``α`` of numpy's
percentile on the same values (clamped to the exact min and max, which the sketch keeps).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ddsketch import DDSketch
from ddsketch.store import DenseStore
from numpy.typing import ArrayLike, NDArray

from servecap.results.stats import EMPTY, QUANTILES, Percentiles

DEFAULT_RELATIVE_ACCURACY = 0.01  # α: every quantile within 1% of the exact value at its rank


def kept_values(
    values: ArrayLike, weights: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None] | None:
    """``values`` and ``weights`` as float arrays without NaN values or non-positive weights;
    None when nothing is left (what a sketch's ``add_array`` reads)."""
    v = np.asarray(values, dtype=np.float64)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    keep = ~np.isnan(v)
    if w is not None:
        keep &= w > 0
    if not keep.all():
        v = v[keep]
        w = None if w is None else w[keep]
    return None if v.size == 0 else (v, w)


class QuantileSketch:
    """A DDSketch of non-NaN values (NaNs are skipped), fed by :meth:`add_array`."""

    __slots__ = ("relative_accuracy", "sketch")

    def __init__(self, relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY) -> None:
        self.relative_accuracy = relative_accuracy
        self.sketch = DDSketch(relative_accuracy)

    # -- feeding --------------------------------------------------------------------------------

    def add_array(self, values: ArrayLike, weights: ArrayLike | None = None) -> None:
        """Add ``values`` (each ``weights`` times: positive counts; once each when None)."""
        kept = kept_values(values, weights)
        if kept is None:
            return
        v, w = kept
        sk = self.sketch
        m = sk._mapping
        tiny = m.min_possible
        pos = v > tiny
        neg = v < -tiny
        for mask, store, sign in ((pos, sk._store, 1.0), (neg, sk._negative_store, -1.0)):
            if mask.any():
                _fold(store, m, sign * v[mask], None if w is None else w[mask])
        zero = ~(pos | neg)
        total = float(v.size) if w is None else float(w.sum())
        if zero.any():
            sk._zero_count += float(zero.sum()) if w is None else float(w[zero].sum())
        sk._count += total
        sk._sum += float(v.sum()) if w is None else float((v * w).sum())
        lo, hi = float(v.min()), float(v.max())
        if lo < sk._min:
            sk._min = lo
        if hi > sk._max:
            sk._max = hi

    def merge(self, other: QuantileSketch) -> None:
        """Add ``other``'s values (the same ``relative_accuracy``)."""
        self.sketch.merge(other.sketch)

    # -- reading --------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return round(float(self.sketch.count))

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (0..1), linear between neighbouring ranks; None when empty."""
        sk = self.sketch
        n = sk.count
        if n <= 0:
            return None
        rank = q * (n - 1)
        lo = math.floor(rank)
        frac = rank - lo
        a = self._value_at(lo)
        value = a if frac <= 0 else a + (self._value_at(min(lo + 1, n - 1)) - a) * frac
        return min(max(value, sk._min), sk._max)

    def _value_at(self, rank: float) -> float:
        sk = self.sketch
        neg, zero, pos = sk._negative_store, sk._zero_count, sk._store
        if rank < neg.count:
            return float(-sk._mapping.value(neg.key_at_rank(neg.count - rank - 1, lower=False)))
        if rank < neg.count + zero:
            return 0.0
        return float(sk._mapping.value(pos.key_at_rank(rank - zero - neg.count)))

    def percentiles(self) -> Percentiles:
        """p50, p90, p95, p99 from the sketch; mean and max exact."""
        sk = self.sketch
        if sk.count <= 0:
            return EMPTY
        q = [self.quantile(p / 100.0) for p in QUANTILES]
        return Percentiles(q[0], q[1], q[2], q[3], sk.sum / sk.count, float(sk._max), self.count)

    # -- storing --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (bucket counts from the lowest key used); :meth:`from_dict` reads it."""
        sk = self.sketch
        return {
            "relative_accuracy": self.relative_accuracy,
            "count": sk.count,
            "sum": sk.sum,
            "min": sk._min if sk.count else None,
            "max": sk._max if sk.count else None,
            "zero_count": sk._zero_count,
            "positive": _store_dict(sk._store),
            "negative": _store_dict(sk._negative_store),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QuantileSketch:
        """Read :meth:`to_dict`'s form -- stored data, parsed like input: a value of the wrong
        type, a non-finite or negative count, a key range no latency spans (which would make the
        bucket store allocate without bound) raise ``ValueError``/``TypeError``/``KeyError``."""
        accuracy = _finite(d["relative_accuracy"], "relative_accuracy")
        if not 0.0 < accuracy < 1.0:
            raise ValueError(f"relative_accuracy {accuracy!r} is not in (0, 1)")
        out = cls(accuracy)
        sk = out.sketch
        for key, store in (("positive", sk._store), ("negative", sk._negative_store)):
            part = d.get(key) or {}
            if not isinstance(part, dict):
                raise TypeError(f"{key} is a {type(part).__name__}, not a mapping")
            counts = part.get("counts") or []
            if not isinstance(counts, list):
                raise TypeError(f"{key}.counts is a {type(counts).__name__}, not a list")
            if counts:
                offset = part["offset"]
                if type(offset) is not int or abs(offset) > MAX_STORED_KEY or len(counts) > MAX_STORED_KEY:
                    raise ValueError(
                        f"{key}: keys from {offset!r}, {len(counts)} of them, outside +-{MAX_STORED_KEY:,}"
                    )
                arr = np.asarray(counts, dtype=np.float64)
                if not (np.isfinite(arr).all() and (arr >= 0).all()):
                    raise ValueError(f"{key}.counts holds a negative or non-finite count")
                store.merge(_dense(offset, arr))
        sk._zero_count = _finite(d.get("zero_count") or 0.0, "zero_count")
        sk._count = _finite(d.get("count") or 0.0, "count")
        sk._sum = _finite(d.get("sum") or 0.0, "sum")
        if d.get("min") is not None:
            sk._min = _finite(d["min"], "min")
            sk._max = _finite(d["max"], "max")
        return out


MAX_STORED_KEY = 1_000_000
"""The widest bucket-key range a stored sketch may span: at a relative accuracy of 1% the keys
of latencies from a nanosecond to a year span about 4,000; a million leaves room for any
accuracy while the bucket store stays a few MiB."""


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a {type(value).__name__}, not a number")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{name} is {out!r}, not finite")
    return out


def merged(sketches: list[QuantileSketch], relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY) -> QuantileSketch:
    """A new sketch holding every one of ``sketches``' values."""
    out = QuantileSketch(relative_accuracy)
    for s in sketches:
        out.merge(s)
    return out


def _fold(store: DenseStore, mapping: Any, values: NDArray[np.float64], weights: NDArray[np.float64] | None) -> None:
    """Add positive ``values`` to ``store``: the package's key (``ceil(log2(x) x multiplier) +
    offset``, :class:`ddsketch.mapping.LogarithmicMapping`) computed for the whole batch."""
    keys = np.ceil(np.log2(values) * mapping._multiplier + mapping._offset).astype(np.int64)
    k0 = int(keys.min())
    counts = np.bincount(keys - k0, weights=weights).astype(np.float64)
    store.merge(_dense(k0, counts))


def _dense(offset: int, counts: NDArray[np.float64]) -> DenseStore:
    """A package store holding ``counts`` for keys ``offset, offset + 1, ...``."""
    nz = np.flatnonzero(counts)
    tmp = DenseStore()
    if nz.size == 0:
        return tmp
    tmp.bins = counts.tolist()
    tmp.offset = offset
    tmp.min_key = offset + int(nz[0])
    tmp.max_key = offset + int(nz[-1])
    tmp.count = float(counts.sum())
    return tmp


def _store_dict(store: DenseStore) -> dict[str, Any]:
    if store.count == 0:
        return {"offset": 0, "counts": []}
    lo, hi = store.min_key, store.max_key
    return {"offset": lo, "counts": store.bins[lo - store.offset : hi - store.offset + 1]}
