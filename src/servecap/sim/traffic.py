"""Traffic sources for the event loop: where requests come from and when.

- :class:`OpenLoopSource` — an already drawn stream (``RequestArrays``): arrival times fixed in
  advance, whatever the server does;
- :class:`ClosedLoopSource` — closed-loop users (:class:`~servecap.workload.ClosedLoopUsers`):
  each user's next turn comes a think time after the previous answer ended (or after the turn
  was refused).

The loop asks ``next_arrival_s()``, takes arrivals with ``pop()`` in time order (ties: in the
order they were created), and tells the source about every request that ended or was refused
(``on_finished``). ``requests()`` lists every request issued so far, in id order.
"""

from __future__ import annotations

import heapq

from servecap.sim.server import ArrivingRequest
from servecap.workload import ClosedLoopUsers, RequestArrays, RequestSpec

_INF = float("inf")


class OpenLoopRequest:
    """An open-loop arrival: :class:`~servecap.workload.RequestSpec`'s fields (the server seam's
    :class:`~servecap.sim.server.ArrivingRequest`) in a plain class, several times cheaper to
    build than the frozen dataclass."""

    __slots__ = (
        "arrival_s",
        "output_tokens",
        "prefix_group",
        "prefix_tokens",
        "prompt_tokens",
        "request_id",
        "session_id",
    )

    def __init__(
        self,
        request_id: int,
        arrival_s: float,
        prompt_tokens: int,
        output_tokens: int,
        prefix_group: int | None,
        prefix_tokens: int,
        session_id: int | None = None,
    ) -> None:
        self.request_id = request_id
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.prefix_group = prefix_group
        self.prefix_tokens = prefix_tokens
        # the user/session a session-affinity router hashes on (a traffic mix's sessions)
        self.session_id = session_id

    @property
    def user_id(self) -> int | None:
        return None

    @property
    def turn(self) -> int:
        return 1

    @property
    def history_tokens(self) -> int:
        return 0

    @property
    def conversation_id(self) -> int | None:
        return None

    @property
    def priority(self) -> int:
        return 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


class TrafficSource:
    """Requests arriving on the simulated clock."""

    # whether arrivals depend on when requests end (the loop tells ``on_finished`` only then)
    closed_loop = False

    def next_arrival_s(self) -> float:
        """Time of the next arrival; ``inf`` when none is due (yet)."""
        raise NotImplementedError

    def pop(self) -> ArrivingRequest:
        """The next arrival (``next_arrival_s()`` is finite)."""
        raise NotImplementedError

    def on_finished(self, request_id: int, t_s: float) -> None:
        """Request ``request_id`` ended, or was refused, at ``t_s`` (closed loop only)."""
        raise NotImplementedError

    def expected_requests(self) -> int:
        """How many requests the run will issue (0 when unknown): for progress reports."""
        raise NotImplementedError


class OpenLoopSource(TrafficSource):
    """An open-loop stream, request ``i`` being row ``i`` of the arrays (sorted by arrival)."""

    def __init__(self, arrays: RequestArrays) -> None:
        self.arrival_s: list[float] = arrays.arrival_s.tolist()
        self.prompt_tokens: list[int] = arrays.prompt_tokens.tolist()
        self.output_tokens: list[int] = arrays.output_tokens.tolist()
        self.prefix_group: list[int] = arrays.prefix_group.tolist()
        self.prefix_tokens: list[int] = arrays.prefix_tokens.tolist()
        self._n = len(self.arrival_s)
        sessions = arrays.session_id.tolist() if len(arrays.session_id) == self._n else []
        # None unless some request carries a session id (most streams: none)
        self.session_id: list[int] | None = sessions if any(s >= 0 for s in sessions) else None
        self._times: list[float] = [*self.arrival_s, _INF]  # a sentinel: _times[_next] is the next arrival
        self._next = 0

    def next_arrival_s(self) -> float:
        return self._times[self._next]

    def pop(self) -> ArrivingRequest:
        i = self._next
        self._next = i + 1
        g = self.prefix_group[i]
        s = -1 if self.session_id is None else self.session_id[i]
        return OpenLoopRequest(
            i,
            self.arrival_s[i],
            self.prompt_tokens[i],
            self.output_tokens[i],
            None if g < 0 else g,
            0 if g < 0 else self.prefix_tokens[i],
            None if s < 0 else s,
        )

    def on_finished(self, request_id: int, t_s: float) -> None:
        return None

    def expected_requests(self) -> int:
        return self._n


class ClosedLoopSource(TrafficSource):
    """Closed-loop users; request ids are given in the order turns are created (0, 1, ...)."""

    closed_loop = True

    def __init__(self, users: ClosedLoopUsers, request_overhead_s: float = 0.0) -> None:
        self.users = users
        # the server's per-request cost: the engine sees a user's next turn this long after the
        # think time ends (times here are the engine's, shifted by it: see sim.simulate.charge_request_overhead)
        self.request_overhead_s = request_overhead_s
        self.issued: list[RequestSpec] = []  # every turn created, by request id
        self._heap: list[tuple[float, int, RequestSpec]] = []  # (arrival, creation order, turn)
        for spec in users.first_turns():
            self._push(spec)

    def _push(self, spec: RequestSpec) -> None:
        self.issued.append(spec)
        heapq.heappush(self._heap, (spec.arrival_s, len(self.issued), spec))

    def next_arrival_s(self) -> float:
        return self._heap[0][0] if self._heap else _INF

    def pop(self) -> ArrivingRequest:
        return heapq.heappop(self._heap)[2]

    def on_finished(self, request_id: int, t_s: float) -> None:
        uid = self.issued[request_id].user_id
        assert uid is not None
        nxt = self.users.next_turn(uid, t_s + self.request_overhead_s)
        if nxt is not None:
            self._push(nxt)

    def expected_requests(self) -> int:
        return self.users.spec.num_requests or 0
