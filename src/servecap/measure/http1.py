"""A small HTTP/1.1 client for streaming responses: an ``asyncio.Protocol`` whose responses
are parsed by ``httptools`` (llhttp, the parser Node.js and uvicorn use).

Why not httpx here: at hundreds of requests per second its per-request and per-chunk Python
cost (connection-pool bookkeeping, the h11 state machine, async iterators) saturated a core
of the 2-core benchmark machine at ~290 requests/s and added milliseconds to every measured
TTFT. This client does the minimum: keep-alive connections reused from a pool (one request at
a time per connection), the request written in one ``transport.write``, the response fed to
llhttp in ``data_received`` (status line, headers, ``Content-Length``, chunked or
read-until-close bodies, RFC 9112 sections 6-7), and the body pieces of one read handed to a
callback as one piece *inside* ``data_received``, so no task switch sits between the socket
and the timestamp.

Errors map onto the load generator's kinds (:mod:`servecap.measure.transport`):
:class:`ConnectError` (refused, unreachable, DNS), :class:`StallTimeout` (no bytes for
``stall_timeout_s``), :class:`ProtocolError` (the peer closed early or sent something that
is not HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import ssl as ssl_mod
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

from servecap.measure.transport import ConnectError, HttpError, OnData, OnSent, OnStatus, ProtocolError, StallTimeout

__all__ = ["ConnectError", "HttpError", "ProtocolError", "RawClient", "StallTimeout"]


class _Conn(asyncio.Protocol):
    """One connection; ``begin`` arms it for the next response. The ``on_*`` methods without
    a leading underscore are llhttp's callbacks (``httptools.HttpResponseParser``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self._parser = httptools.HttpResponseParser(self)
        self._done: asyncio.Future[None] | None = None
        self._on_status: OnStatus | None = None
        self._on_data: OnData | None = None
        self._pieces: list[bytes] = []  # body read in the current data_received
        self._active = False  # a response is expected
        self._headers_done = False
        self._complete = False
        self._keep_alive = False
        self._until_close = False  # no Content-Length, not chunked: the body ends with the connection
        self._status = 0
        self._stall_s = 60.0
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's is no asyncio.Transport subclass)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self._active:
            return
        if self._headers_done and self._until_close and exc is None:
            self._flush()
            self._finish(None)
        else:
            self._finish(ProtocolError(f"connection closed by the server ({exc or 'EOF'})"))

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        if not self._active:  # bytes nobody asked for: the connection is not reusable
            self.abort()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._pieces.clear()
            self._finish(ProtocolError(f"not a valid HTTP/1.1 response: {err}"))
            self.abort()
            return
        self._flush()
        if self._complete:
            self._finish(None)

    # -- llhttp callbacks ------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding" and b"chunked" in value.lower()):
            self._until_close = False

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            return  # an interim response: the real one follows
        self._status, self._headers_done = status, True
        if self._on_status is not None:
            self._on_status(status)

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        if not self._headers_done:  # the end of an interim response
            self._until_close = True
            return
        self._complete = True
        self._keep_alive = bool(self._parser.should_keep_alive())  # (read inside the callback: llhttp resets after it)

    # -- one response --------------------------------------------------------------------------

    def begin(self, payload: bytes, on_status: OnStatus, on_data: OnData, stall_s: float) -> asyncio.Future[None]:
        assert self.transport is not None
        self._done = self.loop.create_future()
        self._on_status, self._on_data = on_status, on_data
        self._pieces.clear()
        self._active, self._headers_done, self._complete, self._until_close = True, False, False, True
        self._keep_alive = False
        self.reusable = False
        self._stall_s, self._last = stall_s, self.loop.time()
        self._timer = self.loop.call_later(stall_s, self._check_stall)
        self.transport.write(payload)
        return self._done

    def _flush(self) -> None:
        """The body read in one ``data_received``, as one piece (one callback per read)."""
        pieces = self._pieces
        if pieces and self._on_data is not None:
            self._on_data(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        pieces.clear()

    def _check_stall(self) -> None:
        if self._done is None or self._done.done():
            return
        idle = self.loop.time() - self._last
        if idle >= self._stall_s:
            self._finish(StallTimeout(f"no bytes for {self._stall_s:g} s"))
            self.abort()
        else:
            self._timer = self.loop.call_later(self._stall_s - idle, self._check_stall)

    def _finish(self, err: HttpError | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        clean = err is None and self._complete
        self.reusable = clean and not self.closed and self._keep_alive
        self._active = False
        done = self._done
        if done is not None and not done.done():
            if err is None:
                done.set_result(None)
            else:
                done.set_exception(err)

    def abort(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.transport.abort()
        self.closed = True


@dataclass(frozen=True, slots=True)
class _Target:
    host: str
    port: int
    tls: bool
    path: str
    host_header: str


def _target(url: str) -> _Target:
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ConnectError(f"unsupported URL {url!r}")
    tls = u.scheme == "https"
    port = u.port or (443 if tls else 80)
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    default = (tls and port == 443) or (not tls and port == 80)
    return _Target(u.hostname, port, tls, path, u.hostname if default else f"{u.hostname}:{port}")


class RawClient:
    """Keep-alive HTTP/1.1 connections to any number of hosts; ``stream`` sends one request."""

    def __init__(self, *, connect_timeout_s: float = 10.0, headers: dict[str, str] | None = None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.headers = dict(headers or {})
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._all: set[_Conn] = set()
        self._ssl: ssl_mod.SSLContext | None = None

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for c in list(self._all):
            if c.transport is not None and not c.closed:
                c.transport.close()
        self._all.clear()
        self._idle.clear()

    async def _connect(self, t: _Target) -> _Conn:
        key = (t.host, t.port, t.tls)
        pool = self._idle.get(key)
        while pool:
            c = pool.pop()
            if not c.closed:
                return c
            self._all.discard(c)
        loop = asyncio.get_running_loop()
        if t.tls and self._ssl is None:
            self._ssl = ssl_mod.create_default_context()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, proto = await loop.create_connection(
                    lambda: _Conn(loop), t.host, t.port, ssl=self._ssl if t.tls else None
                )
        except TimeoutError:
            raise StallTimeout(f"connect to {t.host}:{t.port} timed out after {self.connect_timeout_s:g} s") from None
        except OSError as err:
            raise ConnectError(f"{t.host}:{t.port}: {err.strerror or err}") from None
        self._all.add(proto)
        return proto

    def prepare(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[_Target, bytes]:
        t = _target(url)
        hdrs = {
            "host": t.host_header,
            "content-length": str(len(body)),
            "connection": "keep-alive",
            **self.headers,
            **headers,
        }
        head = f"{method} {t.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        return t, head.encode("latin-1") + body

    async def stream(
        self,
        prepared: tuple[_Target, bytes],
        on_status: OnStatus,
        on_data: OnData,
        *,
        stall_timeout_s: float,
        on_sent: OnSent | None = None,
    ) -> None:
        """Send ``prepared`` (from :meth:`prepare`) and feed the response body to ``on_data``
        as it is read; returns when the response ends. ``on_sent`` is called right before the
        bytes are written (on a ready connection)."""
        target, payload = prepared
        conn = await self._connect(target)
        if on_sent is not None:
            on_sent()
        done = conn.begin(payload, on_status, on_data, stall_timeout_s)
        try:
            await done
        except BaseException:
            conn.abort()
            self._all.discard(conn)
            raise
        if conn.reusable:
            self._idle.setdefault((target.host, target.port, target.tls), []).append(conn)
        else:
            conn.abort()
            self._all.discard(conn)
