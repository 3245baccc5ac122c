"""The wall-clock driver: the simulator's engine, stepped in real time.

Loop (one asyncio task)::

    start = end of the previous step (or the arrival, after idling; engine time = perf_counter - t0)
    outcome = engine.step(start)                     # servecap.sim.Engine: same code as simulate
    sleep until start + outcome.duration_s           # a timerfd (PreciseTimer), armed early by
                                                     # the process's measured wake-up latency
    write every token of the step to its stream      # first tokens first (they set TTFT)
    then the final (usage) chunks of finished requests, a batch per turn of the loop

Steps are laid back to back on the engine's own schedule, never on the wake-up time, so
wake-up jitter does not accumulate; how late each token reached its socket is recorded
(``servecap:emulator_token_lag_seconds`` and :attr:`Driver.lags_s`).

The driver writes the tokens itself: each stream carries a :class:`Writer` (the HTTP layer's,
see :mod:`servecap.emulator.app`) whose ``token`` call puts the pre-encoded chunk on the
connection right away, so a step costs one write per token and no task switch per token
(no per-request coroutine is woken per token; the request's coroutine waits for the end).

The engine is an :class:`~servecap.emulator.engine_port.EmulatedEngine`. One whose
``next_event_s()`` gives a time (the fixed-latency reference) is event-driven instead of
stepped: the driver sleeps until the engine's next token time, and a new request wakes it
(its first token may come before the one the driver was waiting for).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from servecap.emulator.engine_port import EmulatedEngine, EmulatedStep, EngineGauges, PrefixKey
from servecap.emulator.metrics import EngineMetrics

# Without a timerfd: the event loop waits in whole milliseconds (epoll's timeout, libuv's
# timers), so a sleep ends up to 1 ms late; waking half a millisecond early centres the
# hand-off on the schedule. (Yielding to the loop until the exact time instead was measured:
# no better, more CPU.)
EARLY_S = 0.0005
# Event-driven engines: events already due are handled in one turn of the loop, for at most
# this long before the loop gets a turn (many streams each with their own token times).
BATCH_S = 0.002
# With the collector managed (a server process, :meth:`Driver.manage_gc`): a full collection
# when the engine goes idle, at most this often ...
GC_IDLE_EVERY_S = 10.0
# ... and at least this often under constant load (it pauses the loop: tens of ms).
GC_BUSY_EVERY_S = 60.0


class Writer(Protocol):
    """The HTTP side of one stream (set on :attr:`Stream.writer` by the app)."""

    def token(self, stream: Stream, index: int) -> None:
        """Token ``index`` of ``stream`` is due now (its time is ``stream.token_times_s[index]``)."""

    def finish(self, stream: Stream) -> None:
        """The request finished (called after its last token): the response ends."""


@dataclass(slots=True)
class Stream:
    """One request as the driver and the HTTP layer share it."""

    request_id: int
    prompt_tokens: int
    output_tokens: int
    received_s: float  # engine time the request arrived
    token_times_s: list[float] = field(default_factory=list)  # engine-scheduled times
    finished: bool = False
    preemptions: int = 0
    cached_prompt_tokens: int = 0
    abandoned: bool = False
    max_tokens_param: int | None = None  # the request's max_tokens, when it gave one
    writer: Writer | None = None


OWN_HTTP_PATH_S = 0.001
"""What the emulator's own HTTP path costs a request before the engine sees it and after its
first token (uvicorn, JSON, the SSE write), about 1 ms measured on 127.0.0.1 (issue 20: ``bench``
against ``emulate`` measured TTFT p50 6 ms below ``simulate`` of the same stream, which charges
the fitted 7.4 ms ``Efficiency.request_overhead_s``)."""


def request_overhead_remainder_s(request_overhead_s: float) -> float:
    """The per-request server cost the emulator charges on top of its own HTTP path, so that a
    client sees vLLM's TTFT: ``request_overhead_s - OWN_HTTP_PATH_S`` (>= 0)."""
    return max(0.0, request_overhead_s - OWN_HTTP_PATH_S)


