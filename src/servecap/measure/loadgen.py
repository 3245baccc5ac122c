"""The load generator: open loop (arrival schedule built up front) and closed loop.

Open loop (constant, Poisson, bursty, trace replay): the whole schedule comes from
:func:`servecap.workload.generate_requests` before the first request is sent; a dispatcher
sleeps until each absolute scheduled time (no drift accumulates) and launches the request,
recording when it was scheduled, dispatched and sent. Latency is never allowed to slow the
arrival process (no coordinated omission).

Closed loop: ``concurrency`` workers each send the next request as soon as their previous one
ends; chat users send the turns of one conversation in order, pausing ``think_time_s`` between
a reply and their next message.

A monitor task samples the event loop's lateness (how long a 5 ms sleep overshoots) and the
process's CPU share: when the client is saturated, its timings are the client's, not the
server's, and the self-checks say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from servecap.measure.client import stream_request
from servecap.measure.http1 import RawClient
from servecap.measure.payload import Endpoint, build_body, endpoint_path, prompt_text, prompt_text_from_hashes
from servecap.measure.trace import ClientTrace
from servecap.measure.transport import Transport
from servecap.results.stats import percentile


class RequestLike(Protocol):
    """The fields of :class:`servecap.workload.RequestSpec` the load generator reads."""

    @property
    def request_id(self) -> int | str: ...
    @property
    def arrival_s(self) -> float: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def prefix_group(self) -> int | None: ...
    @property
    def prefix_tokens(self) -> int: ...


def new_nonce() -> str:
    """A short random tag, unique per run (8 hex digits: two tokens of prompt)."""
    return secrets.token_hex(4)


@dataclass(frozen=True, slots=True)
class LoadConfig:
    base_url: str  # e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted)
    model: str
    endpoint: Endpoint = "completions"
    stream: bool = True
    request_timeout_s: float = 600.0  # total deadline of one request (slow-loris guard)
    connect_timeout_s: float = 10.0
    stall_timeout_s: float = 60.0  # no bytes for this long: timeout
    warmup_s: float = 0.0  # requests scheduled before this are stored, not summarized
    cooldown_s: float = 0.0  # requests scheduled in the last cooldown_s likewise
    extra_body: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = None
    # Prompts carry this run's nonce, so no two runs (nor two steps of a sweep) send the same
    # prompt and a server's prefix cache cannot answer one run from another's requests.
    run_nonce: str = field(default_factory=new_nonce)
    # Shared-prefix groups share within the run; across runs only when this is True.
    share_prefixes_across_runs: bool = False

    @property
    def prefix_nonce(self) -> str:
        return "" if self.share_prefixes_across_runs else self.run_nonce

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[:-3]
        return base + endpoint_path(self.endpoint)


@dataclass(slots=True)
class ClientStats:
    loop_lag_p50_s: float = 0.0
    loop_lag_p99_s: float = 0.0
    loop_lag_max_s: float = 0.0
    cpu_fraction: float = 0.0  # process CPU time / wall time over the run
    in_flight_area: float = 0.0  # ∫ in-flight requests dt (for Little's law)
    max_in_flight: int = 0


@dataclass(slots=True)
class RunResult:
    traces: list[ClientTrace]
    mode: str  # "open" | "closed" | "users"
    started_at: str
    wall_duration_s: float
    client: ClientStats
    interrupted: bool = False
    t0_perf_s: float = 0.0  # time.perf_counter() at the run's zero (to align server timestamps)


OnDone = Callable[[ClientTrace], None]


@contextlib.asynccontextmanager
async def _quiet() -> Any:
    with quiet_gc():
        yield


class _Monitor:
    """Event-loop lateness, CPU share and the in-flight integral."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.lags: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.area = 0.0
        self._last = t0
        self._cpu0 = time.process_time()
        self._stop = False

    def change(self, delta: int) -> None:
        now = time.perf_counter()
        self.area += self.in_flight * (now - self._last)
        self._last = now
        self.in_flight += delta
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    async def run(self) -> None:
        period = 0.005
        while not self._stop:
            t = time.perf_counter()
            await asyncio.sleep(period)
            self.lags.append(max(0.0, time.perf_counter() - t - period))

    def stats(self, wall_s: float) -> ClientStats:
        self.change(0)
        self._stop = True
        cpu = time.process_time() - self._cpu0
        return ClientStats(
            loop_lag_p50_s=percentile(self.lags, 50, empty=0.0),
            loop_lag_p99_s=percentile(self.lags, 99, empty=0.0),
            loop_lag_max_s=max(self.lags, default=0.0),
            cpu_fraction=cpu / wall_s if wall_s > 0 else 0.0,
            in_flight_area=self.area,
            max_in_flight=self.max_in_flight,
        )


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """For the length of a run: what is alive at the start is frozen (never scanned again) and
    full collections are held off, young ones go on. A full collection stops the event loop
    for as long as it scans every tracked object (measured: 25-190 ms mid-run with 1,000-2,000
    streams open), and every token read during it gets a late timestamp."""
    gc.collect()
    gc.freeze()
    old = gc.get_threshold()
    gc.set_threshold(old[0], old[1], 1_000_000_000)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def make_trace(spec: RequestLike) -> ClientTrace:
    hashes = getattr(spec, "hash_blocks", None)
    return ClientTrace(
        request_id=str(spec.request_id),
        scheduled_s=float(spec.arrival_s),
        prompt_tokens=int(spec.prompt_tokens),
        output_tokens=int(spec.output_tokens),
        prefix_group=spec.prefix_group,
        prefix_tokens=int(spec.prefix_tokens or 0),
        user_id=getattr(spec, "user_id", None),
        turn=int(getattr(spec, "turn", 0) or 0),
        hash_ids=None if hashes is None else hashes.ids,
        hash_block_tokens=512 if hashes is None else hashes.trace_block_tokens,
    )


