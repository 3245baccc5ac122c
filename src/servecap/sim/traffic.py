"""Traffic sources for the event loop: where requests come from and when.

- :class:`OpenLoopSource` — an already drawn stream (``RequestArrays``): arrival times fixed in
  advance, whatever the server does;
- :class:`ChunkedSource` — an open-loop stream served from chunks of rows, each let go once
  the run has taken its requests' outcomes (a streaming fleet run: ``servecap.fleet.stream_source``);
- :class:`ClosedLoopSource` — closed-loop users (:class:`~servecap.workload.ClosedLoopUsers`):
  each user's next turn comes a think time after the previous answer ended (or after the turn
  was refused).

The loop asks ``next_arrival_s()``, takes arrivals with ``pop()`` in time order (ties: in the
order they were created), and tells the source about every request that ended or was refused
(``on_finished``). ``requests()`` lists every request issued so far, in id order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servecap.sim.server import ArrivingRequest
from servecap.workload import ClosedLoopUsers, RequestArrays, RequestSpec
from servecap.workload.block_hash import HashBlocks
from servecap.workload.sessions import SessionGraph

_INF = float("inf")


class OpenLoopRequest:
    """An open-loop arrival: :class:`~servecap.workload.RequestSpec`'s fields (the one arriving
    shape, :class:`~servecap.sim.server.ArrivingRequest`) in a plain class, several times cheaper
    to build than the frozen dataclass. Its traffic-mix fields are its row's in the drawn arrays;
    an open-loop request has no user, conversation or history (one turn)."""

    __slots__ = (
        "arrival_s",
        "duplicate_group",
        "hash_blocks",
        "output_tokens",
        "prefix_group",
        "prefix_tokens",
        "priority",
        "prompt_tokens",
        "request_class",
        "request_id",
        "session_id",
        "tenant",
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
        tenant: str | None = None,
        request_class: str | None = None,
        duplicate_group: int | None = None,
        priority: int = 0,
    ) -> None:
        self.request_id = request_id
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.prefix_group = prefix_group
        self.prefix_tokens = prefix_tokens
        # the user/session a session-affinity router hashes on (a traffic mix's sessions)
        self.session_id = session_id
        self.tenant = tenant
        self.request_class = request_class
        self.duplicate_group = duplicate_group
        self.priority = priority  # the gateway's queue order (the engine schedules it at 0)
        self.hash_blocks: HashBlocks | None = None  # a block-hash trace's prompt

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
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def arriving_at(self, arrival_s: float) -> OpenLoopRequest:
        req = OpenLoopRequest(
            self.request_id,
            arrival_s,
            self.prompt_tokens,
            self.output_tokens,
            self.prefix_group,
            self.prefix_tokens,
            self.session_id,
            self.tenant,
            self.request_class,
            self.duplicate_group,
            self.priority,
        )
        req.hash_blocks = self.hash_blocks
        return req


class _Hashes:
    """A stream's block-hash columns, each request's :class:`HashBlocks` made when it is popped
    (not up front: a long trace's ids stay in one array)."""

    __slots__ = ("block_tokens", "ids", "offsets")

    def __init__(self, arrays: RequestArrays) -> None:
        self.ids = arrays.hash_ids
        self.offsets: list[int] = arrays.hash_offsets.tolist()
        self.block_tokens = arrays.trace_block_tokens

    def of(self, i: int) -> HashBlocks | None:
        a = self.offsets[i]
        b = self.offsets[i + 1]
        if b == a:
            return None
        return HashBlocks(tuple(self.ids[a:b].tolist()), self.block_tokens)


def _hashes(arrays: RequestArrays) -> _Hashes | None:
    return _Hashes(arrays) if arrays.has_hashes else None


class _MixRows:
    """The traffic-mix fields of drawn rows as lists (tenant and class names, duplicate group
    and priority), for the open-loop sources: None when no row has any."""

    __slots__ = ("duplicate_group", "priority", "request_class", "tenant")

    def __init__(self, arrays: RequestArrays) -> None:
        tn, cn = arrays.tenant_names, arrays.class_names
        self.tenant: list[str | None] = [None if c < 0 else tn[c] for c in arrays.tenant.tolist()]
        self.request_class: list[str | None] = [None if c < 0 else cn[c] for c in arrays.request_class.tolist()]
        self.duplicate_group: list[int | None] = [None if d < 0 else d for d in arrays.duplicate_group.tolist()]
        self.priority: list[int] = arrays.priority.tolist()

    def fill(self, req: OpenLoopRequest, i: int) -> None:
        """Set ``req``'s traffic-mix fields to row ``i``'s."""
        req.tenant = self.tenant[i]
        req.request_class = self.request_class[i]
        req.duplicate_group = self.duplicate_group[i]
        req.priority = self.priority[i]


def _mix_rows(arrays: RequestArrays) -> _MixRows | None:
    cols = (arrays.tenant, arrays.request_class, arrays.duplicate_group)
    if any(bool((c >= 0).any()) for c in cols) or bool(arrays.priority.any()):
        return _MixRows(arrays)
    return None


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
        self._mix = _mix_rows(arrays)
        self._hashes = _hashes(arrays)
        self._times: list[float] = [*self.arrival_s, _INF]  # a sentinel: _times[_next] is the next arrival
        self._next = 0

    def next_arrival_s(self) -> float:
        return self._times[self._next]

    def pop(self) -> ArrivingRequest:
        i = self._next
        self._next = i + 1
        g = self.prefix_group[i]
        s = -1 if self.session_id is None else self.session_id[i]
        req = OpenLoopRequest(
            i,
            self.arrival_s[i],
            self.prompt_tokens[i],
            self.output_tokens[i],
            None if g < 0 else g,
            0 if g < 0 else self.prefix_tokens[i],
            None if s < 0 else s,
        )
        mix = self._mix
        if mix is not None:
            mix.fill(req, i)
        if self._hashes is not None:
            req.hash_blocks = self._hashes.of(i)
        return req

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


class SessionSource(ClosedLoopSource):
    """A sessions trace (:class:`~servecap.workload.sessions.SessionGraph`): roots arrive at their
    times; a child is issued ``delay_s`` after the last of its parents ended or was refused (a
    tool call, a sub-agent's join). Request ids are given in the order requests are issued."""

    def __init__(self, graph: SessionGraph, request_overhead_s: float = 0.0) -> None:
        self.graph = graph
        self.request_overhead_s = request_overhead_s
        self.issued: list[RequestSpec] = []
        self._heap: list[tuple[float, int, RequestSpec]] = []
        self._row: list[int] = []  # request id -> graph row
        self._children = graph.children()
        self._waiting: list[int] = [len(p) for p in graph.parents]  # parents not yet ended
        self._ready_s: list[float] = [0.0] * len(graph)  # the latest parent's end so far
        sessions: dict[str, int] = {}
        self._session: list[int] = [sessions.setdefault(s, len(sessions)) for s in graph.session]
        for i in range(len(graph)):
            if not graph.parents[i]:
                self._issue(i, graph.arrival_s[i])

    def _issue(self, row: int, t_s: float) -> None:
        g = self.graph
        spec = RequestSpec(
            request_id=len(self.issued),
            arrival_s=t_s,
            prompt_tokens=g.prompt_tokens[row],
            output_tokens=g.output_tokens[row],
            session_id=self._session[row],
            hash_blocks=g.hashes[row],
        )
        self._row.append(row)
        self._push(spec)

    def on_finished(self, request_id: int, t_s: float) -> None:
        row = self._row[request_id]
        end = t_s + self.request_overhead_s
        for child in self._children[row]:
            if end > self._ready_s[child]:
                self._ready_s[child] = end
            self._waiting[child] -= 1
            if self._waiting[child] == 0:
                self._issue(child, self._ready_s[child] + self.graph.delay_s[child])

    def expected_requests(self) -> int:
        return len(self.graph)


@dataclass(slots=True)
class _Chunk:
    start: int  # the id of its first request
    arrays: RequestArrays
    left: int  # requests not yet taken by the accumulator


class ChunkedSource(TrafficSource):
    """Open-loop requests from chunks; ``take(ids)`` returns their columns and lets go of
    chunks whose requests were all taken."""

    def __init__(self, chunks: Iterator[RequestArrays], expected_requests: int = 0) -> None:
        self._chunks = chunks
        self._expected = expected_requests
        self._live: list[_Chunk] = []
        self.tenant_names: tuple[str, ...] = ()
        self.class_names: tuple[str, ...] = ()
        self.issued = 0  # requests handed out so far
        self.last_arrival_s = 0.0
        self._times: list[float] = [_INF]
        self._i = 0
        self._base = 0  # the id of the current chunk's first request
        self._mix: _MixRows | None = None
        self._hashes: _Hashes | None = None
        self._load()

    def _load(self) -> None:
        a = next(self._chunks, None)
        while a is not None and len(a) == 0:
            a = next(self._chunks, None)
        if a is None:
            self._times = [_INF]
            self._i = 0
            return
        if not self._live:
            self.tenant_names, self.class_names = a.tenant_names, a.class_names
        self._base = self.issued
        self._live.append(_Chunk(self._base, a, len(a)))
        self._arrival: list[float] = a.arrival_s.tolist()
        self._prompt: list[int] = a.prompt_tokens.tolist()
        self._output: list[int] = a.output_tokens.tolist()
        self._group: list[int] = a.prefix_group.tolist()
        self._ptok: list[int] = a.prefix_tokens.tolist()
        sessions: list[int] = a.session_id.tolist()
        self._session: list[int] | None = sessions if any(s >= 0 for s in sessions) else None
        self._mix = _mix_rows(a)
        self._hashes = _hashes(a)
        self._times = [*self._arrival, _INF]
        self._i = 0

    def next_arrival_s(self) -> float:
        return self._times[self._i]

    def pop(self) -> ArrivingRequest:
        i = self._i
        self._i = i + 1
        g = self._group[i]
        s = -1 if self._session is None else self._session[i]
        t = self._arrival[i]
        mix = self._mix
        req = OpenLoopRequest(
            self._base + i,
            t,
            self._prompt[i],
            self._output[i],
            None if g < 0 else g,
            0 if g < 0 else self._ptok[i],
            None if s < 0 else s,
        )
        if mix is not None:
            mix.fill(req, i)
        if self._hashes is not None:
            req.hash_blocks = self._hashes.of(i)
        self.issued += 1
        self.last_arrival_s = t
        if self._i == len(self._arrival):
            self._load()
        return req

    def on_finished(self, request_id: int, t_s: float) -> None:
        return None

    def expected_requests(self) -> int:
        return self._expected

    @property
    def live_chunks(self) -> int:
        return len(self._live)

    def take(self, ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], RequestArrays]:
        """The rows of requests ``ids`` (each taken once), as ``(positions, rows)``: row ``j``
        of ``rows`` is request ``ids[positions[j]]``. Chunks all of whose requests were taken,
        are let go."""
        pos_parts: list[NDArray[np.int64]] = []
        row_parts: list[RequestArrays] = []
        for c in self._live:
            rel = ids - c.start
            mine = np.flatnonzero((rel >= 0) & (rel < len(c.arrays)))
            if mine.size:
                pos_parts.append(mine)
                row_parts.append(c.arrays.take(rel[mine]))
                c.left -= int(mine.size)
        self._live = [c for c in self._live if c.left > 0]  # all taken: all issued long ago
        if not row_parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, RequestArrays(np.zeros(0), empty, empty, empty, empty)
        if len(row_parts) == 1:
            return pos_parts[0], row_parts[0]
        return np.concatenate(pos_parts), _concat(row_parts)


def _concat(parts: list[RequestArrays]) -> RequestArrays:
    first = parts[0]
    return RequestArrays(
        np.concatenate([p.arrival_s for p in parts]),
        np.concatenate([p.prompt_tokens for p in parts]),
        np.concatenate([p.output_tokens for p in parts]),
        np.concatenate([p.prefix_group for p in parts]),
        np.concatenate([p.prefix_tokens for p in parts]),
        tenant=np.concatenate([p.tenant for p in parts]),
        request_class=np.concatenate([p.request_class for p in parts]),
        tenant_names=first.tenant_names,
        class_names=first.class_names,
    )
