"""A target that trickles its answer cannot hold a scrape past its deadline, nor a watch past
--duration-s; malformed URLs are one line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from servecap.app.monitor import MonitorSettings, run_monitor
from servecap.errors import ServecapError
from servecap.monitor.scrape import Down, metrics_url, scrape_all


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100000\r\n\r\n")
    try:
        for _ in range(60):  # a byte every 0.2 s: each read is quick, the answer never ends
            writer.write(b"#")
            await writer.drain()
            await asyncio.sleep(0.2)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def _server() -> AsyncIterator[str]:
    srv = await asyncio.start_server(_trickle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        srv.close()


async def test_a_trickling_target_is_down_at_the_deadline() -> None:
    async for url in _server():
        t0 = time.monotonic()
        [result] = await scrape_all([url], 0.0, timeout_s=0.5)
        assert isinstance(result, Down) and "within 0.5 s" in result.error
        assert time.monotonic() - t0 < 2.0


async def test_a_watch_stops_at_its_duration_however_slow_the_target() -> None:
    async for url in _server():
        t0 = time.monotonic()
        settings = MonitorSettings(
            urls=(url,), interval_s=0.2, window_s=1.0, duration_s=1.0, timeout_s=30.0, store=False
        )
        last = await run_monitor(settings, lambda r: None)
        assert last.replicas_up == 0
        assert time.monotonic() - t0 < 3.0


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:99999", "ftp://x", "http://"])
def test_malformed_urls_are_one_line(url: str) -> None:
    with pytest.raises(ServecapError, match=r"^url=") as err:
        metrics_url(url)
    assert "\n" not in str(err.value)
