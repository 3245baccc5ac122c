"""The wall-clock driver: the simulator's engine, stepped in real time.

Loop (one asyncio task)::

    start = end of the previous step (or the arrival, after idling; engine time = perf_counter - t0)
    outcome = engine.step(start)                     # servecap.sim.Engine: same code as simulate
    sleep until start + outcome.duration_s           # (the selector's ms rounding: wake 0.5 ms early)
    hand every token of the step to its stream       # first tokens first (they set TTFT)

Steps are laid back to back on the engine's own schedule, never on the wake-up time, so
wake-up jitter does not accumulate; how late each token reaches its stream is recorded
(``servecap:emulator_token_lag_seconds`` and :attr:`Driver.lags_s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from servecap.emulator.metrics import EngineMetrics

# The event loop's selector waits in whole milliseconds, rounded up (epoll), so a sleep ends
# 0-1 ms late; waking half a millisecond early centres the hand-off on the schedule. (Yielding
# to the loop until the exact time instead was measured: no better, more CPU.)
EARLY_S = 0.0005


class StepLike(Protocol):
    duration_s: float
    first_tokens: Any
    decoded: Any
    finished: Any
    preempted: Any
    num_running: int
    num_waiting: int
    kv_blocks_used: int
    kv_blocks_total: int
    prefix_cache_hit_tokens: int


class EngineLike(Protocol):
    """What the driver calls. An engine may also offer ``cached_tokens() -> {request id:
    prompt tokens served from the prefix cache}`` for the requests whose first token came out
    of the last step (reported as ``usage.prompt_tokens_details.cached_tokens``)."""

    def add_request(self, req: Any, now_s: float) -> bool: ...
    def has_work(self) -> bool: ...
    def step(self, now_s: float) -> Any: ...


@dataclass(slots=True)
class Stream:
    """One request's channel from the driver to its HTTP writer."""

    request_id: str
    prompt_tokens: int
    output_tokens: int
    received_s: float  # engine time the request arrived
    token_times_s: list[float] = field(default_factory=list)  # engine-scheduled times
    delivered: int = 0  # tokens the writer has taken
    finished: bool = False
    preemptions: int = 0
    cached_prompt_tokens: int = 0
    waiter: asyncio.Future[None] | None = None
    abandoned: bool = False

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        """Until a token not yet taken, or the end, is available."""
        if self.delivered < len(self.token_times_s) or self.finished:
            return
        self.waiter = asyncio.get_running_loop().create_future()
        await self.waiter
        self.waiter = None


class Driver:
    def __init__(self, engine: EngineLike, metrics: EngineMetrics,
                 make_request: Callable[[str, int, int, Any], Any],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.metrics = metrics
        self._make_request = make_request
        self.clock = clock
        self.t0 = clock()
        self.streams: dict[str, Stream] = {}
        self.lags_s: deque[float] = deque(maxlen=200_000)
        self.steps = 0
        self._next_start = 0.0
        self._wake: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.num_running = 0
        self.num_waiting = 0
        self._ids = 0
        self._has_hits = callable(getattr(engine, "cached_tokens", None))

    def next_request_id(self) -> str:
        """Integer ids (the engine's), as strings for the HTTP layer."""
        self._ids += 1
        return str(self._ids)

    def now(self) -> float:
        return self.clock() - self.t0

    def ensure_started(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def submit(self, request_id: str, prompt_tokens: int, output_tokens: int, prefix_key: Any,
               received_s: float | None = None) -> Stream | None:
        """Add a request that reached the server at ``received_s`` (engine time; default now);
        None when the engine rejects it (waiting queue full)."""
        self.ensure_started()
        now = self.now() if received_s is None else received_s
        if self.engine.has_work():  # arrivals during a step join the next one (at _next_start)
            now = min(now, self._next_start)
        req = self._make_request(request_id, prompt_tokens, output_tokens, prefix_key)
        if not self.engine.add_request(req, now):
            return None
        stream = Stream(request_id, prompt_tokens, output_tokens, received_s=now)
        self.streams[request_id] = stream
        self.metrics.prompt_tokens.inc(prompt_tokens)
        w = self._wake
        if w is not None and not w.done():
            w.set_result(None)
        return stream

    def abandon(self, stream: Stream) -> None:
        """The client went away: its tokens are dropped (the engine still computes them)."""
        stream.abandoned = True

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        clock, t0 = self.clock, self.t0
        while True:
            if not self.engine.has_work():
                self._wake = loop.create_future()
                await self._wake
                self._wake = None
                self._next_start = clock() - t0  # idle: the next step starts on arrival
                continue
            # busy: steps run back to back on the engine's schedule (the GPU does not wait
            # for the CPU to stream the previous step's tokens)
            start = self._next_start
            out = self.engine.step(start)
            hits = self.engine.cached_tokens() if self._has_hits else None  # type: ignore[attr-defined]
            end = start + float(out.duration_s)
            self._next_start = end
            delay = end - (clock() - t0) - EARLY_S
            if delay > 0:
                await asyncio.sleep(delay)
            self._deliver(out, end, hits)
            self.steps += 1

    def _deliver(self, out: Any, end: float, hits: dict[Any, int] | None = None) -> None:
        m, streams = self.metrics, self.streams
        for rid in out.first_tokens:
            s = streams.get(str(rid))
            if s is not None:
                s.token_times_s.append(end)
                if hits:
                    s.cached_prompt_tokens = hits.get(rid, 0)
                m.ttft.observe(end - s.received_s)
                s._wake()
        firsts = set(out.first_tokens)
        for rid in out.decoded:
            if rid in firsts:  # servecap.sim.Engine lists first tokens in `decoded` too
                continue
            s = streams.get(str(rid))
            if s is not None:
                m.itl.observe(end - s.token_times_s[-1] if s.token_times_s else 0.0)
                s.token_times_s.append(end)
                s._wake()
        n_tokens = len(firsts) + sum(1 for r in out.decoded if r not in firsts)
        if n_tokens:
            m.generation_tokens.inc(n_tokens)
        for rid in out.preempted:
            s = streams.get(str(rid))
            if s is not None:
                s.preemptions += 1
            m.preemptions.inc()
        for rid in out.finished:
            s = streams.pop(str(rid), None)
            if s is None:
                continue
            s.finished = True
            first = s.token_times_s[0] if s.token_times_s else end
            m.e2e.observe(end - s.received_s)
            if len(s.token_times_s) > 1:
                m.tpot.observe((end - first) / (len(s.token_times_s) - 1))
            m.success_length.inc()
            s._wake()
        self.num_running, self.num_waiting = int(out.num_running), int(out.num_waiting)
        m.running.set(self.num_running)
        m.waiting.set(self.num_waiting)
        total = int(out.kv_blocks_total) or 1
        usage = int(out.kv_blocks_used) / total
        m.kv_usage.set(usage)
        m.gpu_cache_usage.set(usage)

    def record_lag(self, lag_s: float) -> None:
        self.lags_s.append(lag_s)
        self.metrics.token_lag.observe(max(0.0, lag_s))
