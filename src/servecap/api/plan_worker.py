"""Closed-form answers computed one at a time, in arrival order, off the event loop.

A plan costs a few milliseconds of pure-Python CPU. Run in FastAPI's default thread pool, forty
of them at once share one interpreter lock in 5 ms slices, so each answer waits for all the
others and the tail grows with the crowd (measured: p99 1.0 s with 50 clients). One worker
thread serves them first come, first served instead: the same throughput, each request waiting
only for those ahead of it, and the event loop stays free to answer cached bodies at once.
Concurrent requests for the same new body share one computation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


class PlanWorker:
    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None  # made on first use (again after a shutdown)
        self._inflight: dict[str, asyncio.Future[bytes]] = {}

    async def compute(self, key: str, fn: Callable[[], bytes]) -> bytes:
        """``fn()`` on the worker thread; a caller asking for a ``key`` already being computed
        waits for that computation."""
        running = self._inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="servecap-plan")
        future = asyncio.get_running_loop().run_in_executor(self._pool, fn)
        self._inflight[key] = future
        try:
            return await asyncio.shield(future)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