def body_for(cfg: LoadConfig, trace: ClientTrace) -> dict[str, Any]:
    if trace.hash_ids is not None:
        text = prompt_text_from_hashes(
            trace.prompt_tokens,
            trace.hash_ids,
            trace.hash_block_tokens,
            unique=f"{cfg.run_nonce}-{trace.request_id}",
            tag=cfg.prefix_nonce,
        )
    else:
        text = prompt_text(
            trace.prompt_tokens,
            unique=f"{cfg.run_nonce}-{trace.request_id}",
            prefix_group=trace.prefix_group,
            prefix_tokens=trace.prefix_tokens,
            group_tag=cfg.prefix_nonce,
        )
    return build_body(
        cfg.endpoint,
        model=cfg.model,
        prompt=text,
        max_tokens=max(1, trace.output_tokens),
        stream=cfg.stream,
        extra=cfg.extra_body,
    )


def open_transport(cfg: LoadConfig, transport: Transport | None) -> Transport:
    """The run's one transport, chosen here: the one given (in-process tests pass an
    :class:`~servecap.measure.asgi_stream.AsgiClient`), else a
    :class:`~servecap.measure.http1.RawClient` (keep-alive HTTP/1.1, low overhead) for the
    URL. Either way one client holds every concurrent stream (no pool waits)."""
    if transport is not None:
        return transport
    return RawClient(connect_timeout_s=cfg.connect_timeout_s)


def auth_headers(cfg: LoadConfig) -> dict[str, str] | None:
    return {"authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else None


def mark_trimmed(traces: list[ClientTrace], cfg: LoadConfig) -> None:
    """Flag requests scheduled in the warm-up or cool-down windows (kept, not summarized)."""
    if not traces or (cfg.warmup_s <= 0 and cfg.cooldown_s <= 0):
        return
    last = max(t.scheduled_s for t in traces)
    for t in traces:
        t.trimmed = t.trimmed or t.scheduled_s < cfg.warmup_s or t.scheduled_s > last - cfg.cooldown_s


async def _one(
    client: Transport, cfg: LoadConfig, trace: ClientTrace, t0: float, mon: _Monitor, on_done: OnDone | None
) -> None:
    mon.change(+1)
    try:
        await stream_request(
            client,
            cfg.url,
            body_for(cfg, trace),
            trace,
            t0=t0,
            headers=auth_headers(cfg),
            total_timeout_s=cfg.request_timeout_s,
            stall_timeout_s=cfg.stall_timeout_s,
        )
    finally:
        mon.change(-1)
        if on_done is not None:
            on_done(trace)


async def run_open_loop(
    cfg: LoadConfig, specs: Sequence[RequestLike], *, transport: Transport | None = None, on_done: OnDone | None = None
) -> RunResult:
    """Send each request at its scheduled time (absolute, from the run's start)."""
    traces = sorted((make_trace(s) for s in specs), key=lambda t: t.scheduled_s)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    async with open_transport(cfg, transport) as client, _quiet():
        t0 = time.perf_counter()
        mon = _Monitor(t0)
        mon_task = asyncio.create_task(mon.run())
        tasks: list[asyncio.Task[None]] = []
        interrupted = False
        try:
            for trace in traces:
                delay = t0 + trace.scheduled_s - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                trace.dispatched_s = time.perf_counter() - t0
                tasks.append(asyncio.create_task(_one(client, cfg, trace, t0, mon, on_done)))
            await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:
            interrupted = True
            await _cancel_all(tasks)
        finally:
            wall = time.perf_counter() - t0
            stats = mon.stats(wall)
            mon_task.cancel()
    if interrupted:
        traces = settle_interrupted(traces, wall)
    mark_trimmed(traces, cfg)
    return RunResult(traces, "open", started, wall, stats, interrupted, t0)


async def run_closed_loop(
    cfg: LoadConfig,
    specs: Sequence[RequestLike],
    concurrency: int,
    *,
    duration_s: float | None = None,
    transport: Transport | None = None,
    on_done: OnDone | None = None,
) -> RunResult:
    """``concurrency`` workers; each takes the next request when its previous one ends.

    The requests' lengths and prefixes come from ``specs`` in order; their arrival times are
    replaced by the moment a worker picks them up. With ``duration_s``, no request starts
    after that time (the ones in flight finish)."""
    pending = [make_trace(s) for s in specs]
    order = iter(pending)
    done: list[ClientTrace] = []
    started = datetime.now(UTC).isoformat(timespec="seconds")
    async with open_transport(cfg, transport) as client, _quiet():
        t0 = time.perf_counter()
        mon = _Monitor(t0)
        mon_task = asyncio.create_task(mon.run())

        async def worker() -> None:
            for trace in order:
                now = time.perf_counter() - t0
                if duration_s is not None and now >= duration_s:
                    return
                trace.scheduled_s = trace.dispatched_s = now
                done.append(trace)
                await _one(client, cfg, trace, t0, mon, on_done)

        # never more workers than requests: a worker with nothing to send only costs memory
        workers = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, len(pending))))]
        try:
            interrupted = await _gather_or_cancel(workers)
        finally:
            wall = time.perf_counter() - t0
            stats = mon.stats(wall)
            mon_task.cancel()
    if interrupted:
        done = settle_interrupted(done, wall)
    mark_trimmed(done, cfg)
    return RunResult(done, "closed", started, wall, stats, interrupted, t0)


