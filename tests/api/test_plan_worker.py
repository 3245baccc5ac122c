"""New plans are computed first come first served (on one thread, or on worker processes), and
concurrent requests for the same body share one computation."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from servecap.api.plan_compute import WARM_BODY, plan_json_from_key, warm
from servecap.api.plan_worker import PlanWorker
from servecap.errors import ServecapError


async def test_one_at_a_time_in_arrival_order_and_shared() -> None:
    order: list[str] = []
    active = 0
    most = 0
    lock = threading.Lock()
    calls = {"a": 0, "b": 0, "c": 0, "d": 0}

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

    worker = PlanWorker(make)
    tasks = [asyncio.create_task(worker.compute(k)) for k in ("a", "b", "a", "c", "a")]
    got = await asyncio.gather(*tasks)
    assert got == [b"a", b"b", b"a", b"c", b"a"]
    assert most == 1  # never two at once
    assert order == ["a", "b", "c"]  # in arrival order
    assert calls == {"a": 1, "b": 1, "c": 1, "d": 0}  # the three requests for "a" shared one computation
    worker.shutdown()
    # usable again after a shutdown (a test client may run the app's lifespan more than once)
    assert await worker.compute("d") == b"d"
    worker.shutdown()


def _key(body: dict[str, object]) -> str:
    from servecap.api.bodies import PlanBody

    return PlanBody.model_validate(body).model_dump_json()


async def test_worker_processes_give_the_thread_answers_and_errors(tmp_path: Path) -> None:
    """``plan_workers`` processes (``servecap serve --plan-workers N``) return the same bytes as
    the in-process thread, a ServecapError raised in a worker comes back as itself (the API
    turns it into the one-line 400), and a worker that dies fails only its own request and is
    replaced."""
    work = partial(plan_json_from_key, upload_dir=str(tmp_path))
    keys = [_key({**WARM_BODY, "prompt_tokens": 100 + i}) for i in range(6)]
    thread = PlanWorker(work)
    want = [await thread.compute(k) for k in keys]
    thread.shutdown()
    procs = PlanWorker(work, 2, warm=partial(warm, str(tmp_path)))
    try:
        await procs.start()
        assert await asyncio.gather(*(procs.compute(k) for k in keys)) == want
        big = _key({"model": "meta-llama/Llama-3.1-70B", "gpu": "H100"})  # BF16 70B: not one H100
        with pytest.raises(ServecapError) as err:
            await procs.compute(big)
        assert err.value.field == "weights_bytes_per_gpu"
        assert "try --weights-dtype fp8" in str(err.value)
        pids = [p.proc.pid for p in procs._procs]
        os.kill(pids[0], signal.SIGKILL)
        await asyncio.sleep(0.2)  # the loop sees the pipe close and starts another worker
        again = [_key({**WARM_BODY, "prompt_tokens": 200 + i}) for i in range(4)]
        got = await asyncio.gather(*(procs.compute(k) for k in again), return_exceptions=True)
        assert all(isinstance(g, bytes) for g in got)
        assert len(procs._procs) == 2 and pids[0] not in [p.proc.pid for p in procs._procs]
    finally:
        started = [p.proc for p in procs._procs]
        procs.shutdown()
    assert started and all(not proc.is_alive() for proc in started)  # no worker outlives the server


def test_worker_count_is_checked() -> None:
    with pytest.raises(ValueError):
        PlanWorker(lambda k: b"", -1)
