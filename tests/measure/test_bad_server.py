"""A deliberately bad server: every failure is recorded as an error, the run goes on."""

from __future__ import annotations

import asyncio
import itertools

from loadgen_helpers import reqs

from servecap.emulator.server import free_port
from servecap.measure.bench import summarize_traces
from servecap.measure.loadgen import LoadConfig, run_open_loop
from servecap.measure.records import error_counts

_OK = (
    b'data: {"choices":[{"index":0,"text":" the"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}\n\ndata: [DONE]\n\n'
)
_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


async def _bad(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, kind: str) -> None:
    await reader.readuntil(b"\r\n\r\n")
    if kind == "http_500":
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops")
    elif kind == "bad_json":
        writer.write(_HEAD + b"data: {not json\n\n")
    elif kind == "broken_stream":
        writer.write(_HEAD + b'data: {"choices":[{"index":0,"text":" a"}]}\n\n')
    elif kind == "timeout":  # slow loris: a keep-alive comment every 20 ms, forever
        writer.write(_HEAD)
        while True:
            await writer.drain()
            writer.write(b": ping\n\n")
            await asyncio.sleep(0.02)
    else:
        writer.write(_HEAD + _OK)
    await writer.drain()
    writer.close()


async def test_bad_server_behaviours_become_errors_and_nothing_is_lost() -> None:
    kinds = itertools.cycle(["http_500", "bad_json", "broken_stream", "timeout", "ok"])
    handlers: set[asyncio.Task[None]] = set()

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await _bad(r, w, next(kinds))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = LoadConfig(base_url=f"http://127.0.0.1:{port}", model="m", request_timeout_s=0.5)
    async with server:
        res = await run_open_loop(cfg, reqs(10, 200.0))
        for t in handlers:
            t.cancel()
    assert len(res.traces) == 10
    counts = error_counts(res.traces)
    assert counts == {"bad_json": 2, "broken_stream": 2, "http_500": 2, "timeout": 2}
    ok = [t for t in res.traces if t.ok]
    assert len(ok) == 2 and ok[0].usage_output_tokens == 1
    summary, _ = summarize_traces(res.traces, None)
    assert summary.num_requests == 10 and summary.completed == 2


async def test_connection_refused_is_recorded() -> None:
    cfg = LoadConfig(base_url=f"http://127.0.0.1:{free_port()}", model="m", connect_timeout_s=1.0)
    res = await run_open_loop(cfg, reqs(3, 100.0))
    assert [t.error for t in res.traces] == ["connect_error"] * 3
    assert all(t.end_s is not None for t in res.traces)