class UsersLike(Protocol):
    """:class:`servecap.workload.ClosedLoopUsers`: first turns, then one turn per answer."""

    def first_turns(self) -> list[Any]: ...
    def next_turn(self, user_id: int, finished_at_s: float) -> Any: ...


async def run_chat_users(
    cfg: LoadConfig, users: UsersLike, *, transport: Transport | None = None, on_done: OnDone | None = None
) -> RunResult:
    """Closed loop of chat users (:class:`servecap.workload.ClosedLoopUsers`): each user sends
    a turn at its scheduled time (start offset, or the previous answer's end plus a think time)
    and waits for the answer. A turn's prompt is the conversation so far — the previous prompt
    and the answer the server actually sent — plus new filler, so a server's prefix cache sees
    what a chat frontend would send."""
    traces: list[ClientTrace] = []
    started = datetime.now(UTC).isoformat(timespec="seconds")
    firsts = users.first_turns()
    history: dict[int, str] = {}
    async with open_transport(cfg, transport) as client, _quiet():
        t0 = time.perf_counter()
        mon = _Monitor(t0)
        mon_task = asyncio.create_task(mon.run())

        async def user(spec: Any) -> None:
            while spec is not None:
                delay = t0 + float(spec.arrival_s) - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                trace = make_trace(spec)
                trace.dispatched_s = time.perf_counter() - t0
                traces.append(trace)
                conv = getattr(spec, "conversation_id", None)
                past = history.get(conv, "") if conv is not None and spec.history_tokens else ""
                new = prompt_text(
                    max(1, trace.prompt_tokens - len(past) // 4),
                    unique=f"{cfg.run_nonce}-{trace.request_id}",
                    prefix_group=None if past else trace.prefix_group,
                    prefix_tokens=0 if past else trace.prefix_tokens,
                    group_tag=cfg.prefix_nonce,
                )
                body = build_body(
                    cfg.endpoint,
                    model=cfg.model,
                    prompt=past + new,
                    max_tokens=max(1, trace.output_tokens),
                    stream=cfg.stream,
                    extra=cfg.extra_body,
                )
                mon.change(+1)
                try:
                    await stream_request(
                        client,
                        cfg.url,
                        body,
                        trace,
                        t0=t0,
                        headers=auth_headers(cfg),
                        total_timeout_s=cfg.request_timeout_s,
                        stall_timeout_s=cfg.stall_timeout_s,
                        collect_text=True,
                    )
                finally:
                    mon.change(-1)
                    if on_done is not None:
                        on_done(trace)
                if conv is not None:
                    history[conv] = past + new + trace.answer_text
                end = trace.end_s if trace.end_s is not None else time.perf_counter() - t0
                spec = users.next_turn(int(spec.user_id), end)

        tasks = [asyncio.create_task(user(s)) for s in firsts]
        try:
            interrupted = await _gather_or_cancel(tasks)
        finally:
            wall = time.perf_counter() - t0
            stats = mon.stats(wall)
            mon_task.cancel()
    traces.sort(key=lambda t: t.scheduled_s)
    if interrupted:
        traces = settle_interrupted(traces, wall)
    mark_trimmed(traces, cfg)
    return RunResult(traces, "users", started, wall, stats, interrupted, t0)


def settle_interrupted(traces: list[ClientTrace], wall_s: float) -> list[ClientTrace]:
    """After Ctrl-C: requests never sent are not part of the run (dropped, not errors); those
    cut off in flight keep their record with the error ``interrupted`` and are left out of the
    summary (``trimmed``), since the server did not fail them."""
    kept = []
    for t in traces:
        if t.sent_s is None:
            continue
        if t.error == "interrupted":
            t.trimmed = True
        if t.end_s is None:
            t.end_s = wall_s
        kept.append(t)
    return kept


async def _cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel the run's tasks (Ctrl-C) and wait for them, so every request keeps its record."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _gather_or_cancel(tasks: list[asyncio.Task[Any]]) -> bool:
    """Await every task; when the run is cancelled, cancel them all. True if interrupted."""
    try:
        await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        await _cancel_all(tasks)
        return True
    return False
