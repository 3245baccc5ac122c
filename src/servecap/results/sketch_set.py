"""A run's mergeable accumulators: the whole run, each group (class, tenant, pool), each window.

:class:`RunSketches` holds one :class:`~servecap.results.stream.StreamingSummary` for the run, one
per group on each axis (``"class"``, ``"tenant"``, ``"pool"``), and a TTFT sketch per time window
of ``window_s`` seconds (by first-token time) for the time series, each a
:class:`~servecap.results.window_sketch.WindowSketch` (one numpy array of bucket counts: a day's
thousands of windows stay a few MiB). Merging two adds every
counter and sketch, group by group and window by window: seeds of one study, the points of a
sweep or the workers of a distributed run combine into the accumulators of the pooled requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY
from servecap.results.stream import StreamingSummary
from servecap.results.window_sketch import WindowSketch, mapping_for
from servecap.specs.perf import Slo

AXES = ("class", "tenant", "pool")


class RunSketches:
    def __init__(
        self,
        slo: Slo | None = None,
        *,
        window_s: float = 60.0,
        relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY,
    ) -> None:
        self.slo = slo
        self.window_s = window_s
        self.relative_accuracy = relative_accuracy
        self.total = StreamingSummary(slo, relative_accuracy)
        self.groups: dict[str, dict[str, StreamingSummary]] = {a: {} for a in AXES}
        self.ttft_windows: dict[int, WindowSketch] = {}  # window index (first token // window_s)

    def group(self, axis: str, name: str) -> StreamingSummary:
        g = self.groups[axis]
        s = g.get(name)
        if s is None:
            s = g[name] = StreamingSummary(self.slo, self.relative_accuracy)
        return s

    def window(self, index: int) -> WindowSketch:
        w = self.ttft_windows.get(index)
        if w is None:
            w = self.ttft_windows[index] = WindowSketch(self.relative_accuracy)
        return w

    def window_quantile(self, t0_s: float, t1_s: float, q: float) -> float | None:
        """The ``q``-quantile of the TTFTs whose first token came in the windows overlapping
        ``(t0_s, t1_s]`` (to the windows' granularity); None when there were none."""
        lo, hi = int(t0_s // self.window_s), int(t1_s // self.window_s)
        parts = [w for k, w in self.ttft_windows.items() if lo <= k <= hi]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0].quantile(q)
        m = WindowSketch(self.relative_accuracy)
        for w in parts:
            m.merge(w)
        return m.quantile(q)

    def rolling_quantiles(self, times_s: Sequence[float], span_s: float, q: float) -> list[float | None]:
        """At each time ``t``, :meth:`window_quantile` over ``(t - span_s, t]``, for many times
        at once: the windows' bucket counts are laid in one matrix and summed cumulatively, so
        each time costs one difference of rows and a search (not a merge of every window)."""
        if not self.ttft_windows:
            return [None] * len(times_s)
        keys = sorted(self.ttft_windows)
        first, last = keys[0], keys[-1]
        used = [w for w in self.ttft_windows.values() if w.pos_counts.size]
        k_lo = min((w.offset for w in used), default=0)
        k_hi = max((w.offset + w.pos_counts.size - 1 for w in used), default=0)
        nw = last - first + 1
        counts = np.zeros((nw + 1, k_hi - k_lo + 2))  # row i + 1: window first + i; column 0: zeros
        lo_v = np.full(nw, np.inf)
        hi_v = np.full(nw, -np.inf)
        for k, w in self.ttft_windows.items():
            row = k - first + 1
            counts[row, 0] = w.zero_count
            if w.pos_counts.size:
                counts[row, w.offset - k_lo + 1 : w.offset - k_lo + 1 + w.pos_counts.size] = w.pos_counts
            if w.count_f > 0:
                lo_v[row - 1], hi_v[row - 1] = w.min_v, w.max_v
        cum = np.cumsum(counts, axis=0)
        mapping = mapping_for(self.relative_accuracy)
        out: list[float | None] = []
        for t in times_s:
            a = min(max(int((t - span_s) // self.window_s), first), last + 1) - first
            b = min(max(int(t // self.window_s), first - 1), last) - first + 1
            if b <= a:
                out.append(None)
                continue
            c = cum[b] - cum[a]
            n = float(c.sum())
            if n <= 0:
                out.append(None)
                continue
            acc = np.cumsum(c)
            rank = q * (n - 1)
            lo = float(np.floor(rank))
            v = _value_at_rank(acc, lo, mapping, k_lo)
            if rank > lo:
                v += (_value_at_rank(acc, min(lo + 1, n - 1), mapping, k_lo) - v) * (rank - lo)
            out.append(min(max(v, float(lo_v[a:b].min())), float(hi_v[a:b].max())))
        return out

    def merge(self, other: RunSketches) -> None:
        """Add ``other``'s requests (same SLO, window and relative accuracy)."""
        if other.window_s != self.window_s or other.relative_accuracy != self.relative_accuracy:
            raise ValueError("sketches of different windows or accuracies do not merge")
        self.total.merge(other.total)
        for axis, groups in other.groups.items():
            for name, s in groups.items():
                self.group(axis, name).merge(s)
        for k, w in other.ttft_windows.items():
            self.window(k).merge(w)

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_s": self.window_s,
            "relative_accuracy": self.relative_accuracy,
            "total": self.total.to_dict(),
            "groups": {a: {n: s.to_dict() for n, s in g.items()} for a, g in self.groups.items() if g},
            "ttft_windows": {str(k): w.to_dict() for k, w in sorted(self.ttft_windows.items())},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSketches:
        total = StreamingSummary.from_dict(d["total"])
        out = cls(total.slo, window_s=float(d["window_s"]), relative_accuracy=float(d["relative_accuracy"]))
        out.total = total
        for axis, groups in (d.get("groups") or {}).items():
            out.groups[axis] = {n: StreamingSummary.from_dict(s) for n, s in groups.items()}
        out.ttft_windows = {int(k): WindowSketch.from_dict(w) for k, w in (d.get("ttft_windows") or {}).items()}
        return out


def _value_at_rank(cum_counts: np.ndarray, rank: float, mapping: Any, k_lo: int) -> float:
    """The value of the element at ``rank`` from cumulative counts (column 0: zeros, column
    ``j``: key ``k_lo + j - 1``)."""
    j = int(np.searchsorted(cum_counts, rank, side="right"))
    return 0.0 if j == 0 else float(mapping.value(k_lo + j - 1))
