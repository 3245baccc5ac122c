"""An httpx transport that runs an ASGI app in-process and streams its body as it is sent.

``httpx.ASGITransport`` collects the whole response before returning it, so every token of a
stream would seem to arrive at the end. This transport runs the app in a task and hands each
``http.response.body`` message to the client as it comes, so in-process tests see real token
timing (the same code path as over a socket, minus the socket).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx

from servecap.measure.transport import OnData, OnSent, OnStatus, ProtocolError, StallTimeout

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
AsgiApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


class _Body(httpx.AsyncByteStream):
    def __init__(
        self, queue: asyncio.Queue[bytes | None], task: asyncio.Task[None], disconnected: asyncio.Event
    ) -> None:
        self._queue, self._task, self._disconnected = queue, task, disconnected

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            part = await self._queue.get()
            if part is None:
                break
            yield part
        if self._task.done() and not self._task.cancelled() and self._task.exception() is not None:
            raise httpx.RemoteProtocolError(f"app raised {self._task.exception()!r}")

    async def aclose(self) -> None:
        self._disconnected.set()
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


class StreamingASGITransport(httpx.AsyncBaseTransport):
    def __init__(self, app: AsgiApp, *, client: tuple[str, int] = ("127.0.0.1", 12345)) -> None:
        self.app, self.client = app, client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "root_path": "",
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "client": self.client,
            "server": (request.url.host, request.url.port or 80),
        }
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = asyncio.get_running_loop().create_future()
        disconnected = asyncio.Event()
        sent_body = False

        async def receive() -> Message:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.set_result((message["status"], list(message.get("headers", []))))
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    queue.put_nowait(bytes(chunk))
                if not message.get("more_body", False):
                    queue.put_nowait(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                if not started.done():
                    started.set_exception(httpx.RemoteProtocolError("app sent no response"))
                queue.put_nowait(None)

        task = asyncio.create_task(run())
        status, headers = await started
        return httpx.Response(status, headers=headers, stream=_Body(queue, task, disconnected), request=request)


class _AsgiTarget:
    __slots__ = ("headers", "host", "method", "path", "query")

    def __init__(self, method: str, url: str, headers: list[tuple[bytes, bytes]]) -> None:
        u = httpx.URL(url)
        self.method, self.path, self.query = method, u.path, u.query
        self.host = (u.host, u.port or 80)
        self.headers = headers


class AsgiClient:
    """The load generator's in-process client: calls the ASGI app directly in the request's
    own task and hands every body message to ``on_data`` inside the app's ``send`` (so a
    token is timestamped the moment the server writes it: no queue, no task switch, no httpx
    per chunk). A :class:`servecap.measure.transport.Transport`, like
    :class:`servecap.measure.http1.RawClient`; used by the
    load generator when it is given one as its transport."""

    def __init__(
        self, app: AsgiApp, *, headers: dict[str, str] | None = None, client: tuple[str, int] = ("127.0.0.1", 12345)
    ) -> None:
        self.app, self.client = app, client
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}

    async def __aenter__(self) -> AsgiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def prepare(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[_AsgiTarget, bytes]:
        hdrs = {"content-length": str(len(body)), **self.headers, **{k.lower(): v for k, v in headers.items()}}
        return _AsgiTarget(method, url, [(k.encode("latin-1"), v.encode("latin-1")) for k, v in hdrs.items()]), body

    async def stream(
        self,
        prepared: tuple[_AsgiTarget, bytes],
        on_status: OnStatus,
        on_data: OnData,
        *,
        stall_timeout_s: float,
        on_sent: OnSent | None = None,
    ) -> None:
        target, payload = prepared

        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": target.method,
            "scheme": "http",
            "path": target.path,
            "raw_path": target.path.encode(),
            "query_string": target.query,
            "root_path": "",
            "headers": target.headers,
            "client": self.client,
            "server": target.host,
        }
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()
        state = {"body_sent": False, "started": False, "complete": False}

        async def receive() -> Message:
            if not state["body_sent"]:
                state["body_sent"] = True
                return {"type": "http.request", "body": payload, "more_body": False}
            await ended.wait()
            return {"type": "http.disconnect"}

        try:
            async with asyncio.timeout_at(loop.time() + stall_timeout_s) as deadline:

                async def send(message: Message) -> None:
                    kind = message["type"]
                    if kind == "http.response.start":
                        state["started"] = True
                        on_status(int(message["status"]))
                    elif kind == "http.response.body" and not ended.is_set():
                        chunk = message.get("body", b"")
                        if chunk:
                            deadline.reschedule(loop.time() + stall_timeout_s)
                            on_data(bytes(chunk))
                        if not message.get("more_body", False):
                            state["complete"] = True
                            ended.set()

                if on_sent is not None:
                    on_sent()
                try:
                    await self.app(scope, receive, send)
                except (TimeoutError, asyncio.CancelledError):
                    raise
                except Exception as err:
                    raise ProtocolError(f"app raised {err!r}") from None
                finally:
                    ended.set()
        except TimeoutError:
            raise StallTimeout(f"no bytes for {stall_timeout_s:g} s") from None
        if not state["started"]:
            raise ProtocolError("app sent no response")
        if not state["complete"]:
            raise ProtocolError("app returned before the end of the response")
