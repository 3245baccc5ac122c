"""A time window's quantile sketch held as one numpy array of bucket counts.

A streamed run keeps a TTFT sketch per time window (a day of 15 s windows: 5,760 of them). The
package's :class:`ddsketch.DDSketch` keeps its buckets in a Python list of Python floats, grown
in chunks of 128, plus a mapping and two stores per sketch: about 32 bytes per bucket and a few
KiB per sketch, which a day's windows multiply into tens of MiB that grow with the simulated
time. :class:`WindowSketch` holds the same buckets (the same keys as
:class:`~servecap.results.sketch.QuantileSketch`: DDSketch's logarithmic mapping, Masson, Rim and
Lee, PVLDB 12(12), 2019) in one float64 array spanning exactly the keys used (8 bytes per
bucket), and answers a quantile by rebuilding the package's sketch from that array -- so every
quantile is the one :class:`QuantileSketch` gives on the same values (a test pins them equal).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from ddsketch.mapping import LogarithmicMapping
from numpy.typing import ArrayLike, NDArray

from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY, QuantileSketch, _dense, kept_values

_EMPTY = np.zeros(0, dtype=np.float64)


@functools.lru_cache(maxsize=8)
def mapping_for(relative_accuracy: float) -> LogarithmicMapping:
    """The package's logarithmic mapping at ``relative_accuracy`` (one per accuracy)."""
    return LogarithmicMapping(relative_accuracy)


