"""The monitor's state between ticks: each target's recent snapshots and how often it was down.

Each tick takes one scrape per target; a target's window runs from its oldest snapshot no older
than ``window_s`` to its newest (so the first ticks have shorter windows; a target that just
came back starts a new window, as its counters may have reset).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from servecap.errors import ServecapError
from servecap.monitor.fleet import fleet_window
from servecap.monitor.scrape import Down
from servecap.monitor.snapshot import Snapshot
from servecap.monitor.window import WindowStats, window_stats


@dataclass(frozen=True, slots=True)
class TargetState:
    url: str
    up: bool
    error: str | None
    down_count: int  # scrapes this target failed, over the whole watch
    stats: WindowStats | None  # None when down, or up for a single scrape only
    snapshot: Snapshot | None


@dataclass(frozen=True, slots=True)
class Tick:
    time_s: float
    targets: tuple[TargetState, ...]
    fleet: WindowStats | None
    latest: tuple[Snapshot | Down, ...]

    @property
    def replicas_up(self) -> int:
        return sum(t.up for t in self.targets)


class Watch:
    """Feed it each round of scrapes (:meth:`add`); it answers the window figures."""

    def __init__(self, urls: Sequence[str], window_s: float) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.urls = list(urls)
        self.window_s = window_s
        self._history: dict[str, deque[Snapshot]] = {u: deque() for u in self.urls}
        self._down: dict[str, int] = dict.fromkeys(self.urls, 0)

    def add(self, results: Sequence[Snapshot | Down], time_s: float) -> Tick:
        targets: list[TargetState] = []
        pairs: list[tuple[Snapshot, Snapshot]] = []
        for url, r in zip(self.urls, results, strict=True):
            hist = self._history[url]
            if isinstance(r, Down):
                self._down[url] += 1
                hist.clear()
                targets.append(TargetState(url, False, r.error, self._down[url], None, None))
                continue
            hist.append(r)
            while len(hist) > 2 and r.time_s - hist[1].time_s >= self.window_s:
                hist.popleft()
            stats = None
            if len(hist) >= 2 and hist[-1].time_s > hist[0].time_s:
                try:
                    stats = window_stats(hist[0], hist[-1])
                except ServecapError as err:  # garbage counters (a cache counter going backwards)
                    self._down[url] += 1
                    hist.clear()
                    targets.append(TargetState(url, False, str(err), self._down[url], None, None))
                    continue
                pairs.append((hist[0], hist[-1]))
            targets.append(TargetState(url, True, None, self._down[url], stats, r))
        fleet = fleet_window(pairs) if pairs else None
        return Tick(time_s, tuple(targets), fleet, tuple(results))
