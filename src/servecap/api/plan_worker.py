"""Closed-form answers computed off the event loop, first come first served.

A plan with its lever table costs about a millisecond of pure-Python CPU. Run in FastAPI's
default thread pool, forty of them at once share one interpreter lock in 5 ms slices, so each
answer waits for all the others and the tail grows with the crowd (measured: p99 1.0 s with 50
clients). Here they queue in arrival order instead, each request waiting only for those ahead
of it, and the event loop stays free to answer cached bodies at once. Concurrent requests for
the same new body share one computation.

Where they run:

- ``processes=0``: one worker thread (the in-process default; the interpreter lock keeps the
  plans on one core whatever the thread count);
- ``processes=N``: N worker processes (``servecap serve --plan-workers N``), so plans run on N
  cores at once. Each worker owns one pipe; the event loop watches the pipes itself
  (``add_reader``) and hands the oldest waiting key to whichever worker answers, so there is no
  executor thread contending with the loop for the interpreter lock (``ProcessPoolExecutor``
  keeps a management thread in the server process for that). Workers are started with
  ``forkserver`` (never a fork of the threaded server), warm themselves by planning one body,
  and are started again if one dies (its request fails with a one-line error, the others go
  on). A ``ServecapError`` raised in a worker comes back as itself.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from servecap.errors import ServecapError

_OK, _ERROR, _CRASH = b"\x00", b"\x01", b"\x02"


def _worker_main(conn: Connection, work: Callable[[str], bytes], warm: Callable[[], Any] | None) -> None:
    """A worker process: answer each key it is sent with ``work(key)``, in order."""
    if warm is not None:
        warm()
    conn.send_bytes(_OK)  # ready
    while True:
        try:
            key = conn.recv_bytes().decode()
        except (EOFError, OSError):  # the server went away
            return
        try:
            out = _OK + work(key)
        except ServecapError as err:
            out = _ERROR + pickle.dumps(err)
        except Exception as err:  # a bug: the server answers 500 with its one line, the worker lives on
            out = _CRASH + f"{type(err).__name__}: {err}".encode()
        conn.send_bytes(out)


class _Proc:
    __slots__ = ("conn", "current", "proc")

    def __init__(self, proc: Any, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.current: tuple[str, asyncio.Future[bytes]] | None = None


class PlanWorker:
    """``work(key)`` for each key, one thread or ``processes`` worker processes deep."""

    def __init__(
        self, work: Callable[[str], bytes], processes: int = 0, *, warm: Callable[[], Any] | None = None
    ) -> None:
        if processes < 0:
            raise ValueError("processes must be >= 0")
        self.work = work
        self.processes = processes
        self._warm = warm
        self._thread: ThreadPoolExecutor | None = None  # made on first use (again after a shutdown)
        self._procs: list[_Proc] = []
        self._waiting: deque[tuple[str, asyncio.Future[bytes]]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inflight: dict[str, asyncio.Future[bytes]] = {}
        self._start_lock: asyncio.Lock | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the worker processes (each warmed) now rather than on the first request."""
        if not self.processes or self._procs:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._procs:
                return
            self._loop = asyncio.get_running_loop()
            procs = await asyncio.to_thread(lambda: [self._spawn() for _ in range(self.processes)])
            for p in procs:  # wait for each to report ready, then watch its pipe
                await asyncio.to_thread(p.conn.recv_bytes)
                self._watch(p)
            self._procs = procs

    def _spawn(self) -> _Proc:
        ctx = multiprocessing.get_context("forkserver")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child, self.work, self._warm), daemon=True)
        proc.start()
        child.close()
        return _Proc(proc, parent)

    def _watch(self, p: _Proc) -> None:
        assert self._loop is not None
        self._loop.add_reader(p.conn.fileno(), self._on_answer, p)

    def shutdown(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False, cancel_futures=True)
            self._thread = None
        for p in self._procs:
            if self._loop is not None:
                self._loop.remove_reader(p.conn.fileno())
            p.conn.close()
            p.proc.terminate()
        for p in self._procs:
            p.proc.join(timeout=5)
            if p.proc.is_alive():
                p.proc.kill()
                p.proc.join()
        pending = [p.current for p in self._procs if p.current is not None] + list(self._waiting)
        for _, f in pending:
            if not f.done():
                f.cancel()
        self._procs = []
        self._waiting.clear()
        self._start_lock = None

    # -- work ---------------------------------------------------------------------------------------

    async def compute(self, key: str) -> bytes:
        """``work(key)``; a caller asking for a ``key`` already being computed waits for that
        computation."""
        running = self._inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)
        if self.processes:
            await self.start()
            future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            self._waiting.append((key, future))
            self._dispatch()
        else:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="servecap-plan")
            future = asyncio.get_running_loop().run_in_executor(self._thread, self.work, key)
        self._inflight[key] = future
        try:
            return await asyncio.shield(future)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]

    def _dispatch(self) -> None:
        for p in self._procs:
            if not self._waiting:
                return
            if p.current is None:
                key, future = self._waiting.popleft()
                p.current = (key, future)
                p.conn.send_bytes(key.encode())

    def _on_answer(self, p: _Proc) -> None:
        current, p.current = p.current, None
        try:
            msg = p.conn.recv_bytes()
        except (EOFError, OSError):  # the worker died: fail its request, start another
            self._replace(p)
            if current is not None and not current[1].done():
                current[1].set_exception(
                    ServecapError("plan", current[0][:80], "the plan worker process exited while planning it")
                )
            self._dispatch()
            return
        if current is not None and not current[1].done():
            kind, body = msg[:1], msg[1:]
            if kind == _OK:
                current[1].set_result(body)
            elif kind == _ERROR:
                current[1].set_exception(pickle.loads(body))
            else:
                current[1].set_exception(RuntimeError(body.decode(errors="replace")))
        self._dispatch()

    def _replace(self, p: _Proc) -> None:
        assert self._loop is not None
        self._loop.remove_reader(p.conn.fileno())
        p.conn.close()
        p.proc.join(timeout=1)
        fresh = self._spawn()
        fresh.conn.recv_bytes()  # ready (it warms first: a few hundred ms, once per crash)
        self._procs[self._procs.index(p)] = fresh
        self._watch(fresh)
