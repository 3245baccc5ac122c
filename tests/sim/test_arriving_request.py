"""One arriving-request shape: the open-loop sources' requests carry their row's traffic-mix
fields, as ``RequestArrays.to_requests`` does, and ``arriving_at`` moves only the arrival."""

from __future__ import annotations

import numpy as np

from servecap.sim.traffic import ChunkedSource, OpenLoopRequest, OpenLoopSource
from servecap.workload import RequestArrays, RequestSpec

FIELDS = (
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "prefix_group",
    "prefix_tokens",
    "user_id",
    "turn",
    "history_tokens",
    "conversation_id",
    "priority",
    "tenant",
    "request_class",
    "session_id",
    "duplicate_group",
    "total_tokens",
)


def _mixed() -> RequestArrays:
    # three rows: acme/chat (a repeat of group 7, priority 0), a bare row, batchco/bulk (priority 5)
    i64 = np.int64
    return RequestArrays(
        arrival_s=np.array([0.5, 1.0, 2.0]),
        prompt_tokens=np.array([100, 200, 300], dtype=i64),
        output_tokens=np.array([10, 20, 30], dtype=i64),
        prefix_group=np.array([3, -1, -1], dtype=i64),
        prefix_tokens=np.array([64, 0, 0], dtype=i64),
        tenant=np.array([0, -1, 1], dtype=i64),
        request_class=np.array([0, -1, 1], dtype=i64),
        session_id=np.array([-1, 4, -1], dtype=i64),
        duplicate_group=np.array([7, -1, -1], dtype=i64),
        priority=np.array([0, 0, 5], dtype=i64),
        tenant_names=("acme", "batchco"),
        class_names=("chat", "bulk"),
    )


def _fields(r: object) -> tuple[object, ...]:
    return tuple(getattr(r, f) for f in FIELDS)


def test_open_loop_requests_are_their_rows_as_request_specs() -> None:
    a = _mixed()
    src = OpenLoopSource(a)
    got = [src.pop() for _ in range(3)]
    assert all(type(r) is OpenLoopRequest for r in got)
    assert [_fields(r) for r in got] == [_fields(s) for s in a.to_requests()]
    # by hand: row 2 is batchco/bulk at priority 5, row 0 a repeat of group 7 behind prefix 3
    assert (got[2].tenant, got[2].request_class, got[2].priority) == ("batchco", "bulk", 5)
    assert (got[0].duplicate_group, got[0].prefix_group, got[0].prefix_tokens) == (7, 3, 64)
    assert (got[1].tenant, got[1].session_id, got[1].total_tokens) == (None, 4, 220)


def test_chunked_source_gives_the_same_requests() -> None:
    a = _mixed()
    chunks = iter([a.take(np.array([0, 1])), a.take(np.array([2]))])
    src = ChunkedSource(chunks, len(a))
    assert [_fields(src.pop()) for _ in range(3)] == [_fields(s) for s in a.to_requests()]


def test_arriving_at_moves_the_arrival_and_keeps_the_class() -> None:
    a = _mixed()
    r = OpenLoopSource(a).pop()
    moved = r.arriving_at(9.0)
    assert type(moved) is OpenLoopRequest and moved.arrival_s == 9.0
    assert _fields(moved)[2:] == _fields(r)[2:] and moved.request_id == r.request_id
    spec = a.to_requests()[2]
    later = spec.arriving_at(4.5)
    assert type(later) is RequestSpec and later.arrival_s == 4.5 and later.tenant == "batchco"
    assert later == RequestSpec(**{**{f: getattr(spec, f) for f in FIELDS[:-1]}, "arrival_s": 4.5})
