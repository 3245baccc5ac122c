"""The waiting queue as a scheduling-policy object (vLLM V1's ``RequestQueue``:
``vllm/v1/core/sched/request_queue.py``, ``FCFSRequestQueue`` and ``PriorityRequestQueue``).

The engine admits ``peek()``/``pop()`` in queue order, puts a preempted request back with
``prepend()`` and asks the policy which running request to preempt (``victim_index``):

- ``fcfs``: arrival order; a preempted request goes back to the front; the victim is the
  youngest running request (the last in the running list);
- ``priority``: lowest ``priority`` value first, ties by arrival; a preempted request goes back
  into the heap; the victim is the running request with the highest ``(priority, seq)``.
"""

from __future__ import annotations

import heapq
from collections import deque

from servecap.sim.request_state import RequestState


class RequestQueue:
    """The waiting requests, in the order a policy admits them."""

    def add(self, r: RequestState) -> None:
        """A new arrival."""
        raise NotImplementedError

    def peek(self) -> RequestState:
        """The next to admit (the queue is not empty)."""
        raise NotImplementedError

    def pop(self) -> RequestState:
        """Take the next to admit (the queue is not empty)."""
        raise NotImplementedError

    def prepend(self, r: RequestState) -> None:
        """A preempted request goes back."""
        raise NotImplementedError

    def remove(self, r: RequestState) -> None:
        """Drop a waiting request (aborted)."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def victim_index(self, running: list[RequestState]) -> int:
        """Index in ``running`` (in scheduling order) of the request to preempt."""
        raise NotImplementedError


class FcfsQueue(RequestQueue):
    def __init__(self) -> None:
        self._q: deque[RequestState] = deque()

    def add(self, r: RequestState) -> None:
        self._q.append(r)

    def peek(self) -> RequestState:
        return self._q[0]

    def pop(self) -> RequestState:
        return self._q.popleft()

    def prepend(self, r: RequestState) -> None:
        self._q.appendleft(r)

    def remove(self, r: RequestState) -> None:
        self._q.remove(r)

    def __len__(self) -> int:
        return len(self._q)

    def victim_index(self, running: list[RequestState]) -> int:
        return len(running) - 1


class PriorityQueue(RequestQueue):
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, RequestState]] = []  # (priority, seq, request): seq is unique

    def add(self, r: RequestState) -> None:
        heapq.heappush(self._heap, (r.priority, r.seq, r))

    def peek(self) -> RequestState:
        return self._heap[0][2]

    def pop(self) -> RequestState:
        return heapq.heappop(self._heap)[2]

    def prepend(self, r: RequestState) -> None:
        heapq.heappush(self._heap, (r.priority, r.seq, r))

    def remove(self, r: RequestState) -> None:
        self._heap = [e for e in self._heap if e[2] is not r]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def victim_index(self, running: list[RequestState]) -> int:
        best = 0
        for j in range(1, len(running)):
            r, b = running[j], running[best]
            if (r.priority, r.seq) > (b.priority, b.seq):
                best = j
        return best


QUEUES: dict[str, type[RequestQueue]] = {"fcfs": FcfsQueue, "priority": PriorityQueue}


def make_queue(policy: str) -> RequestQueue:
    """The waiting queue of a scheduling policy (``EngineSetup.scheduling_policy``)."""
    return QUEUES[policy]()
