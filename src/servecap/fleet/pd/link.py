"""A KV link as a resource: a transfer holds it for its occupancy, one transfer at a time.

A transfer holds the link for its occupancy (per-piece overheads plus bytes at the link's rate,
:func:`servecap.core.kv_transfer.occupancy_s`). A transfer that needs two links (the sending
replica's NIC and the receiving one's) holds both at once: it starts at the earliest time at or
after it is ready at which both are free for its whole occupancy. A link keeps the spans it is
busy, so a transfer can take a gap left before a span booked for another pair of NICs — the two
NICs of a transfer wait for each other, not for the rest of the fleet's queues (keeping only
each link's end of last booking would make a transfer from P1 to D1 wait behind one from P2 to
D1 that itself waited for P2: one queue for every NIC of the fleet). On one link (``scope:
shared``, or transfers booked in the order they became ready) this is first come, first
served. Fair sharing, where a NIC's queue pairs interleave the transfers, is work-conserving
too: the link is busy over the same spans and the last transfer ends at the same time, but each
earlier transfer ends later than when each takes its turn whole; whole turns are what is
modelled. The link therefore never carries more than its bandwidth over any window, nor two
transfers at once (a test checks both over the log).

Spans that ended more than :data:`KEEP_S` before a transfer's ready time are dropped: the fleet
books transfers in the order of the simulated time they become ready, within a step or so.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Final

KEEP_S: Final = 60.0  # how long a finished span is kept for a transfer booked out of order
PRUNE_AT: Final = 64  # spans kept before the old ones are looked at


class KvLink:
    def __init__(self, name: str, bandwidth_bytes_s: float, *, keep_log: bool = False) -> None:
        self.name = name
        self.bandwidth_bytes_s = bandwidth_bytes_s
        self.busy_s = 0.0
        self.bytes = 0.0
        self.transfers = 0
        self.queued_s = 0.0  # Σ time transfers waited for this link (and the other they needed)
        self._starts: list[float] = []  # the busy spans, by start (they never overlap)
        self._ends: list[float] = []
        self.log: list[tuple[float, float, float]] | None = [] if keep_log else None  # (start, end, bytes)

    def earliest_free_s(self, t_s: float, occupancy_s: float) -> float:
        """The earliest time at or after ``t_s`` from which the link is free for ``occupancy_s``."""
        starts, ends = self._starts, self._ends
        if not ends or ends[-1] <= t_s:  # idle from t_s on (the common case)
            return t_s
        i = bisect_right(starts, t_s)
        if i > 0 and ends[i - 1] > t_s:  # a span under way at t_s
            t_s = ends[i - 1]
        n = len(starts)
        while i < n and starts[i] < t_s + occupancy_s:
            if ends[i] > t_s:
                t_s = ends[i]
            i += 1
        return t_s

    def book(self, start_s: float, end_s: float, nbytes: float) -> None:
        """Hold the link over ``[start_s, end_s)`` for ``nbytes`` (the caller checked it is free)."""
        starts, ends = self._starts, self._ends
        if len(ends) >= PRUNE_AT:
            k = bisect_right(ends, start_s - KEEP_S)
            del starts[:k]
            del ends[:k]
        if not ends or start_s >= ends[-1] - 1e-12:  # after every span (the common case)
            starts.append(start_s)
            ends.append(end_s)
        else:
            i = bisect_right(starts, start_s)
            assert i == 0 or ends[i - 1] <= start_s + 1e-12, (self.name, start_s, ends[i - 1])
            assert i == len(starts) or starts[i] >= end_s - 1e-12, (self.name, end_s, starts[i])
            starts.insert(i, start_s)
            ends.insert(i, end_s)
        self.busy_s += end_s - start_s
        self.bytes += nbytes
        self.transfers += 1
        if self.log is not None:
            self.log.append((start_s, end_s, nbytes))


def book_transfer(links: tuple[KvLink, ...], ready_s: float, occupancy_s: float, nbytes: float) -> float:
    """Start a transfer ready at ``ready_s`` on every link of ``links`` at the earliest time all
    are free for ``occupancy_s``; hold them for it; returns the start time."""
    start = ready_s
    moved = True
    while moved:
        moved = False
        for link in links:
            s = link.earliest_free_s(start, occupancy_s)
            if s > start:
                start, moved = s, True
    for link in links:
        link.queued_s += start - ready_s
        link.book(start, start + occupancy_s, nbytes)
    return start
