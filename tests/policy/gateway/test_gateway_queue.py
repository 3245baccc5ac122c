"""The gateway queue: bounded, tiers served in order, maximum wait honoured, lowest tier shed first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.errors import ServecapError
from servecap.policy.gateway import GatewayQueue


def test_tiers_in_order_fifo_within() -> None:
    q: GatewayQueue[str] = GatewayQueue(capacity=10)
    for name, tier in [("b1", 1), ("a1", 0), ("b2", 1), ("a2", 0), ("c1", 2)]:
        assert q.push(name, tier, 0.0) == (True, [])
    assert [q.pop(1.0) for _ in range(6)] == ["a1", "a2", "b1", "b2", "c1", None]


def test_full_queue_sheds_the_newest_of_the_lowest_tier() -> None:
    q: GatewayQueue[str] = GatewayQueue(capacity=3)
    q.push("gold", 0, 0.0)
    q.push("bronze-old", 2, 0.0)
    q.push("bronze-new", 2, 1.0)
    assert q.push("silver", 1, 2.0) == (True, ["bronze-new"])
    assert q.push("bronze-late", 2, 3.0) == (False, [])  # no better than the worst queued: 429
    assert q.push("silver-2", 1, 3.0) == (True, ["bronze-old"])
    assert q.push("silver-3", 1, 3.0) == (False, [])  # ties are not shed
    assert len(q) == 3
    assert [q.pop(4.0) for _ in range(3)] == ["gold", "silver", "silver-2"]


def test_maximum_wait() -> None:
    q: GatewayQueue[int] = GatewayQueue(capacity=10, max_wait_s=5.0)
    q.push(1, 0, 0.0)
    q.push(2, 0, 2.0)
    assert q.next_timeout_s() == 5.0
    assert q.expire(5.0) == []  # exactly at the limit it still waits
    assert q.expire(5.5) == [1]
    assert q.next_timeout_s() == 7.0
    assert q.pop(7.5) is None  # 2 timed out as well
    assert len(q) == 0


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    capacity=st.integers(1, 8),
    max_wait=st.floats(0.5, 20),
    ops=st.lists(st.tuples(st.sampled_from(["push", "pop"]), st.integers(0, 3), st.floats(0, 3)), max_size=120),
)
def test_queue_invariants(capacity: int, max_wait: float, ops: list[tuple[str, int, float]]) -> None:
    q: GatewayQueue[tuple[int, int, float]] = GatewayQueue(capacity=capacity, max_wait_s=max_wait)
    now = 0.0
    waiting: dict[int, tuple[int, float]] = {}
    for k, (op, tier, gap) in enumerate(ops):
        now += gap
        for item in q.expire(now):
            assert now > item[2] + max_wait  # the queue's own comparison (deadline = enqueued + wait)
            del waiting[item[0]]
        if op == "push":
            ok, shed = q.push((k, tier, now), tier, now)
            for s in shed:
                assert ok and s[1] > tier  # only a better tier sheds
                assert s[1] >= max(t for t, _ in waiting.values())  # the lowest tier goes first
                del waiting[s[0]]
            if ok:
                waiting[k] = (tier, now)
            else:
                assert len(waiting) == capacity and tier >= max(t for t, _ in waiting.values())
        else:
            item = q.pop(now)
            if item is None:
                assert not waiting
            else:
                assert now <= item[2] + max_wait  # the maximum wait is honoured
                assert item[1] == min(t for t, _ in waiting.values())  # best tier first
                del waiting[item[0]]
        assert len(q) == len(waiting) <= capacity


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"capacity": 0}, "gateway.queue.capacity"),
        ({"capacity": 5, "max_wait_s": 0}, "gateway.queue.max_wait_s"),
        ({"capacity": 5, "max_wait_s": -1}, "gateway.queue.max_wait_s"),
    ],
)
def test_bad_queue_settings(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ServecapError) as err:
        GatewayQueue(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field
