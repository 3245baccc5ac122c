"""Long work (simulations, capacity searches, fleet plans) as jobs: submit -> id -> progress ->
result, cancellable, with bounded concurrency.

Each job runs in a process of its own (a ``forkserver`` child: the server's threads are never
forked), so a CPU-bound simulation never stalls the API's event loop, and cancelling a job is
terminating its process. The child reports :class:`~servecap.progress.Progress` events (at most
ten a second) and then its result or its one-line error through a pipe; the server keeps the
latest progress and wakes every listener (polling or server-sent events).

Limits that keep one user from exhausting the server: at most ``max_running`` jobs run at once,
at most ``max_queued`` wait, and a finished job is kept for ``keep_finished`` more submissions.
A job's process may use at most ``memory_bytes`` of address space (``RLIMIT_AS``: an allocation
past it fails with a one-line error, not the server's memory) and run for at most ``timeout_s``
(then it is terminated and the job fails, saying so). The work a job asks for is sized before
it is queued (app/limits.py); these two catch what sizing cannot foresee.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import multiprocessing
import os
import secrets
import time
import traceback
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from servecap.errors import ServecapError
from servecap.progress import Progress

JobFn = Callable[[dict[str, Any], Callable[[Progress], None]], dict[str, Any]]

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"

JOB_MODULES = (
    "servecap.api.jobfns",
    "servecap.api.replay_job",
    "servecap.api.cache_replay_job",
    "servecap.app.simulate",
    "servecap.app.capacity",
    "servecap.app.fleet_simulate",
    "servecap.app.fleet_plan",
    "servecap.results.store",
)
"""The modules a job's process runs (the job functions and the use cases they import when called)."""
FINAL = frozenset({DONE, FAILED, CANCELLED})
_PROGRESS_EVERY_S = 0.1


class JobQueueFull(ServecapError):
    """Too many jobs are queued: the client should retry later (HTTP 429)."""


