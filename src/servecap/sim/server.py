"""The seam between the event loop and what it drives: one engine replica, or a fleet.

:mod:`servecap.sim.loop` (the one event loop) knows nothing of engines, routers or autoscalers:
it merges the traffic source's arrivals with the server's own events on one clock, ordered by
``(time_s, seq)``, and hands arrivals to :meth:`Server.add`. A server whose next own event is at
``next_event_s()`` is advanced with :meth:`Server.advance_to` only up to the time the loop
needs (the next arrival, or its own next event), so it may advance lazily in between: a fleet
advances just the replicas the router needs to look at.

Finished requests come back from :meth:`Server.take_finished` as the shared result records,
so a closed-loop traffic source can schedule a user's next turn from its ``end_s``.
"""

from __future__ import annotations

from typing import Protocol

from servecap.results.record import RequestRecord
from servecap.workload.request import RequestSpec


class Server(Protocol):
    """Anything the event loop can drive on a simulated clock."""

    def add(self, request: RequestSpec, now_s: float) -> bool:
        """Accept ``request`` arriving at ``now_s``; False when it was refused at the door (its
        record, with the reason in ``error``, comes back from :meth:`take_finished`)."""
        ...

    def next_event_s(self) -> float:
        """Time of the server's next own event (a step end, a replica becoming ready, ...);
        ``inf`` when nothing will happen without a new arrival."""
        ...

    def advance_to(self, t_s: float) -> None:
        """Handle every own event at a time ``<= t_s`` (and start the steps they lead to); events
        at exactly ``t_s`` are handled before a request arriving at ``t_s`` is added."""
        ...

    def has_work(self) -> bool:
        """True while any admitted request has not finished."""
        ...

    def take_finished(self) -> list[RequestRecord]:
        """Records of requests that ended since the last call, in the order they ended."""
        ...
