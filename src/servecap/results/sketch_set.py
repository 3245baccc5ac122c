"""A run's mergeable accumulators: the whole run, each group (class, tenant, pool), each window.

:class:`RunSketches` holds one :class:`~servecap.results.stream.StreamingSummary` for the run, one
per group on each axis (``"class"``, ``"tenant"``, ``"pool"``), and a TTFT sketch per time window
of ``window_s`` seconds (by first-token time) for the time series. Merging two adds every
counter and sketch, group by group and window by window: seeds of one study, the points of a
sweep or the workers of a distributed run combine into the accumulators of the pooled requests.
"""

from __future__ import annotations

from typing import Any

from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY, QuantileSketch
from servecap.results.stream import StreamingSummary
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
        self.ttft_windows: dict[int, QuantileSketch] = {}  # window index (first token // window_s)

    def group(self, axis: str, name: str) -> StreamingSummary:
        g = self.groups[axis]
        s = g.get(name)
        if s is None:
            s = g[name] = StreamingSummary(self.slo, self.relative_accuracy)
        return s

    def window(self, index: int) -> QuantileSketch:
        w = self.ttft_windows.get(index)
        if w is None:
            w = self.ttft_windows[index] = QuantileSketch(self.relative_accuracy)
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
        m = QuantileSketch(self.relative_accuracy)
        for w in parts:
            m.merge(w)
        return m.quantile(q)

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
        out.ttft_windows = {int(k): QuantileSketch.from_dict(w) for k, w in (d.get("ttft_windows") or {}).items()}
        return out
