"""The client's hot path: chunked bodies read straight from the socket's pieces, SSE events
split with bytes.find and token chunks recognised without a JSON parse — the same result as
the general parsers, however the bytes are split."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from servecap.measure.asgi_stream import AsgiClient
from servecap.measure.client import _Consumer, stream_request
from servecap.measure.http1 import _Conn
from servecap.measure.trace import ClientTrace


def _chunk(i: int, chat: bool, text: str = " the", last: bool = False) -> bytes:
    head = 'data: {"id":"x-1","object":"o","created":1,"model":"m","choices":[{"index":0,'
    reason = '"length"' if last else "null"
    if chat:
        return (
            head + f'"delta":{{"content":{json.dumps(text)}}},"logprobs":null,"finish_reason":{reason}}}]}}\n\n'
        ).encode()
    return (head + f'"text":{json.dumps(text)},"logprobs":null,"finish_reason":{reason}}}]}}\n\n').encode()


def _stream(chat: bool) -> bytes:
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n' if chat else b""
    usage = {
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 2}},
        "servecap_timing": {"first_token_s": 1.0},
    }
    return (
        role
        + _chunk(0, chat)
        + b": keep-alive\n\n"
        + _chunk(1, chat, text='say "hi"\\n')
        + _chunk(2, chat, text="")
        + b'data: {"choices":[{"index":0,"text":" a"},{"index":1,"text":" b"}]}\n\n'
        + _chunk(3, chat, last=True)
        + b"data: "
        + json.dumps(usage).encode()
        + b"\n\ndata: [DONE]\n\n"
    )


def _consume(pieces: list[bytes], collect: bool = False) -> ClientTrace:
    trace = ClientTrace("1", 0.0, 5, 4)
    c = _Consumer(trace, 0.0, collect)
    c.status = 200
    for p in pieces:
        c.feed(p)
    c.finish()
    return trace


@pytest.mark.parametrize("chat", [False, True])
def test_fast_and_general_paths_agree_for_every_split(chat: bool) -> None:
    raw = _stream(chat)
    reference = _consume([raw.replace(b"\n", b"\r\n")], collect=True)  # \r\n: the general parser
    assert reference.error is None and reference.chunks == 5  # 3 one-choice tokens + 2 choices
    assert (reference.usage_output_tokens, reference.cached_prompt_tokens) == (4, 2)
    assert reference.server_timing == {"first_token_s": 1.0}
    for cut in range(1, len(raw)):
        t = _consume([raw[:cut], raw[cut:]])
        assert (
            t.error,
            t.chunks,
            len(t.token_times_s),
            t.usage_output_tokens,
            t.cached_prompt_tokens,
            t.server_timing,
        ) == (None, 5, 5, 4, 2, {"first_token_s": 1.0}), cut


def test_garbage_and_errors_in_the_fast_path() -> None:
    assert _consume([b'data: {"choices":[{"index":0,"text":" a"}]}\n\ndata: {nope\n\n']).error == "bad_json"
    t = _consume([b'data: {"error":{"message":"boom"}}\n\n'])
    assert t.error == "server_error" and "boom" in t.error_detail
    t = _consume([b'data: {"choices":[{"index":0,"text":" a"}]}\n\ndata: {"choi'])
    assert t.error == "broken_stream" and "unfinished event" in t.error_detail


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def abort(self) -> None:
        pass


async def test_chunked_body_however_split() -> None:
    body = b"".join(_chunk(i, False) for i in range(4))
    wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    wire += b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in [body[:50], body[50:300], body[300:]])
    wire += b"3;ext=1\r\nabc\r\n0\r\n\r\n"
    for cut in [*range(1, len(wire), 7), len(wire)]:
        conn = _Conn(asyncio.get_running_loop())
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        got: list[bytes] = []
        done = conn.begin(b"GET / HTTP/1.1\r\n\r\n", lambda s: None, got.append, 5.0)
        conn.data_received(wire[:cut])
        if cut < len(wire):
            conn.data_received(wire[cut:])
        await asyncio.wait_for(done, 1.0)
        assert b"".join(got) == body + b"abc" and conn.reusable, cut


async def test_in_process_client_stalls_and_failures_become_errors() -> None:
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(10)

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": _chunk(0, False), "more_body": True})
        raise RuntimeError("app bug")

    for app, kind in ((silent, "timeout"), (broken, "broken_stream")):
        trace = ClientTrace("1", 0.0, 5, 4)
        await stream_request(
            AsgiClient(app),
            "http://e/v1/completions",
            {"stream": True},
            trace,
            t0=0.0,
            total_timeout_s=5.0,
            stall_timeout_s=0.05,
        )
        assert trace.error == kind, (kind, trace.error_detail)
        assert kind != "timeout" or "no bytes for 0.05 s" in trace.error_detail
        assert trace.end_s is not None
