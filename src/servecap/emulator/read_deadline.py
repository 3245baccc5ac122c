"""A deadline for reading each request: a client that opens a connection and sends a partial
request (headers or body unfinished) is disconnected after ``read_timeout_s``.

uvicorn bounds the idle time between requests (``timeout_keep_alive``) but not the time a
request takes to arrive, so about 20,000 connections holding partial requests stop a server
answering (vLLM's OpenAI server inherits the same default). This subclasses uvicorn's httptools
protocol: a timer starts when the connection opens and when each request begins, and stops when
the request has been read whole; when it fires first, the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

REQUEST_READ_TIMEOUT_S = 30.0
"""Seconds a client has to send one request's headers and body."""


def read_deadline_protocol(read_timeout_s: float = REQUEST_READ_TIMEOUT_S) -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with the read deadline, or None without httptools (uvicorn's
    pure-Python h11 protocol is then used as is)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class ReadDeadlineProtocol(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            self._read_deadline: asyncio.TimerHandle | None = None
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._read_deadline = self.loop.call_later(read_timeout_s, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _read_timed_out(self) -> None:
            self._read_deadline = None
            if not self.transport.is_closing():
                self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_message_complete(self) -> None:
            self._disarm()
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return ReadDeadlineProtocol
