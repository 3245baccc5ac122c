"""The seam between the event loop and what it drives: one engine replica, or a fleet.

:mod:`servecap.sim.loop` (the one event loop) knows nothing of engines, routers or autoscalers:
it merges the traffic source's arrivals with the server's own events on one clock and hands
arrivals to :meth:`Server.add`. It calls :meth:`Server.advance_to` with the time of the next
thing outside the server (the next arrival, the next time-series sample), so a server may run
many of its own events in one call (a single engine runs its steps, and whole runs of
decode-only steps, in a tight loop; a fleet advances just the replicas it needs to look at).

Ties at one instant: every request arriving at ``t`` is added before any work *starts* at ``t``
(a step that could start at ``t`` waits for the next call), while work *ending* at ``t`` is
handled by ``advance_to(t)`` — so requests arriving at the very instant a step ends are seen by
the next step, as in vLLM.

Arriving requests are handed over as :class:`ArrivingRequest` values: the one shape of an
arriving request from the workload through the gateway and the router to the engine — every
read-only field of :class:`~servecap.workload.RequestSpec`, traffic-mix fields included (tenant,
class, session, duplicate group, priority), and :meth:`ArrivingRequest.arriving_at`. Two classes
have it: ``RequestSpec`` itself (closed-loop turns, requests given as a list) and the open-loop
sources' :class:`~servecap.sim.traffic.OpenLoopRequest`, a plain class several times cheaper to
build (building a frozen dataclass per request cost more than simulating it).

Finished requests come back from :meth:`Server.take_finished` as :class:`FinishedRequest`
values — anything with those read-only attributes: the engine's own request objects (no copy
per request), or :class:`~servecap.results.record.RequestRecord` — so a closed-loop traffic
source can schedule a user's next turn from ``end_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from servecap.workload.block_hash import HashBlocks


class ArrivingRequest(Protocol):
    """An arriving request as every stage reads it (the fields of ``RequestSpec``, which documents
    them). The gateway's policies read it through their narrower
    :class:`~servecap.policy.gateway.request.GatewayRequest`."""

    @property
    def request_id(self) -> int: ...

    @property
    def arrival_s(self) -> float: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...

    @property
    def prefix_group(self) -> int | None: ...

    @property
    def prefix_tokens(self) -> int: ...

    @property
    def user_id(self) -> int | None: ...

    @property
    def turn(self) -> int: ...

    @property
    def history_tokens(self) -> int: ...

    @property
    def conversation_id(self) -> int | None: ...

    @property
    def priority(self) -> int: ...

    @property
    def tenant(self) -> str | None: ...

    @property
    def request_class(self) -> str | None: ...

    @property
    def session_id(self) -> int | None: ...

    @property
    def hash_blocks(self) -> HashBlocks | None: ...

    @property
    def duplicate_group(self) -> int | None: ...

    @property
    def total_tokens(self) -> int: ...

    def arriving_at(self, arrival_s: float) -> ArrivingRequest:
        """The same request arriving at ``arrival_s`` (a request the fleet routes later than it
        arrived: the replica sees it then), of the same class."""
        ...


class FinishedRequest(Protocol):
    """What the loop reads of a request that ended (or was refused: ``error`` set, no times)."""

    @property
    def request_id(self) -> int: ...

    @property
    def arrival_s(self) -> float: ...

    @property
    def first_token_s(self) -> float | None: ...

    @property
    def end_s(self) -> float | None: ...

    @property
    def queue_time_s(self) -> float | None:
        """Arrival to first being scheduled."""
        ...

    @property
    def cached_prompt_tokens(self) -> int: ...

    @property
    def preemptions(self) -> int: ...

    @property
    def error(self) -> str | None:
        """None, or why it was refused: ``"rejected"`` (queue limit), ``"too_long"``, ..."""
        ...


class Server(Protocol):
    """Anything the event loop can drive on a simulated clock."""

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        """Accept ``request`` arriving at ``now_s``; False when it was refused at the door (its
        record, with the reason in ``error``, comes back from the next :meth:`take_finished`)."""
        ...

    def next_event_s(self) -> float:
        """Time of the server's next own event (the end of the work in flight, or the time work
        waiting to start will start); ``inf`` when nothing will happen without a new arrival."""
        ...

    def advance_to(self, t_s: float) -> None:
        """Handle the own events before ``t_s`` and the work ending at exactly ``t_s``; work
        that could start at exactly ``t_s`` waits for the next call (requests arriving at
        ``t_s`` join it). Returns early, right after the first event that finished requests,
        so the loop can hand them to the traffic source before going on (a closed-loop user's
        next turn may come before ``t_s``); the loop then calls again."""
        ...

    def has_work(self) -> bool:
        """True while any admitted request has not finished."""
        ...

    def take_finished(self) -> Sequence[FinishedRequest]:
        """Requests that ended (or were refused) since the last call, in the order they ended."""
        ...
