"""The executor on a local pool of worker processes (``concurrent.futures``).

A worker that dies (killed, out of memory, a crash in native code) breaks the whole pool, and
every task still pending with it fails with ``BrokenProcessPool``, the innocent with the guilty.
So a broken round's tasks are run again in a fresh pool; a task that has been in
``max_retries + 1`` broken rounds is then run alone, in a pool of its own, which tells exactly
whether it is the one that kills its worker (then it is reported as ``"worker died"``) or not.

With ``persistent`` the pool outlives one ``map``: a caller that maps many small batches (the
fleet planner's rounds of simulations) pays the workers' start once, until :meth:`close` (or a
broken round, after which a fresh pool is started).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from servecap.distributed.executor import WORKER_DIED, TaskOutcome, describe, report
from servecap.errors import ServecapError
from servecap.progress import ProgressFn

T = TypeVar("T")
R = TypeVar("R")


class ProcessExecutor:
    name = "process"

    def __init__(self, workers: int | None = None, *, max_retries: int = 1, persistent: bool = False) -> None:
        if workers is not None and workers < 1:
            raise ServecapError("workers", workers, "must be at least 1")
        if max_retries < 0:
            raise ServecapError("max_retries", max_retries, "must be 0 or more")
        self.workers = workers or max(1, os.cpu_count() or 1)
        self.max_retries = max_retries
        # forkserver: workers start from a clean process, not a fork of one holding threads
        self._context = multiprocessing.get_context("forkserver")
        self.persistent = persistent
        self._pool: ProcessPoolExecutor | None = None

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, progress: ProgressFn | None = None
    ) -> list[TaskOutcome[R]]:
        n = len(items)
        outcomes: dict[int, TaskOutcome[R]] = {}
        attempts = [0] * n
        broken_rounds = [0] * n
        pending = list(range(n))
        while pending:
            suspects = [i for i in pending if broken_rounds[i] > self.max_retries]
            together = [i for i in pending if broken_rounds[i] <= self.max_retries]
            broken = self._round(fn, items, together, outcomes, attempts, progress)
            for i in suspects:  # alone: a break now can only be this task's doing
                if self._round(fn, items, [i], outcomes, attempts, progress):
                    outcomes[i] = TaskOutcome(index=i, error=WORKER_DIED, attempts=attempts[i])
                    report(progress, len(outcomes), n, self.name)
            for i in broken:
                broken_rounds[i] += 1
            pending = broken
        return [outcomes[i] for i in range(n)]

    def _round(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        indices: list[int],
        outcomes: dict[int, TaskOutcome[R]],
        attempts: list[int],
        progress: ProgressFn | None,
    ) -> list[int]:
        """Run ``indices`` in one pool (a fresh one unless persistent); store their outcomes;
        return those the pool lost."""
        if not indices:
            return []
        if self.persistent:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context)
            broken = self._collect(self._pool, fn, items, indices, outcomes, attempts, progress)
            if broken:  # a broken pool takes no more work: the next round starts a fresh one
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            return broken
        workers = min(self.workers, len(indices))
        with ProcessPoolExecutor(max_workers=workers, mp_context=self._context) as pool:
            return self._collect(pool, fn, items, indices, outcomes, attempts, progress)

    def _collect(
        self,
        pool: ProcessPoolExecutor,
        fn: Callable[[T], R],
        items: Sequence[T],
        indices: list[int],
        outcomes: dict[int, TaskOutcome[R]],
        attempts: list[int],
        progress: ProgressFn | None,
    ) -> list[int]:
        broken: list[int] = []
        futures: dict[Future[R], int] = {pool.submit(fn, items[i]): i for i in indices}
        for fut in as_completed(futures):
            i = futures[fut]
            attempts[i] += 1
            try:
                outcomes[i] = TaskOutcome(index=i, value=fut.result(), attempts=attempts[i])
            except BrokenProcessPool:
                broken.append(i)
                continue
            except Exception as exc:
                outcomes[i] = TaskOutcome(index=i, error=describe(exc), attempts=attempts[i])
            report(progress, len(outcomes), len(items), self.name)
        return sorted(broken)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