class WindowSketch:
    """Positive values' bucket counts from key ``offset`` on; values at or under the mapping's
    smallest distinguishable value count as zeros, negative values in ``neg_counts`` (keys of
    ``-x``), NaNs are skipped -- as :meth:`QuantileSketch.add_array`."""

    __slots__ = (
        "count_f",
        "max_v",
        "min_v",
        "neg_counts",
        "neg_offset",
        "offset",
        "pos_counts",
        "relative_accuracy",
        "sum_v",
        "zero_count",
    )

    def __init__(self, relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY) -> None:
        self.relative_accuracy = relative_accuracy
        self.offset = 0
        self.pos_counts: NDArray[np.float64] = _EMPTY
        self.neg_offset = 0
        self.neg_counts: NDArray[np.float64] = _EMPTY
        self.zero_count = 0.0
        self.count_f = 0.0
        self.sum_v = 0.0
        self.min_v = float("inf")
        self.max_v = float("-inf")

    # -- feeding --------------------------------------------------------------------------------

    def add_array(self, values: ArrayLike, weights: ArrayLike | None = None) -> None:
        """Add ``values`` (each ``weights`` times: positive counts; once each when None)."""
        kept = kept_values(values, weights)
        if kept is None:
            return
        v, w = kept
        m = mapping_for(self.relative_accuracy)
        tiny = m.min_possible
        pos = v > tiny
        neg = v < -tiny
        if pos.any():
            k0, c = _bins(m, v[pos], None if w is None else w[pos])
            self.offset, self.pos_counts = _add(self.offset, self.pos_counts, k0, c)
        if neg.any():
            k0, c = _bins(m, -v[neg], None if w is None else w[neg])
            self.neg_offset, self.neg_counts = _add(self.neg_offset, self.neg_counts, k0, c)
        zero = ~(pos | neg)
        if zero.any():
            self.zero_count += float(zero.sum()) if w is None else float(w[zero].sum())
        self.count_f += float(v.size) if w is None else float(w.sum())
        self.sum_v += float(v.sum()) if w is None else float((v * w).sum())
        self.min_v = min(self.min_v, float(v.min()))
        self.max_v = max(self.max_v, float(v.max()))

    def merge(self, other: WindowSketch) -> None:
        """Add ``other``'s values (the same ``relative_accuracy``)."""
        if other.relative_accuracy != self.relative_accuracy:
            raise ValueError("sketches of different accuracies do not merge")
        if other.pos_counts.size:
            self.offset, self.pos_counts = _add(self.offset, self.pos_counts, other.offset, other.pos_counts)
        if other.neg_counts.size:
            self.neg_offset, self.neg_counts = _add(
                self.neg_offset, self.neg_counts, other.neg_offset, other.neg_counts
            )
        self.zero_count += other.zero_count
        self.count_f += other.count_f
        self.sum_v += other.sum_v
        self.min_v = min(self.min_v, other.min_v)
        self.max_v = max(self.max_v, other.max_v)

    # -- reading --------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return round(self.count_f)

    def nbytes(self) -> int:
        """The bucket arrays' bytes."""
        return int(self.pos_counts.nbytes + self.neg_counts.nbytes)

    def to_quantile_sketch(self) -> QuantileSketch:
        """The package-backed sketch of the same values (every reading goes through it)."""
        out = QuantileSketch(self.relative_accuracy)
        sk = out.sketch
        if self.pos_counts.size:
            sk._store.merge(_dense(self.offset, self.pos_counts))
        if self.neg_counts.size:
            sk._negative_store.merge(_dense(self.neg_offset, self.neg_counts))
        sk._zero_count = self.zero_count
        sk._count = self.count_f
        sk._sum = self.sum_v
        sk._min = self.min_v
        sk._max = self.max_v
        return out

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (0..1), as :meth:`QuantileSketch.quantile`; None when empty."""
        return self.to_quantile_sketch().quantile(q) if self.count_f > 0 else None

    # -- storing --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """:meth:`QuantileSketch.to_dict`'s form."""
        return self.to_quantile_sketch().to_dict()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WindowSketch:
        """Read :meth:`QuantileSketch.to_dict`'s form (checked as :meth:`QuantileSketch.from_dict`)."""
        return cls.from_quantile_sketch(QuantileSketch.from_dict(d))

    @classmethod
    def from_quantile_sketch(cls, q: QuantileSketch) -> WindowSketch:
        out = cls(q.relative_accuracy)
        sk = q.sketch
        for store, neg in ((sk._store, False), (sk._negative_store, True)):
            if store.count:
                lo, hi = store.min_key, store.max_key
                arr = np.asarray(store.bins[lo - store.offset : hi - store.offset + 1], dtype=np.float64)
                if neg:
                    out.neg_offset, out.neg_counts = lo, arr
                else:
                    out.offset, out.pos_counts = lo, arr
        out.zero_count = float(sk._zero_count)
        out.count_f = float(sk._count)
        out.sum_v = float(sk._sum)
        out.min_v = float(sk._min)
        out.max_v = float(sk._max)
        return out


def _bins(
    m: LogarithmicMapping, values: NDArray[np.float64], weights: NDArray[np.float64] | None
) -> tuple[int, NDArray[np.float64]]:
    """The keys of positive ``values`` (``ceil(log2(x) x multiplier) + offset``, as
    :func:`servecap.results.sketch._fold`) as counts from the lowest key."""
    keys = np.ceil(np.log2(values) * m._multiplier + m._offset).astype(np.int64)
    k0 = int(keys.min())
    return k0, np.bincount(keys - k0, weights=weights).astype(np.float64)


def _add(
    offset: int, counts: NDArray[np.float64], k0: int, add: NDArray[np.float64]
) -> tuple[int, NDArray[np.float64]]:
    """``counts`` (from key ``offset``) plus ``add`` (from key ``k0``), over the union of keys."""
    if counts.size == 0:
        return k0, add.copy()
    lo = min(offset, k0)
    hi = max(offset + counts.size, k0 + add.size)
    if lo == offset and hi == offset + counts.size:
        counts[k0 - offset : k0 - offset + add.size] += add
        return offset, counts
    out = np.zeros(hi - lo, dtype=np.float64)
    out[offset - lo : offset - lo + counts.size] = counts
    out[k0 - lo : k0 - lo + add.size] += add
    return lo, out
