"""New plans are computed one at a time, first come first served, and concurrent requests for
the same body share one computation."""

from __future__ import annotations

import asyncio
import threading
import time

from servecap.api.plan_worker import PlanWorker


async def test_one_at_a_time_in_arrival_order_and_shared() -> None:
    worker = PlanWorker()
    order: list[str] = []
    active = 0
    most = 0
    lock = threading.Lock()
    calls = {"a": 0, "b": 0, "c": 0}

    def make(key: str) -> bytes:
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
            calls[key] += 1
        time.sleep(0.02)
        order.append(key)
        with lock:
            active -= 1
        return key.encode()

    tasks = [asyncio.create_task(worker.compute(k, lambda k=k: make(k))) for k in ("a", "b", "a", "c", "a")]
    got = await asyncio.gather(*tasks)
    assert got == [b"a", b"b", b"a", b"c", b"a"]
    assert most == 1  # never two at once
    assert order == ["a", "b", "c"]  # in arrival order
    assert calls == {"a": 1, "b": 1, "c": 1}  # the three requests for "a" shared one computation
    worker.shutdown()
    # usable again after a shutdown (a test client may run the app's lifespan more than once)
    assert await worker.compute("d", lambda: b"d") == b"d"
    worker.shutdown()