class Driver:
    """Steps the engine in real time. ``request_overhead_s``: each request reaches the engine this
    long after the server received it (the HTTP handler waits the part its parsing did not take,
    :meth:`admission_wait_s`), as the simulator lets the engine see a request
    ``Efficiency.request_overhead_s`` after the client sent it."""

    def __init__(
        self,
        engine: EmulatedEngine,
        metrics: EngineMetrics,
        clock: Callable[[], float] = time.perf_counter,
        request_overhead_s: float = 0.0,
    ) -> None:
        if not 0.0 <= request_overhead_s <= 10.0:
            raise ValueError(f"request_overhead_s={request_overhead_s}: must be between 0 and 10 s")
        self.request_overhead_s = request_overhead_s
        self.engine = engine
        self.metrics = metrics
        self.clock = clock
        self.t0 = clock()
        self.streams: dict[int, Stream] = {}
        self.lags_s: deque[float] = deque(maxlen=2_000_000)  # per token written: written - scheduled
        self.step_lags_s: deque[float] = deque(maxlen=200_000)  # per step: its first write - scheduled
        self.write_s = 0.0  # time spent writing steps' tokens (first write to last) ...
        self.writes = 0  # ... and the tokens written in it
        self.steps = 0
        self._next_start = 0.0
        self._wake: asyncio.Future[bool] | None = None
        self._task: asyncio.Task[None] | None = None
        self.num_running = 0
        self.num_waiting = 0
        self._ids = 0
        self._gc_managed = False
        self._last_gc = 0.0
        self._event_driven = engine.next_event_s() is not None
        # speculative decoding (a simulated engine running it): each request's token bursts
        bursts = getattr(engine, "spec_bursts", None)
        self._spec_k: int = getattr(engine, "spec_k", 0)
        self._spec_bursts: dict[int, list[int]] | None = bursts if self._spec_k and isinstance(bursts, dict) else None
        if self._spec_bursts is not None:
            metrics.spec_accepted_per_pos = [0] * self._spec_k

    def manage_gc(self) -> None:
        """Take the process's garbage collector in hand (call once, in a server process): what
        is alive now (imports, the app) is frozen, automatic full collections are turned off
        (young ones go on), and the driver runs a full collection when the engine goes idle
        (at most every :data:`GC_IDLE_EVERY_S`) or, under constant load, every
        :data:`GC_BUSY_EVERY_S`. An automatic full collection scans every tracked object (with
        2,000 connections open: 100-200 ms measured) and can fall in the middle of a step's
        writes."""
        gc.collect()
        gc.freeze()
        g0, g1, _ = gc.get_threshold()
        gc.set_threshold(g0, g1, 1_000_000_000)
        self._gc_managed = True
        self._last_gc = self.clock()

    def _maybe_collect(self, idle: bool) -> None:
        now = self.clock()
        if now - self._last_gc >= (GC_IDLE_EVERY_S if idle else GC_BUSY_EVERY_S):
            gc.collect()
            self._last_gc = self.clock()

    def admission_wait_s(self, received_s: float) -> float:
        """How much longer a request received at ``received_s`` (engine time) waits before the
        engine sees it: the overhead less the time the server already spent on it."""
        return max(0.0, self.request_overhead_s - (self.now() - received_s))

    def next_request_id(self) -> int:
        self._ids += 1
        return self._ids

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

    def submit(
        self,
        request_id: int,
        prompt_tokens: int,
        output_tokens: int,
        prefix_key: PrefixKey,
        received_s: float | None = None,
        max_tokens_param: int | None = None,
        *,
        transferred: bool = False,
    ) -> Stream | None:
        """Add a request that reached the server at ``received_s`` (engine time; default now);
        None when the engine rejects it (waiting queue full)."""
        self.ensure_started()
        now = self.now() if received_s is None else received_s
        if not self._event_driven:
            if self.engine.has_work():
                now = min(now, self._next_start)  # arrivals during a step join the next one
            else:  # idle: the next step starts on arrival (not before the last one ended)
                self._next_start = max(now, self._next_start)
        if transferred:  # its prompt's KV came from a prefill server (servecap.emulator.pd)
            if not self.engine.add_transferred(request_id, prompt_tokens, output_tokens, now):
                return None
        elif not self.engine.add(request_id, prompt_tokens, output_tokens, prefix_key, now):
            return None
        stream = Stream(request_id, prompt_tokens, output_tokens, received_s=now, max_tokens_param=max_tokens_param)
        self.streams[request_id] = stream
        w = self._wake
        if w is not None and not w.done():
            w.set_result(False)  # idle, or asleep until a later event: re-plan
        return stream

    def abandon(self, stream: Stream) -> None:
        """The client went away: the engine drops the request and frees its KV blocks (as
        vLLM aborts a request whose connection closed), counted as finished with reason
        ``abort``."""
        if stream.abandoned or stream.finished:
            return
        stream.abandoned = True
        stream.writer = None
        self.streams.pop(stream.request_id, None)
        if self.engine.abort(stream.request_id):
            self.metrics.success["abort"] += 1
            self._refresh_state()

    def _refresh_state(self, st: EngineGauges | None = None) -> None:
        """The state gauges from the engine's counters."""
        if st is None:
            st = self.engine.stats
        self.num_running, self.num_waiting = st.num_running, st.num_waiting
        self.metrics.state = (st.num_running, st.num_waiting, st.kv_blocks_used, st.kv_blocks_total)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        clock, t0 = self.clock, self.t0
        event_driven = self._event_driven
        timer = PreciseTimer.create(loop) if clock is time.perf_counter else None
        try:
            while True:
                if not self.engine.has_work():
                    if self._gc_managed:
                        self._maybe_collect(idle=True)
                    self._wake = loop.create_future()
                    await self._wake
                    self._wake = None
                    continue
                if self._gc_managed:
                    self._maybe_collect(idle=False)
                if event_driven:
                    # event-driven: sleep until the next token time; an arrival wakes us early
                    end = self._next_event_s()
                    if not await self._sleep_until(loop, timer, end, wakeable=True):
                        continue  # a request arrived: its first token may come first
                    if not self.engine.has_work():
                        continue  # its clients left while it slept
                    # every event due by now goes out in this turn (up to BATCH_S of work)
                    stop = clock() + BATCH_S
                    while True:
                        out = self.engine.step(end)
                        self._deliver(out, end + float(out.duration_s))
                        self.steps += 1
                        if not self.engine.has_work():
                            break
                        end = self._next_event_s()
                        now = clock()
                        if t0 + end > now + (timer.early_s if timer is not None else EARLY_S) or now > stop:
                            break
                    continue
                else:
                    # busy: steps run back to back on the engine's schedule (the GPU does not
                    # wait for the CPU to stream the previous step's tokens)
                    start = self._next_start
                    out = self.engine.step(start)
                    end = start + float(out.duration_s)
                    self._next_start = end
                    await self._sleep_until(loop, timer, end, wakeable=False)
                self._deliver(out, end)
                self.steps += 1
        finally:
            if timer is not None:
                timer.close()

    def _next_event_s(self) -> float:
        """The event-driven engine's next token time (it has work)."""
        t = self.engine.next_event_s()
        assert t is not None
        return t

    async def _sleep_until(
        self, loop: asyncio.AbstractEventLoop, timer: PreciseTimer | None, end: float, *, wakeable: bool
    ) -> bool:
        """Until engine time ``end`` (True), or until :meth:`submit` wakes us (False, only when
        ``wakeable``). When already late, the loop still gets one turn (the server's other
        work must not starve behind a backlog of steps)."""
        early = timer.early_s if timer is not None else EARLY_S
        delay = end - (self.clock() - self.t0) - early
        if delay <= 0:
            await asyncio.sleep(0)
            return True
        self._wake = fut = loop.create_future() if wakeable else None
        if fut is None:
            fut = loop.create_future()
        if timer is not None:
            timer.arm(self.t0 + end - early, fut)
            try:
                on_time = await fut
            finally:
                timer.disarm()
        else:
            handle = loop.call_later(delay, _resolve, fut)
            try:
                on_time = await fut
            finally:
                handle.cancel()
        self._wake = None
        return bool(on_time)

    def _finish_streams(self, ends: list[Stream], start: int) -> None:
        """The final chunks of the streams that finished in a step: :data:`FINISH_BATCH` per
        turn of the loop, so a step where many requests end (each final chunk carries usage,
        maybe hundreds of token times) does not hold up the next step's tokens."""
        stop = start + FINISH_BATCH
        for s in ends[start:stop]:
            w = s.writer
            if w is not None:
                w.finish(s)
        if stop < len(ends):
            asyncio.get_running_loop().call_soon(self._finish_streams, ends, stop)

    def _deliver(self, out: EmulatedStep, end: float) -> None:
        m, streams, clock = self.metrics, self.streams, self.clock
        due = self.t0 + end
        lags: list[float] = []
        for rid, n in self.engine.cached_tokens().items():
            s = streams.get(rid)
            if s is not None:
                s.cached_prompt_tokens = n
        firsts = out.first_tokens
        ttft = m.ttft
        prompt_tokens = n_firsts = 0
        for rid in firsts:  # first: they set TTFT
            s = streams.get(rid)
            if s is None:
                continue
            s.token_times_s.append(end)
            ttft.observe(end - s.received_s)
            prompt_tokens += s.prompt_tokens
            n_firsts += 1
            w = s.writer
            if w is not None:
                w.token(s, 0)
                lags.append(clock() - due)
        n_tokens = n_firsts
        itls: list[float] = []
        bursts = self._spec_bursts
        for rid in out.decoded:
            s = streams.get(rid)
            if s is None:
                continue
            times = s.token_times_s
            if times:
                last = times[-1]
                if last == end:  # its first token, above (servecap.sim.Engine lists it here too)
                    continue
                itls.append(end - last)
            burst = 1
            if bursts is not None:  # speculative decoding: the step's accepted burst
                queue = bursts.get(rid)
                burst = queue.pop(0) if queue else 1
                self._count_drafts(burst)
            w = s.writer
            for _ in range(burst):
                times.append(end)
                if w is not None:
                    w.token(s, len(times) - 1)
            n_tokens += burst
            if w is not None:
                lags.append(clock() - due)
        if itls:
            m.itl.observe_many(itls)
        m.prompt_tokens += prompt_tokens
        m.generation_tokens += n_tokens
        m.iteration_tokens.observe(prompt_tokens + n_tokens)
        if out.preempted:
            for rid in out.preempted:
                s = streams.get(rid)
                if s is not None:
                    s.preemptions += 1
            m.preemptions += len(out.preempted)
        finished = out.finished
        if finished:
            ends: list[Stream] = []
            sched = self.engine.scheduled_times()
            done = 0
            for rid in finished:
                s = streams.pop(rid, None)
                if s is None:
                    continue
                s.finished = True
                done += 1
                self._observe_finished(s, end, sched.get(rid))
                if s.writer is not None:
                    ends.append(s)
            m.success["length"] += done
            if ends:  # usage chunks after this step's tokens, a batch per loop turn
                asyncio.get_running_loop().call_soon(self._finish_streams, ends, 0)
        # the engine's state now (a client may have left since the step began)
        st = self.engine.stats
        m.prefix_queries, m.prefix_hits = st.prefix_cache_query_tokens, st.prefix_cache_hit_tokens
        self._refresh_state(st)
        if lags:
            self.lags_s.extend(lags)
            self.step_lags_s.append(lags[0])
            self.write_s += lags[-1] - lags[0]
            self.writes += len(lags) - 1
            m.token_lag.observe_many(lags)

    def _count_drafts(self, burst: int) -> None:
        """vLLM's spec-decode counters for one sequence's step: one draft of k tokens, ``burst -
        1`` of them accepted, the first ``burst - 1`` positions each once."""
        m = self.metrics
        m.spec_drafts += 1
        m.spec_draft_tokens += self._spec_k
        m.spec_accepted_tokens += burst - 1
        per_pos = m.spec_accepted_per_pos
        for j in range(min(burst - 1, len(per_pos))):
            per_pos[j] += 1

    def _observe_finished(self, s: Stream, end: float, scheduled_s: float | None) -> None:
        """vLLM's per-request histograms (``FinishedRequestStats``): queue = arrival to first
        scheduled, prefill = scheduled to first token, decode = first to last token,
        inference = scheduled to last token, mean time per output token = decode / (n - 1)."""
        m, times = self.metrics, s.token_times_s
        first = times[0] if times else end
        sched = s.received_s if scheduled_s is None else min(max(scheduled_s, s.received_s), first)
        m.e2e.observe(end - s.received_s)
        m.queue.observe(sched - s.received_s)
        m.prefill.observe(first - sched)
        m.decode.observe(end - first)
        m.inference.observe(end - sched)
        if len(times) > 1:
            m.request_tpot.observe((end - first) / (len(times) - 1))
        m.request_prompt_tokens.observe(s.prompt_tokens)
        m.request_generation_tokens.observe(len(times))
        m.request_n.observe(1)
        if s.max_tokens_param is not None:
            m.request_max_tokens.observe(s.max_tokens_param)