@dataclass(slots=True)
class Job:
    id: str
    kind: str
    payload: dict[str, Any]
    state: str = QUEUED
    progress: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    created_s: float = field(default_factory=time.time)
    started_s: float | None = None
    finished_s: float | None = None
    version: int = 0  # bumped on every change; listeners wait for it to move
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    process: Any = None
    result_json: bytes | None = None  # the result as the job's process serialised it

    def snapshot_json(self) -> bytes:
        """:meth:`snapshot` as JSON, the result spliced in as the job serialised it (a large
        result is never encoded again on the server's event loop)."""
        head = json.dumps({**self.snapshot(), "result": None}).encode()
        if self.state != DONE or self.result_json is None:
            return head
        assert head.endswith(b'"result": null}')
        return head[: -len(b"null}")] + self.result_json + b"}"

    def snapshot(self) -> dict[str, Any]:
        """The job as the API shows it (``result`` only once done)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "progress": self.progress,
            "error": self.error,
            "created_s": self.created_s,
            "started_s": self.started_s,
            "finished_s": self.finished_s,
            "result": self.result if self.state == DONE else None,
        }

    def touch(self) -> None:
        self.version += 1
        self.changed.set()
        self.changed = asyncio.Event()


JOB_NICENESS = 10
"""How much lower a job's process runs than the server's (``os.nice``): with every core busy with
jobs, the event loop still answers ``/health`` and cached plans at once."""


def _child(
    fn: JobFn,
    payload: dict[str, Any],
    conn: Connection,
    memory_bytes: int | None = None,
    max_result_bytes: int | None = None,
) -> None:
    """Runs in the job's process: lower its priority, cap its memory, call ``fn``, stream
    progress, send the outcome (its time series downsampled for the web, its size capped)."""
    from servecap.api.result_size import downsample

    last = [0.0]
    with contextlib.suppress(OSError):  # not permitted here: the job runs at the server's priority
        os.nice(JOB_NICENESS)
    if memory_bytes is not None:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

    def progress(p: Progress) -> None:
        now = time.monotonic()
        if now - last[0] >= _PROGRESS_EVERY_S or (p.total is not None and p.done >= p.total):
            last[0] = now
            conn.send(("progress", asdict(p)))

    try:
        data = json.dumps(downsample(fn(payload, progress)), allow_nan=False).encode()
        if max_result_bytes is not None and len(data) > max_result_bytes:
            conn.send(
                (
                    "failed",
                    f"result={len(data) / 1e6:,.1f} MB: over the server's limit of {max_result_bytes / 1e6:,.1f} MB "
                    "(servecap serve --max-result-mb); ask for less (fewer replicas, a shorter run)",
                )
            )
        else:
            conn.send(("done", data))
    except ServecapError as exc:
        conn.send(("failed", str(exc)))
    except MemoryError:
        shown = f"{memory_bytes:,} bytes" if memory_bytes is not None else "the machine's"
        conn.send(("failed", f"job_memory={shown!r}: the job ran out of memory (servecap serve --job-memory-mb)"))
    except Exception as exc:  # a bug: one line for the client, the traceback in the server's log
        traceback.print_exc()
        conn.send(("failed", f"internal error: {type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _receive(recv: Connection) -> tuple[str, Any]:
    """The next message from a job's process; a result arrives as JSON and is parsed here (in a
    thread, off the event loop): ``(bytes, dict)``."""
    kind, value = recv.recv()
    if kind == "done":
        return kind, (value, json.loads(value))
    return kind, value


class JobManager:
    def __init__(
        self,
        *,
        max_running: int = 2,
        max_queued: int = 16,
        keep_finished: int = 200,
        timeout_s: float | None = None,
        memory_bytes: int | None = None,
        max_result_bytes: int | None = None,
    ) -> None:
        if max_running < 1:
            raise ServecapError("max_running", max_running, "must be at least 1")
        self.max_running = max_running
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.max_result_bytes = max_result_bytes
        self.max_queued = max_queued
        self.keep_finished = keep_finished
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._slots = asyncio.Semaphore(max_running)
        self._tasks: set[asyncio.Task[None]] = set()
        self._ctx = multiprocessing.get_context("forkserver")
        # the fork server imports what the jobs run once, when it starts (the first job): each job's
        # process is forked from it with them loaded instead of importing them again (a second or
        # two of CPU a job). No effect once the fork server runs; a module that fails is skipped.
        self._ctx.set_forkserver_preload(["__main__", *JOB_MODULES])
        self._counter = itertools.count(1)

    # -- submit, look up, cancel ------------------------------------------------------------------

    def submit(self, kind: str, fn: JobFn, payload: dict[str, Any]) -> Job:
        """Queue a job and return at once (its process starts when a slot is free)."""
        queued = sum(1 for j in self._jobs.values() if j.state == QUEUED)
        if queued >= self.max_queued:
            raise JobQueueFull("jobs", queued, f"{self.max_queued} jobs are already waiting; retry later")
        job = Job(id=f"{next(self._counter)}-{secrets.token_hex(4)}", kind=kind, payload=payload)
        self._jobs[job.id] = job
        self._forget_old()
        task = asyncio.get_running_loop().create_task(self._run(job, fn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise ServecapError("job_id", job_id, "no such job (finished jobs are kept for a while, then forgotten)")
        return job

    def list(self) -> list[Job]:
        return list(self._jobs.values())

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job.state in FINAL:
            return job
        if job.process is not None and job.process.is_alive():
            job.process.terminate()
        self._finish(job, CANCELLED, error="cancelled")
        return job

    async def events(self, job_id: str) -> AsyncIterator[dict[str, Any]]:
        """The job's snapshots, one per change, ending with its final state."""
        job = self.get(job_id)
        while True:
            changed = job.changed
            yield job.snapshot()
            if job.state in FINAL:
                return
            await changed.wait()

    async def shutdown(self) -> None:
        for job in list(self._jobs.values()):
            if job.state not in FINAL:
                self.cancel(job.id)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- running ----------------------------------------------------------------------------------

    async def _run(self, job: Job, fn: JobFn) -> None:
        async with self._slots:
            if job.state in FINAL:  # cancelled while queued
                return
            recv, send = self._ctx.Pipe(duplex=False)
            proc = self._ctx.Process(
                target=_child, args=(fn, job.payload, send, self.memory_bytes, self.max_result_bytes), daemon=True
            )
            try:
                proc.start()
            except Exception as exc:  # no process (out of processes or memory): the job fails, others go on
                recv.close()
                send.close()
                self._finish(job, FAILED, error=f"internal error: the job's process did not start ({exc!r:.200})")
                return
            send.close()
            job.process = proc
            job.state, job.started_s = RUNNING, time.time()
            job.touch()
            try:
                await asyncio.wait_for(self._pump(job, recv), self.timeout_s)
            except TimeoutError:
                proc.terminate()
                self._finish(
                    job,
                    FAILED,
                    error=f"job_timeout_s={self.timeout_s:g}: the job ran past the server's time limit and was "
                    "stopped (servecap serve --job-timeout-s)",
                )
            finally:
                recv.close()
                await asyncio.to_thread(proc.join, 5.0)
                if proc.is_alive():
                    proc.kill()
                job.process = None
                if job.state not in FINAL:
                    self._finish(job, FAILED, error=f"internal error: the job's process exited ({proc.exitcode})")

    async def _pump(self, job: Job, recv: Connection) -> None:
        while job.state not in FINAL:
            try:
                kind, value = await asyncio.to_thread(_receive, recv)
            except (EOFError, OSError):
                return
            if kind == "progress":
                job.progress = value
                job.touch()
            elif kind == "done":
                job.result_json = value[0]
                self._finish(job, DONE, result=value[1])
            else:
                self._finish(job, FAILED, error=str(value))

    def _finish(self, job: Job, state: str, *, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        if job.state in FINAL:
            return
        job.state, job.result, job.error, job.finished_s = state, result, error, time.time()
        job.touch()

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.state in FINAL]
        for job in finished[: max(0, len(finished) - self.keep_finished)]:
            del self._jobs[job.id]
