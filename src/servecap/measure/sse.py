"""Incremental Server-Sent Events parser (the WHATWG HTML "server-sent events" stream format).

Bytes arrive in arbitrary pieces; :class:`SseParser` buffers them and yields complete events.
An event is a run of lines ended by a blank line; ``data:`` lines are joined with ``\\n``;
lines starting with ``:`` are comments (keep-alives); ``event:``/``id:``/``retry:`` are kept
but unused by OpenAI streams. Line ends may be ``\\n``, ``\\r\\n`` or ``\\r`` (the spec allows
all three). OpenAI-compatible servers send ``data: {json}\\n\\n`` per chunk and a final
``data: [DONE]\\n\\n``.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class SseEvent:
    data: str
    event: str | None = None


class SseParser:
    """Feed bytes, get the events completed by them (state is kept between feeds)."""

    __slots__ = ("_buf", "_data", "_event", "_pending_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event: str | None = None
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if not chunk:
            return []
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the \n of a \r\n split across two chunks
        self._pending_cr = chunk.endswith(b"\r")
        buf = self._buf + chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        out: list[SseEvent] = []
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        self._buf = buf[start:]
        return out

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an unfinished line (a stream ending here was cut mid-event)."""
        return len(self._buf) + sum(len(d) for d in self._data)

    def _line(self, raw: bytes) -> SseEvent | None:
        if not raw:
            if not self._data and self._event is None:
                return None
            ev = SseEvent("\n".join(self._data), self._event)
            self._data = []
            self._event = None
            return ev
        if raw[:1] == b":":
            return None
        line = raw.decode("utf-8", errors="replace")
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        return None
