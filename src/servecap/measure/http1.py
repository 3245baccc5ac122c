"""A small HTTP/1.1 client for streaming responses, built on an ``asyncio.Protocol``.

Why not httpx here: at hundreds of requests per second its per-request and per-chunk Python
cost (connection-pool bookkeeping, the h11 state machine, async iterators) saturated a core
of the 2-core benchmark machine at ~290 requests/s and added milliseconds to every measured
TTFT. This client does the minimum: keep-alive connections reused from a pool (one request at
a time per connection), the request written in one ``transport.write``, the response parsed
in ``data_received`` (status line, headers, then ``Content-Length``, chunked or
read-until-close bodies, RFC 9112 sections 6-7), and each body piece handed to a callback
*inside* ``data_received`` with the time it was read, so no task switch sits between the
socket and the timestamp.

Errors map onto the load generator's kinds: :class:`ConnectError` (refused, unreachable,
DNS), :class:`StallTimeout` (no bytes for ``stall_timeout_s``), :class:`ProtocolError` (the
peer closed early or sent something that is not HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import ssl as ssl_mod
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

OnStatus = Callable[[int], None]
OnData = Callable[[bytes], object]


class HttpError(Exception):
    pass


class ConnectError(HttpError):
    pass


class StallTimeout(HttpError):
    pass


class ProtocolError(HttpError):
    pass


_MAX_HEAD = 65536


class _Conn(asyncio.Protocol):
    """One connection; ``begin`` arms it for the next response."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self._done: asyncio.Future[None] | None = None
        self._on_status: OnStatus | None = None
        self._on_data: OnData | None = None
        self._buf = bytearray()
        self._state = "idle"  # head | length | chunk_size | chunk_data | chunk_crlf | trailer | close | idle
        self._left = 0
        self._keep_alive = True
        self._stall_s = 60.0
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's is no asyncio.Transport subclass)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == "close":  # body delimited by the connection's end
            self._finish(None)
        elif self._state != "idle":
            self._finish(ProtocolError(f"connection closed by the server ({exc or 'EOF'})"))

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        try:
            self._feed(data)
        except HttpError as err:
            self._finish(err)
            self.abort()

    # -- one response --------------------------------------------------------------------------

    def begin(self, payload: bytes, on_status: OnStatus, on_data: OnData, stall_s: float) -> asyncio.Future[None]:
        assert self.transport is not None
        self._done = self.loop.create_future()
        self._on_status, self._on_data = on_status, on_data
        self._buf.clear()
        self._state, self._keep_alive, self.reusable = "head", True, False
        self._stall_s, self._last = stall_s, self.loop.time()
        self._timer = self.loop.call_later(stall_s, self._check_stall)
        self.transport.write(payload)
        return self._done

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
        clean = err is None and self._state == "idle"
        self.reusable = clean and self._keep_alive and not self.closed
        if not clean:
            self._state = "done"
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

    def _emit(self, piece: bytes) -> None:
        if piece and self._on_data is not None:
            self._on_data(piece)

    def _feed(self, data: bytes) -> None:
        st = self._state
        if st == "length":
            n = len(data)
            if n <= self._left:
                self._left -= n
                self._emit(data)
                if self._left == 0:
                    self._state = "idle"
                    self._finish(None)
                return
        elif st == "close":
            self._emit(data)
            return
        elif st in ("idle", "done"):
            return
        elif st == "chunk_size" and not self._buf:
            data = self._chunks(data)  # whole chunks straight from the read, one callback
            if not data:
                return
        self._buf += data
        self._run()

    def _chunks(self, data: bytes) -> bytes:
        """The complete chunks at the start of ``data`` (which begins at a chunk-size line),
        emitted as one piece; returns what is left for the general parser (a partial chunk,
        the last chunk, chunk extensions, anything malformed)."""
        pos, n, pieces = 0, len(data), []
        while pos < n:
            nl = data.find(b"\r\n", pos)
            if nl < 0 or nl - pos > 16:
                break
            line = data[pos:nl]
            if not line.isalnum():
                break
            try:
                size = int(line, 16)
            except ValueError:
                break
            end = nl + 2 + size
            if size == 0 or end + 2 > n or data[end : end + 2] != b"\r\n":
                break
            pieces.append(data[nl + 2 : end])
            pos = end + 2
        if pieces:
            self._emit(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        return data[pos:] if pos else data

    def _run(self) -> None:
        buf = self._buf
        while True:
            st = self._state
            if st == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > _MAX_HEAD:
                        raise ProtocolError("response head too large")
                    return
                self._head(bytes(buf[:end]))
                del buf[: end + 4]
            elif st == "length":
                take = min(self._left, len(buf))
                if take:
                    piece = bytes(buf[:take])
                    del buf[:take]
                    self._left -= take
                    self._emit(piece)
                if self._left == 0:
                    self._state = "idle"
                    self._finish(None)
                return
            elif st == "close":
                if buf:
                    piece = bytes(buf)
                    buf.clear()
                    self._emit(piece)
                return
            elif st == "chunk_size":
                nl = buf.find(b"\r\n")
                if nl < 0:
                    if len(buf) > 1024:
                        raise ProtocolError("bad chunk size line")
                    return
                line = bytes(buf[:nl]).split(b";", 1)[0].strip()
                del buf[: nl + 2]
                try:
                    size = int(line, 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size {line[:20]!r}") from None
                if size == 0:
                    self._state = "trailer"
                else:
                    self._left, self._state = size, "chunk_data"
            elif st == "chunk_data":
                if not buf:
                    return
                take = min(self._left, len(buf))
                piece = bytes(buf[:take])
                del buf[:take]
                self._left -= take
                if self._left == 0:
                    self._state = "chunk_crlf"
                self._emit(piece)
            elif st == "chunk_crlf":
                if len(buf) < 2:
                    return
                if buf[:2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                del buf[:2]
                self._state = "chunk_size"
            elif st == "trailer":
                nl = buf.find(b"\r\n")
                if nl < 0:
                    return
                line = bytes(buf[:nl])
                del buf[: nl + 2]
                if not line:
                    self._state = "idle"
                    self._finish(None)
                    return
            else:
                return

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x response: {lines[0][:60]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise ProtocolError(f"bad status {parts[1][:10]!r}") from None
        length: int | None = None
        chunked = False
        keep = parts[0] == b"HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip()
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise ProtocolError("bad Content-Length") from None
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                v = value.lower()
                keep = b"close" not in v and (keep or b"keep-alive" in v)
        self._keep_alive = keep
        if self._on_status is not None:
            self._on_status(status)
        if 100 <= status < 200:
            self._state = "head"  # interim response: the real one follows
            return
        if status in (204, 304):
            self._state = "idle"
            self._finish(None)
        elif chunked:
            self._state = "chunk_size"
        elif length is not None:
            self._left = length
            self._state = "length" if length else "idle"
            if not length:
                self._finish(None)
        else:
            self._state, self._keep_alive = "close", False


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
                _, proto = await loop.create_connection(lambda: _Conn(loop), t.host, t.port,
                                                        ssl=self._ssl if t.tls else None)
        except TimeoutError:
            raise StallTimeout(f"connect to {t.host}:{t.port} timed out after {self.connect_timeout_s:g} s") from None
        except OSError as err:
            raise ConnectError(f"{t.host}:{t.port}: {err.strerror or err}") from None
        self._all.add(proto)
        return proto

    def request_bytes(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[_Target, bytes]:
        t = _target(url)
        hdrs = {"host": t.host_header, "content-length": str(len(body)), "connection": "keep-alive",
                **self.headers, **headers}
        head = f"{method} {t.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        return t, head.encode("latin-1") + body

    async def stream(self, target: _Target, payload: bytes, on_status: OnStatus, on_data: OnData, *,
                     stall_timeout_s: float, on_sent: Callable[[], None] | None = None) -> None:
        """Send ``payload`` (from :meth:`request_bytes`) and feed the response body to
        ``on_data`` as it is read; returns when the response ends. ``on_sent`` is called right
        before the bytes are written (on a ready connection)."""
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
