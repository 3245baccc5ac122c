"""Fetch ``/metrics`` from several servers at once; a server that does not answer is a
:class:`Down` value (with the reason), never an exception."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from servecap.errors import ServecapError
from servecap.monitor.snapshot import Snapshot, parse_exposition

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True, slots=True)
class Down:
    """A server that could not be scraped at ``time_s``."""

    url: str
    time_s: float
    error: str


MAX_EXPOSITION_BYTES = 32 * 1024 * 1024
"""Largest ``/metrics`` answer read (a vLLM server's is ~100 KiB): a larger one is a Down target."""


def metrics_url(url: str) -> str:
    """``http://host:port`` -> ``http://host:port/metrics``; a URL with a path is kept as given.
    Raises :class:`ServecapError` for anything but an http(s) URL with a host."""
    try:
        parts = urlsplit(url.strip())
        port_error = None
        try:
            _ = parts.port
        except ValueError as err:
            port_error = err
    except ValueError as err:  # e.g. an unclosed IPv6 bracket: http://[::1
        raise ServecapError("url", url, f"is not a valid URL ({err})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServecapError("url", url, "must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000")
    if port_error is not None:
        raise ServecapError("url", url, f"has a bad port ({port_error})") from None
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


async def scrape_one(client: httpx.AsyncClient, url: str, time_s: float, *, deadline_s: float = 2.0) -> Snapshot | Down:
    """One scrape, finished within ``deadline_s`` overall (httpx's timeouts bound each read, so
    a target trickling a byte a second would otherwise hold it forever) and at most
    :data:`MAX_EXPOSITION_BYTES` read."""
    try:
        return await asyncio.wait_for(_scrape(client, url, time_s), timeout=deadline_s)
    except TimeoutError:
        return Down(url, time_s, f"no complete answer within {deadline_s:g} s")


async def _scrape(client: httpx.AsyncClient, url: str, time_s: float) -> Snapshot | Down:
    import httpx

    try:
        async with client.stream("GET", url) as resp:
            if resp.status_code != 200:
                return Down(url, time_s, f"HTTP {resp.status_code}")
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > MAX_EXPOSITION_BYTES:
                    return Down(url, time_s, f"answer over {MAX_EXPOSITION_BYTES // (1024 * 1024)} MiB")
            text = bytes(body).decode(resp.encoding or "utf-8", errors="replace")
    except httpx.HTTPError as err:
        return Down(url, time_s, f"{type(err).__name__}: {err}".rstrip(": "))
    try:
        return parse_exposition(text, url=url, time_s=time_s)
    except ServecapError as err:
        return Down(url, time_s, err.problem)


async def scrape_all(urls: list[str], time_s: float, *, timeout_s: float = 2.0) -> list[Snapshot | Down]:
    """Scrape every URL concurrently, each finished within ``timeout_s`` overall, in the order given."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout_s) as client:
        return list(await asyncio.gather(*(scrape_one(client, u, time_s, deadline_s=timeout_s) for u in urls)))
