"""The job manager: jobs run in child processes, report progress, finish, fail with one line,
cancel, and are bounded."""

from __future__ import annotations

import asyncio

import pytest
from tests.api import jobfns

from servecap.api.jobs import CANCELLED, DONE, FAILED, JobManager, JobQueueFull


async def _final(manager: JobManager, job_id: str) -> dict:  # type: ignore[type-arg]
    last: dict = {}  # type: ignore[type-arg]
    async for snap in manager.events(job_id):
        last = snap
    return last


async def test_job_reports_progress_and_result() -> None:
    manager = JobManager(max_running=1)
    job = manager.submit("count", jobfns.count, {"n": 5, "sleep_s": 0.02})
    seen = []
    async for snap in manager.events(job.id):
        seen.append(snap)
    assert seen[-1]["state"] == DONE
    assert seen[-1]["result"] == {"total": 15}
    assert any(s["progress"] and s["progress"]["stage"] == "count" for s in seen)
    await manager.shutdown()


async def test_failure_is_one_line() -> None:
    manager = JobManager()
    job = manager.submit("refuse", jobfns.refuse, {"rate": -1})
    final = await asyncio.wait_for(_final(manager, job.id), 30)
    assert final["state"] == FAILED
    assert final["error"] == "rate=-1: must be positive"
    await manager.shutdown()


async def test_cancel_terminates_the_process() -> None:
    manager = JobManager()
    job = manager.submit("forever", jobfns.forever, {})
    for _ in range(300):
        if job.process is not None:
            break
        await asyncio.sleep(0.02)
    proc = job.process
    manager.cancel(job.id)
    final = await asyncio.wait_for(_final(manager, job.id), 30)
    assert final["state"] == CANCELLED
    for _ in range(300):
        if proc is None or not proc.is_alive():
            break
        await asyncio.sleep(0.02)
    assert proc is None or not proc.is_alive()
    await manager.shutdown()


async def test_queue_is_bounded() -> None:
    manager = JobManager(max_running=1, max_queued=1)
    first = manager.submit("forever", jobfns.forever, {})
    await asyncio.sleep(0)  # the first job takes the only slot
    for _ in range(300):
        if first.state != "queued":
            break
        await asyncio.sleep(0.02)
    manager.submit("count", jobfns.count, {"n": 1})
    with pytest.raises(JobQueueFull, match="already waiting"):
        manager.submit("count", jobfns.count, {"n": 1})
    await manager.shutdown()


async def test_a_job_past_its_wall_time_is_stopped_and_says_so() -> None:
    manager = JobManager(timeout_s=1.0)
    job = manager.submit("forever", jobfns.forever, {})
    final = await asyncio.wait_for(_final(manager, job.id), 30)
    assert final["state"] == FAILED
    assert final["error"].startswith("job_timeout_s=1: the job ran past the server's time limit")
    assert "--job-timeout-s" in final["error"]
    await manager.shutdown()


async def test_a_job_past_its_memory_limit_fails_in_one_line() -> None:
    manager = JobManager(memory_bytes=2 * 1024**3)
    job = manager.submit("allocate", jobfns.allocate, {"bytes": 8 * 1024**3})
    final = await asyncio.wait_for(_final(manager, job.id), 30)
    assert final["state"] == FAILED
    assert "ran out of memory" in final["error"] and "--job-memory-mb" in final["error"]
    small = manager.submit("allocate", jobfns.allocate, {"bytes": 10_000_000})  # the limit leaves room to work
    assert (await asyncio.wait_for(_final(manager, small.id), 30))["result"] == {"allocated": 10_000_000}
    await manager.shutdown()
