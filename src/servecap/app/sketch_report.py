"""A streaming run's stored sketches as percentile tables (``runs show --sketches``): the whole
run and each group (pool, tenant, class) with its counts and p50/p99 TTFT, TPOT and E2E, and
each time window's TTFT. The raw bucket counts are ``--json`` only: a day's run stores a million
lines of them, which no one reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servecap.results.sketch_set import RunSketches
from servecap.results.stream import StreamingSummary


@dataclass(frozen=True, slots=True)
class GroupRow:
    axis: str  # "run", "pool", "tenant" or "class"
    name: str
    requests: int
    completed: int
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    e2e_p99_s: float | None


@dataclass(frozen=True, slots=True)
class WindowRow:
    start_s: float
    end_s: float
    first_tokens: int
    ttft_p50_s: float | None
    ttft_p99_s: float | None


@dataclass(frozen=True, slots=True)
class SketchReport:
    relative_accuracy: float
    window_s: float
    groups: tuple[GroupRow, ...]
    windows: tuple[WindowRow, ...]


def _row(axis: str, name: str, s: StreamingSummary) -> GroupRow:
    ttft, tpot, e2e = (s.sketches[k].percentiles() for k in ("ttft_s", "tpot_s", "e2e_s"))
    return GroupRow(axis, name, s.num_requests, s.completed, ttft.p50, ttft.p99, tpot.p50, tpot.p99, e2e.p99)


def sketch_report(stored: dict[str, Any]) -> SketchReport:
    """The tables of a run's stored sketches (``RunSketches.to_dict``)."""
    rs = RunSketches.from_dict(stored)
    groups = [_row("run", "all", rs.total)]
    for axis in ("pool", "tenant", "class"):
        for name, s in sorted(rs.groups.get(axis, {}).items()):
            groups.append(_row(axis, name, s))
    windows = []
    for k, w in sorted(rs.ttft_windows.items()):
        windows.append(WindowRow(k * rs.window_s, (k + 1) * rs.window_s, w.count, w.quantile(0.5), w.quantile(0.99)))
    return SketchReport(rs.relative_accuracy, rs.window_s, tuple(groups), tuple(windows))
