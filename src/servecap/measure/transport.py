"""The load generator's one transport interface, and the errors every transport raises.

A transport sends one request and hands the response to callbacks as it arrives:

- :meth:`Transport.prepare` turns ``(method, url, body, headers)`` into what the transport
  sends (done before the request's clock starts: serialization is not server latency);
- :meth:`Transport.stream` sends it, calls ``on_sent`` right before the bytes go out on a
  ready connection, ``on_status`` with the final status, and ``on_data`` with each piece of
  the body *in the callback that read it* (so a token is timestamped where it was read);
  it returns when the response ends and raises :class:`ConnectError`,
  :class:`StallTimeout` or :class:`ProtocolError`.

Two implementations: :class:`servecap.measure.http1.RawClient` (keep-alive HTTP/1.1 over
sockets, parsed by ``httptools``) and :class:`servecap.measure.asgi_stream.AsgiClient` (an
ASGI app called in-process, for tests). The load generator picks one once, per run
(:func:`servecap.measure.loadgen.open_transport`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, Self

OnStatus = Callable[[int], None]
OnData = Callable[[bytes], object]
OnSent = Callable[[], None]


class HttpError(Exception):
    """A transport failure (the request gets an error record, the run goes on)."""


class ConnectError(HttpError):
    """Refused, unreachable, DNS."""


class StallTimeout(HttpError):
    """No bytes for ``stall_timeout_s`` (or the connection could not be opened in time)."""


class ProtocolError(HttpError):
    """The peer closed early or sent something that is not HTTP/1.1 (or the app raised)."""


class Transport(Protocol):
    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def prepare(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> Any:
        """What :meth:`stream` sends (opaque to the caller)."""
        ...

    async def stream(
        self,
        prepared: Any,
        on_status: OnStatus,
        on_data: OnData,
        *,
        stall_timeout_s: float,
        on_sent: OnSent | None = None,
    ) -> None:
        """Send ``prepared`` and feed the response to the callbacks; returns at its end."""
        ...
