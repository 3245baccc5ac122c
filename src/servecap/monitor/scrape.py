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


def metrics_url(url: str) -> str:
    """``http://host:port`` -> ``http://host:port/metrics``; a URL with a path is kept as given.
    Raises :class:`ServecapError` for anything but an http(s) URL with a host."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServecapError("url", url, "must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000")
    try:
        _ = parts.port
    except ValueError as err:
        raise ServecapError("url", url, f"has a bad port ({err})") from err
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


async def scrape_one(client: httpx.AsyncClient, url: str, time_s: float) -> Snapshot | Down:
    import httpx

    try:
        resp = await client.get(url)
    except httpx.HTTPError as err:
        return Down(url, time_s, f"{type(err).__name__}: {err}".rstrip(": "))
    if resp.status_code != 200:
        return Down(url, time_s, f"HTTP {resp.status_code}")
    try:
        return parse_exposition(resp.text, url=url, time_s=time_s)
    except ServecapError as err:
        return Down(url, time_s, err.problem)


async def scrape_all(urls: list[str], time_s: float, *, timeout_s: float = 2.0) -> list[Snapshot | Down]:
    """Scrape every URL concurrently (each bounded by ``timeout_s``), in the order given."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout_s) as client:
        return list(await asyncio.gather(*(scrape_one(client, u, time_s) for u in urls)))