FINISH_BATCH = 32  # final (usage) chunks written per turn of the loop


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(True)


class PreciseTimer:
    """A Linux ``timerfd`` on CLOCK_MONOTONIC (``time.perf_counter``'s clock) watched by the
    event loop: wakes the driver within tens of microseconds of an absolute time, where the
    loop's own timers wake up to 1 ms late (epoll and libuv wait in whole milliseconds).
    :meth:`create` returns None where it is not available (the driver then uses the loop's
    timers, :data:`EARLY_S` early)."""

    EARLY_S = 0.00005  # the kernel's default timer slack: the least it is armed early by
    MAX_EARLY_S = 0.001

    def __init__(self, loop: asyncio.AbstractEventLoop, libc: Any, fd: int) -> None:
        import ctypes

        class _Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

        class _Itimerspec(ctypes.Structure):
            _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]

        self._loop, self._libc, self._fd = loop, libc, fd
        self._spec = _Itimerspec()
        self._ref = ctypes.byref(self._spec)
        self._fut: asyncio.Future[bool] | None = None
        self._armed_at = 0.0
        # how late the callback runs after the armed time (moving average): the process's
        # wake-up latency, which the timer is armed early by
        self.latency_s = self.EARLY_S
        loop.add_reader(fd, self._fire)

    @property
    def early_s(self) -> float:
        return min(self.MAX_EARLY_S, max(self.EARLY_S, self.latency_s))

    @classmethod
    def create(cls, loop: asyncio.AbstractEventLoop) -> PreciseTimer | None:
        import sys

        if not sys.platform.startswith("linux"):
            return None
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = int(libc.timerfd_create(1, 0o4000 | 0o2000000))  # CLOCK_MONOTONIC, NONBLOCK|CLOEXEC
            if fd < 0:
                return None
            try:
                return cls(loop, libc, fd)
            except Exception:
                import os

                os.close(fd)
                return None
        except (OSError, AttributeError, NotImplementedError):
            return None

    def arm(self, at_s: float, fut: asyncio.Future[bool]) -> None:
        self._fut, self._armed_at = fut, at_s
        sec = int(at_s)
        v = self._spec.it_value
        v.tv_sec, v.tv_nsec = sec, max(1, int((at_s - sec) * 1e9))
        if self._libc.timerfd_settime(self._fd, 1, self._ref, None) != 0:  # TFD_TIMER_ABSTIME
            self._loop.call_at(self._loop.time() + max(0.0, at_s - time.perf_counter()), _resolve, fut)

    def disarm(self) -> None:
        self._fut = None

    def _fire(self) -> None:
        import os

        try:
            os.read(self._fd, 8)
        except (BlockingIOError, InterruptedError):
            return
        fut = self._fut
        if fut is not None and not fut.done():
            late = time.perf_counter() - self._armed_at
            self.latency_s += 0.1 * (min(late, self.MAX_EARLY_S) - self.latency_s)
            fut.set_result(True)

    def close(self) -> None:
        import os

        try:
            self._loop.remove_reader(self._fd)
        finally:
            os.close(self._fd)
