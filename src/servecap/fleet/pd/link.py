"""A KV link as a resource: transfers queue on it first come, first served.

One transfer at a time holds the link for its occupancy (per-piece overheads plus bytes at the
link's rate, :func:`servecap.core.kv_transfer.occupancy_s`); a transfer asked for while the link
is busy starts when it frees (FIFO in the order transfers were asked for). Fair sharing, where a
NIC's queue pairs interleave the transfers, is work-conserving too: the link is busy over the
same spans and the last transfer ends at the same time, but each earlier transfer ends later
than under FIFO; FIFO is what is modelled. A transfer
that needs two links (the sending replica's NIC and the receiving one's) starts when both are
free and holds both. The link therefore never carries more than its bandwidth over any window
(a test checks it over the log).
"""

from __future__ import annotations


class KvLink:
    def __init__(self, name: str, bandwidth_bytes_s: float, *, keep_log: bool = False) -> None:
        self.name = name
        self.bandwidth_bytes_s = bandwidth_bytes_s
        self.free_at_s = 0.0
        self.busy_s = 0.0
        self.bytes = 0.0
        self.transfers = 0
        self.queued_s = 0.0  # Σ time transfers waited for this link
        self.log: list[tuple[float, float, float]] | None = [] if keep_log else None  # (start, end, bytes)

    def book(self, start_s: float, end_s: float, nbytes: float) -> None:
        """Hold the link over ``[start_s, end_s)`` for ``nbytes`` (the caller checked it is free)."""
        assert start_s >= self.free_at_s - 1e-12, (self.name, start_s, self.free_at_s)
        self.free_at_s = end_s
        self.busy_s += end_s - start_s
        self.bytes += nbytes
        self.transfers += 1
        if self.log is not None:
            self.log.append((start_s, end_s, nbytes))


def book_transfer(links: tuple[KvLink, ...], ready_s: float, occupancy_s: float, nbytes: float) -> float:
    """Start a transfer ready at ``ready_s`` on every link of ``links`` when all are free; hold
    them for ``occupancy_s``; returns the start time."""
    start = ready_s
    for link in links:
        if link.free_at_s > start:
            start = link.free_at_s
    for link in links:
        link.queued_s += start - ready_s
        link.book(start, start + occupancy_s, nbytes)
    return start
