"""Send one streaming request and record every token's arrival; never raise, always a record.

Token counting: a chunk whose choice carries non-empty ``text`` (completions) or
``delta.content`` (chat) is one arrival; the server's ``usage`` (asked for with
``stream_options.include_usage``) gives the real prompt and output token counts. When usage
reports more output tokens than content chunks, the difference is recorded as tokens that
arrived sharing a chunk (``multi_token_chunks``): their inter-token latency is not observable.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from servecap.measure.sse import SseParser
from servecap.measure.trace import ClientTrace
from servecap.measure.transport import ConnectError, HttpError, StallTimeout, Transport

_MAX_ERROR_BODY = 2000


def _content(choice: dict[str, Any]) -> str:
    text = choice.get("text")
    if isinstance(text, str):
        return text
    delta = choice.get("delta")
    if isinstance(delta, dict):
        c = delta.get("content")
        if isinstance(c, str):
            return c
        r = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(r, str):
            return r
    return ""


def _usage(trace: ClientTrace, usage: dict[str, Any]) -> None:
    p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(p, int):
        trace.usage_prompt_tokens = p
    if isinstance(c, int):
        trace.usage_output_tokens = c
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        trace.cached_prompt_tokens = int(details["cached_tokens"])


_CHOICE0 = b'"choices":[{"index":0,'
_TEXT = b'"text":"'
_CONTENT = b'"content":"'


class _Consumer:
    """Turns response body bytes into the trace: SSE events, token times, usage, errors.

    Hot path: an OpenAI stream is ``data: {json}\\n\\n`` events, most of them one token. The
    events are split with ``bytes.find``; a one-choice chunk whose ``text`` or
    ``delta.content`` string is non-empty, with no ``usage`` object, is counted as a token
    from its bytes alone (a JSON string cannot hide an unescaped ``"text":"``); every other
    event (usage, ``servecap_timing``, errors, several choices, other shapes, and every event
    when the text is kept) is parsed with :mod:`json`. Streams with ``\\r`` line ends,
    comments or multi-line events go through :class:`~servecap.measure.sse.SseParser`.
    The arrival time is taken once per read, before any parsing."""

    def __init__(self, trace: ClientTrace, t0: float, collect: bool) -> None:
        self.trace, self.t0, self.collect = trace, t0, collect
        self.parser = SseParser()
        self._buf = b""
        self._general = False  # \r seen: the general parser takes the whole stream
        self.done = False
        self.stopped = False  # an error ended it
        self.status = 0
        self.error_body = b""

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf) + self.parser.buffered_bytes

    def feed(self, raw: bytes) -> None:
        now = time.perf_counter() - self.t0
        if self.stopped:
            return
        if self.status != 200:
            if len(self.error_body) < _MAX_ERROR_BODY:
                self.error_body += raw
            return
        if not self._general and b"\r" in raw:
            self._general = True
            raw, self._buf = self._buf + raw, b""
        if self._general:
            for ev in self.parser.feed(raw):
                self._event(ev.data.encode(), now)
                if self.stopped:
                    return
            return
        buf = self._buf + raw if self._buf else raw
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            if buf.startswith(b"data: ", start) and buf.find(b"\n", start, end) < 0:
                self._event(buf[start + 6 : end], now)
            else:  # comments, other fields, several data lines, blank lines
                for ev in self.parser.feed(buf[start : end + 2]):
                    self._event(ev.data.encode(), now)
            start = end + 2
            if self.stopped:
                return
        self._buf = buf[start:] if start else buf

    def _event(self, data: bytes, now: float) -> None:
        if data == b"[DONE]":
            self.done = True
            return
        trace = self.trace
        if not self.collect:
            i = data.find(_CHOICE0)
            if i >= 0 and b'"usage":{' not in data and data.find(b'},{"index":', i) < 0:
                j = data.find(_TEXT, i)
                k = j + len(_TEXT)
                if j < 0:
                    j = data.find(_CONTENT, i)
                    k = j + len(_CONTENT)
                if j >= 0:
                    if data[k : k + 1] != b'"':
                        trace.chunks += 1
                        if trace.first_token_s is None:
                            trace.first_token_s = now
                        trace.token_times_s.append(now)
                    return
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):  # malformed, not UTF-8, absurdly deep or long
            obj = None
        if not isinstance(obj, dict):
            self._stop("bad_json", data[:200].decode("utf-8", "replace"), now)
            return
        if "error" in obj:
            self._stop("server_error", json.dumps(obj["error"])[:_MAX_ERROR_BODY], now)
            return
        for choice in obj.get("choices") or ():
            text = _content(choice) if isinstance(choice, dict) else ""
            if text:
                if self.collect:
                    trace.answer_text += text
                trace.chunks += 1
                if trace.first_token_s is None:
                    trace.first_token_s = now
                trace.token_times_s.append(now)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            _usage(trace, usage)
        timing = obj.get("servecap_timing")
        if isinstance(timing, dict):
            trace.server_timing = timing
            cached = timing.get("cached_tokens")
            if trace.cached_prompt_tokens is None and isinstance(cached, int):
                trace.cached_prompt_tokens = cached  # the emulator's usage leaves out a zero

    def _stop(self, kind: str, detail: str, now: float) -> None:
        self.trace.error, self.trace.error_detail, self.trace.end_s = kind, detail, now
        self.stopped = True

    def finish(self) -> None:
        """The response ended (or the reader stopped): settle the record."""
        trace = self.trace
        if trace.error is not None:
            return
        if trace.end_s is None:
            trace.end_s = time.perf_counter() - self.t0
        if self.status != 200:
            trace.error = f"http_{self.status}"
            trace.error_detail = self.error_body[:_MAX_ERROR_BODY].decode("utf-8", "replace")
            return
        if not self.done:
            trace.error = "broken_stream"
            buffered = self.buffered_bytes
            trace.error_detail = f"stream ended without [DONE] after {trace.chunks} chunks" + (
                f" ({buffered} bytes of an unfinished event)" if buffered else ""
            )
            return
        if trace.usage_output_tokens is not None and trace.usage_output_tokens > trace.chunks:
            trace.multi_token_chunks = trace.usage_output_tokens - trace.chunks


async def stream_request(
    client: Transport,
    url: str,
    body: dict[str, Any],
    trace: ClientTrace,
    *,
    t0: float,
    total_timeout_s: float,
    stall_timeout_s: float = 60.0,
    headers: dict[str, str] | None = None,
    collect_text: bool = False,
) -> ClientTrace:
    """POST ``body`` to ``url`` over ``client`` and fill ``trace``; errors become ``trace.error``.

    ``sent_s`` is taken when the request is handed to a ready connection (after a pooled
    connection is picked or a new one opened), so connection set-up is not counted as server
    latency."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    hdrs = {"content-type": "application/json", "accept": "text/event-stream"}
    if headers:
        hdrs.update(headers)
    clock = time.perf_counter
    try:
        async with asyncio.timeout(total_timeout_s):
            await _send(
                client, url, payload, hdrs, trace, t0, collect_text, stall_timeout_s, bool(body.get("stream", True))
            )
    except TimeoutError:
        trace.error, trace.error_detail = "timeout", f"no complete response within {total_timeout_s:g} s"
    except StallTimeout as err:
        trace.error, trace.error_detail = "timeout", f"{type(err).__name__}: {err}"
    except ConnectError as err:
        trace.error, trace.error_detail = "connect_error", str(err) or type(err).__name__
    except HttpError as err:
        trace.error, trace.error_detail = "broken_stream", f"{type(err).__name__}: {err}"
    except asyncio.CancelledError:
        trace.error, trace.error_detail = "interrupted", "in flight when the run was interrupted"
        trace.end_s = clock() - t0
        raise
    except Exception as err:  # a client bug must not lose the record
        trace.error, trace.error_detail = "client_error", f"{type(err).__name__}: {err}"
    if trace.end_s is None:
        trace.end_s = clock() - t0
    return trace


async def _send(
    client: Transport,
    url: str,
    payload: bytes,
    hdrs: dict[str, str],
    trace: ClientTrace,
    t0: float,
    collect: bool,
    stall_s: float,
    stream: bool,
) -> None:
    prepared = client.prepare("POST", url, payload, hdrs)
    c = _Consumer(trace, t0, collect)

    def on_sent() -> None:
        trace.sent_s = time.perf_counter() - t0

    def on_status(status: int) -> None:
        if status >= 200:
            trace.http_status = c.status = status

    if stream:
        await client.stream(prepared, on_status, c.feed, stall_timeout_s=stall_s, on_sent=on_sent)
        c.finish()
        return
    parts: list[bytes] = []
    await client.stream(prepared, on_status, parts.append, stall_timeout_s=stall_s, on_sent=on_sent)
    if c.status != 200:
        c.error_body = b"".join(parts)
        c.finish()
        return
    _whole(b"".join(parts), trace, time.perf_counter() - t0)


def _whole(raw: bytes, trace: ClientTrace, now: float) -> None:
    """A non-streaming response: one JSON body, all tokens at once."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):  # malformed, not UTF-8, absurdly deep or long
        trace.error, trace.error_detail = "bad_json", raw[:200].decode("utf-8", "replace")
        return
    if not isinstance(obj, dict) or "error" in obj:
        trace.error, trace.error_detail = "server_error", raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
        return
    usage = obj.get("usage")
    if isinstance(usage, dict):
        _usage(trace, usage)
    trace.first_token_s = now
    trace.end_s = now
    trace.chunks = 1
    trace.token_times_s.append(now)
