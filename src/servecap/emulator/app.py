"""The emulator's ASGI app: the OpenAI API as vLLM serves it, timed by the engine model.

Routes: ``GET /v1/models``, ``POST /v1/completions``, ``POST /v1/chat/completions`` (streaming
SSE ending in ``data: [DONE]``, or one JSON body), ``GET /metrics`` (Prometheus, vLLM's names),
``GET /health``, ``GET /servecap/stats`` (the emulator's own timing error, JSON),
``GET /servecap/deployment`` (the deployment flags it emulates, for ``servecap bench``),
``GET /openapi.json``; ``POST /servecap/stats/reset`` only with ``enable_control_endpoints``.

Every error, malformed or too deeply nested JSON included, is answered in OpenAI's shape
(``{"error": {...}}``); a client that disconnects mid-request has its request aborted in the
engine (its KV blocks freed), as vLLM does.

Every output is ``max_tokens`` tokens of deterministic filler (fixed lengths, as with vLLM's
``ignore_eos``); prompt lengths are counted without a tokenizer (see
:func:`servecap.emulator.protocol.estimate_text_tokens`).

The two completion routes are plain ASGI (:class:`EmulatorApp` answers them before FastAPI,
which serves the rest): the request is parsed once (pydantic, for the error messages), and
the driver writes each token's chunk straight to the connection's ASGI ``send``: the chunk is
pre-encoded bytes (a per-request head, then one of ten fixed tails) and the ``send`` coroutine
is run to completion on the spot when it does not block, which with uvicorn is almost always
(it only waits when the socket's write buffer is full; then a task finishes that write and
later chunks queue behind it, in order).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from servecap.emulator.driver import Driver, Stream
from servecap.emulator.engine_port import EmulatedEngine
from servecap.emulator.metrics import EngineMetrics
from servecap.emulator.pd import MAX_ROOM, MAX_TP, PdRefused, PdRole, bootstrap_target
from servecap.emulator.protocol import (
    ChatRequest,
    CompletionRequest,
    chat_prompt_tokens,
    completion_prompt_tokens,
    error_body,
    filler_text,
    filler_token,
    prompt_key,
    prompt_token_ids,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_FILLER_PERIOD = 10  # filler_token(i) repeats every 10 tokens


def _err(status: int, message: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param=param), status_code=status)


def prefix_block_hashes(units: str | list[int], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the prompt's full blocks (vLLM's prefix-cache keys: a block's hash
    covers every token before it, so equal hashes mean equal prefixes). ``units``: token ids,
    or text, whose ``block_size`` 4-character pieces make a block."""
    out: list[int] = []
    h = hashlib.blake2b(digest_size=8)
    if isinstance(units, str):
        width = 4 * block_size
        data = units.encode("utf-8", "surrogatepass")
        if len(data) != len(units):  # not ASCII: slice the text, not its bytes
            for i in range(len(units) // width):
                h.update(units[i * width : (i + 1) * width].encode("utf-8", "surrogatepass"))
                out.append(int.from_bytes(h.copy().digest(), "little"))
            return tuple(out)
        for i in range(len(data) // width):
            h.update(data[i * width : (i + 1) * width])
            out.append(int.from_bytes(h.copy().digest(), "little"))
        return tuple(out)
    for i in range(len(units) // block_size):
        h.update(repr(units[i * block_size : (i + 1) * block_size]).encode())
        out.append(int.from_bytes(h.copy().digest(), "little"))
    return tuple(out)


class EmulatorState:
    """One emulated server. ``vocab_size``: prompt token ids must be below it (None: not
    checked); ``enable_control_endpoints``: serve ``POST /servecap/stats/reset`` (off by
    default: a control endpoint changes server state and is never open unless asked for)."""

    def __init__(
        self,
        *,
        model_name: str,
        max_model_len: int,
        block_size: int,
        driver: Driver,
        vocab_size: int | None = None,
        enable_control_endpoints: bool = False,
    ) -> None:
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.block_size = block_size
        self.driver = driver
        self.vocab_size = vocab_size
        self.enable_control_endpoints = enable_control_endpoints
        self.created = int(time.time())
        self.deployment: dict[str, Any] | None = None  # the emulate flags (engine mode only)
        self.pd: PdRole | None = None  # a P/D role (servecap.emulator.pd)
        self.pd_client: Any = None  # the decode role's HTTP client to the prefill servers
        self._app: Any = None

    def driver_app(self) -> Any:
        """The ASGI app over this state (built once)."""
        if self._app is None:
            self._app = create_app(self)
        return self._app


# ---- writing a stream ------------------------------------------------------------------------


def _tails(chat: bool) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """The bytes after a chunk's per-request head, for filler token i % 10: (mid, last)."""
    if chat:
        mid, tail = '"delta":{"content":"', '"},"logprobs":null,"finish_reason":null}]}\n\n'
        last = '"},"logprobs":null,"finish_reason":"length"}]}\n\n'
    else:
        mid, tail = '"text":"', '","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
        last = '","logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n'
    words = [filler_token(i) for i in range(_FILLER_PERIOD)]
    return (tuple((mid + w + tail).encode() for w in words), tuple((mid + w + last).encode() for w in words))


_TAILS = {True: _tails(True), False: _tails(False)}
_DONE = b"data: [DONE]\n\n"


class _Resume:
    """Await the rest of a coroutine that was started by hand and suspended (``yield from``
    written out, so the task that awaits this drives it exactly as if it had awaited it)."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro, self._first = coro, first

    def __await__(self) -> Generator[Any, Any, None]:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # cancellation: hand it to the coroutine
                try:
                    value = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    value = coro.send(sent)
                except StopIteration:
                    return


def _usage(s: Stream) -> dict[str, Any]:
    n = len(s.token_times_s)
    u: dict[str, Any] = {"prompt_tokens": s.prompt_tokens, "total_tokens": s.prompt_tokens + n, "completion_tokens": n}
    if s.cached_prompt_tokens:
        u["prompt_tokens_details"] = {"cached_tokens": s.cached_prompt_tokens}
    return u


_TIMES = "__servecap_token_times__"


def _timing(s: Stream, t0: float) -> dict[str, Any]:
    """The ``servecap_timing`` object; its ``token_times_s`` is a placeholder that
    :func:`_dumps` fills (hundreds of floats: ``%.9f`` is half the cost of ``repr``)."""
    times = s.token_times_s
    return {
        "clock": "perf_counter",
        "received_s": t0 + s.received_s,
        "first_token_s": t0 + times[0] if times else None,
        "end_s": t0 + times[-1] if times else None,
        "preemptions": s.preemptions,
        "cached_tokens": s.cached_prompt_tokens,
        "token_times_s": _TIMES,
    }


def _dumps(obj: dict[str, Any], s: Stream, t0: float) -> bytes:
    text = json.dumps(obj, separators=(",", ":"))
    if _TIMES in text:
        times = ",".join(["%.9f" % (t0 + x) for x in s.token_times_s])
        text = text.replace(f'"{_TIMES}"', f"[{times}]", 1)
    return text.encode()


class SseWriter:
    """One streaming response: the driver calls :meth:`token` per token and :meth:`finish`
    at the end; chunks go to ``send`` at once, in order."""

    __slots__ = ("_closing", "_final", "_head", "_last", "_mid", "_pending", "_send", "done")

    def __init__(self, send: Send, head: bytes, chat: bool, final: Callable[[Stream], bytes]) -> None:
        self._send, self._head, self._final = send, head, final
        self._mid, self._last = _TAILS[chat]
        self._pending: list[bytes] | None = []  # buffered until the response has started
        self._closing = False
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def token(self, stream: Stream, index: int) -> None:
        tails = self._last if index >= stream.output_tokens - 1 else self._mid
        data = self._head + tails[index % _FILLER_PERIOD]
        if self._pending is not None:  # not started, or a write is blocked: queue behind it
            self._pending.append(data)
            return
        self._write(data, True)

    def finish(self, stream: Stream) -> None:
        if not self._closing:
            self._closing = True
            if self._pending is not None:
                self._pending.append(self._final(stream))
            else:
                self._write(self._final(stream), False)

    def _write(self, data: bytes, more: bool) -> None:
        coro = self._send({"type": "http.response.body", "body": data, "more_body": more})
        try:
            waiting = coro.send(None)  # type: ignore[attr-defined]
        except StopIteration:  # written (the common case)
            if not more:
                self._resolve()
            return
        except Exception:  # the connection is gone
            coro.close()  # type: ignore[attr-defined]
            self._resolve()
            return
        # the transport's buffer is full: finish this write in a task, queue later chunks
        self._pending = []
        asyncio.get_running_loop().create_task(self._complete(_Resume(coro, waiting)))  # type: ignore[arg-type]

    async def _complete(self, rest: _Resume) -> None:
        try:
            await rest
            await self.flush()
        except Exception:
            self._resolve()

    async def flush(self) -> None:
        """Write what was queued, then go back to writing directly."""
        pending = self._pending
        while pending:
            data = b"".join(pending)
            pending.clear()
            more = not self._closing
            await self._send({"type": "http.response.body", "body": data, "more_body": more})
        self._pending = None
        if self._closing:
            self._resolve()

    def _resolve(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class _WholeWriter:
    """A non-streaming response: the body is built at the end."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def token(self, stream: Stream, index: int) -> None:
        pass

    def finish(self, stream: Stream) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _send_json(send: Send, status: int, obj: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw, "more_body": False})


async def _send_err(send: Send, status: int, message: str, param: str | None = None) -> None:
    await _send_json(send, status, error_body(status, message, param=param))


async def _read_body(receive: Receive) -> bytes | None:
    """The request body; None when the client left first."""
    parts: list[bytes] = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None
        parts.append(msg.get("body", b""))
        if not msg.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone (``http.disconnect``; uvicorn also sends it once the
    response is complete, when the request has finished anyway)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _until_done(done: asyncio.Future[None], watcher: asyncio.Future[None]) -> bool:
    """Wait for the response to be complete (True) or the client to leave first (False)."""
    if not done.done():
        await asyncio.wait((done, watcher), return_when=asyncio.FIRST_COMPLETED)
    return done.done()


def validation_message(err: ValidationError) -> tuple[str, str | None]:
    """One line for a pydantic error, naming the field: the most specific of its errors (a
    broken range rather than a type mismatch with some other member of a union), with the
    union members' tags left out of the field's path."""
    errors = err.errors(include_url=False)

    def rank(e: Any) -> tuple[int, int]:
        generic = e["type"].endswith("_type") or e["type"] in ("union_tag_invalid", "literal_error")
        return (0 if generic else 1, len(e["loc"]))

    best = max(errors, key=rank)
    loc = [str(p) for p in best["loc"] if not (isinstance(p, str) and ("[" in p or p in _TAGS))]
    field = ".".join(loc)
    if best["type"] == "json_invalid":
        return f"request body is not valid JSON: {best['ctx'].get('error', best['msg'])}", None
    return (f"{field}: {best['msg']}" if field else f"request body: {best['msg']}"), field or None


_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "constrained-int", "constrained-float"})


class Completions:
    """``POST /v1/completions`` and ``POST /v1/chat/completions`` as raw ASGI."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self._model_json = json.dumps(state.model_name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send, chat: bool) -> None:
        st = self.state
        driver = st.driver
        received_s = driver.now()  # before parsing: the server's time counts from here
        body = await _read_body(receive)
        if body is None:
            return
        model_cls: type[ChatRequest] | type[CompletionRequest] = ChatRequest if chat else CompletionRequest
        try:
            req = model_cls.model_validate_json(body)
        except ValidationError as err:
            message, param = validation_message(err)
            await _send_err(send, 400, message, param=param)
            return
        if isinstance(req, CompletionRequest) and st.vocab_size is not None:
            ids = prompt_token_ids(req)
            if ids and max(ids) >= st.vocab_size:
                await _send_err(
                    send, 400, f"Token id {max(ids)} is out of vocabulary (vocab_size {st.vocab_size})", param="prompt"
                )
                return
        if req.model is not None and req.model != st.model_name:
            await _send_err(send, 404, f"The model `{req.model}` does not exist.", param="model")
            return
        prompt = chat_prompt_tokens(req) if isinstance(req, ChatRequest) else completion_prompt_tokens(req)
        if prompt <= 0:
            await _send_err(send, 400, "the prompt is empty", param="prompt")
            return
        max_tokens = req.max_tokens
        if isinstance(req, ChatRequest) and req.max_completion_tokens is not None:
            max_tokens = req.max_completion_tokens
        max_tokens_param = max_tokens
        if max_tokens is None:
            max_tokens = 16 if not chat else max(1, st.max_model_len - prompt)
        pd, room = st.pd, None
        if pd is not None:
            extra = req.model_extra or {}
            room = extra.get("bootstrap_room")
            if pd.role == "prefill":
                max_tokens = 1  # a prefill server samples the first token only
            elif not isinstance(room, int) or extra.get("bootstrap_host") is None or "bootstrap_port" not in extra:
                await _send_err(
                    send,
                    400,
                    "a decode server needs bootstrap_host, bootstrap_port and bootstrap_room (a P/D router in front)",
                    param="bootstrap_room",
                )
                return
            else:
                try:  # the peer is checked before any work (never a URL built from the body)
                    bootstrap_target(extra.get("bootstrap_host"), extra.get("bootstrap_port"), pd.peers)
                except PdRefused as err:
                    await _send_err(send, err.status, err.message, param=err.param)
                    return
        if prompt + max_tokens > st.max_model_len:
            await _send_err(
                send,
                400,
                f"This model's maximum context length is {st.max_model_len} tokens. "
                f"However, you requested {prompt + max_tokens} tokens ({prompt} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or "
                "completion.",
                param="max_tokens",
            )
            return
        keys = prefix_block_hashes(prompt_key(req), st.block_size)
        transferred = pd is not None and pd.role == "decode"
        if transferred:
            assert pd is not None and isinstance(room, int)
            if st.pd_client is None:
                import httpx

                st.pd_client = httpx.AsyncClient()
            extra = req.model_extra or {}
            try:
                await pd.receive(st.pd_client, extra.get("bootstrap_host"), extra.get("bootstrap_port"), room, prompt)
            except PdRefused as err:  # the prefill side refused, failed or never came: one line
                await _send_err(send, err.status, err.message, param=err.param)
                return
        rid_num = driver.next_request_id()
        wait = driver.admission_wait_s(received_s)
        if wait > 0:  # the per-request server cost vLLM's API server adds (Driver.request_overhead_s)
            await asyncio.sleep(wait)
        stream = driver.submit(
            rid_num,
            prompt,
            max_tokens,
            keys or None,
            # a decode server's request reaches the engine when its KV has landed, not when the
            # router sent it (an earlier time would lay its steps in the past: a burst of tokens)
            None if wait > 0 or transferred else received_s,
            max_tokens_param=max_tokens_param,
            transferred=transferred,
        )
        if stream is not None:
            stream.received_s = received_s  # the server's TTFT counts from its receipt, as vLLM's
        if stream is None:
            await _send_err(send, 503, "the server is overloaded: waiting queue full")
            return
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{rid_num}"
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            if req.stream:
                await self._stream(send, stream, rid, chat, include_usage, req.servecap_timing, watcher)
            else:
                await self._whole(send, stream, rid, chat, req.servecap_timing, watcher)
        finally:
            watcher.cancel()
            if not stream.finished:
                driver.abandon(stream)
        if pd is not None and pd.role == "prefill" and isinstance(room, int) and stream.finished:
            pd.prefilled(room, prompt)

    async def _stream(
        self,
        send: Send,
        stream: Stream,
        rid: str,
        chat: bool,
        include_usage: bool,
        timing: bool,
        watcher: asyncio.Future[None],
    ) -> None:
        st = self.state
        obj_name = "chat.completion.chunk" if chat else "text_completion"
        head = (
            f'data: {{"id":"{rid}","object":"{obj_name}","created":{st.created},'
            f'"model":{self._model_json},"choices":[{{"index":0,'
        ).encode()
        t0 = st.driver.t0

        def final(s: Stream) -> bytes:
            if not (include_usage or timing):
                return _DONE
            obj: dict[str, Any] = {
                "id": rid,
                "object": obj_name,
                "created": st.created,
                "model": st.model_name,
                "choices": [],
                "usage": _usage(s),
            }
            if timing:
                obj["servecap_timing"] = _timing(s, t0)
            return b"data: " + _dumps(obj, s, t0) + b"\n\n" + _DONE

        writer = SseWriter(send, head, chat, final)
        stream.writer = writer  # tokens from now on are queued until the head is out
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"x-request-id", rid.encode()),
                ],
            }
        )
        if chat:
            role = head + b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
            pending = writer._pending
            assert pending is not None
            pending.insert(0, role)
        await writer.flush()
        if not await _until_done(writer.done, watcher):
            return

    async def _whole(
        self, send: Send, stream: Stream, rid: str, chat: bool, timing: bool, watcher: asyncio.Future[None]
    ) -> None:
        st = self.state
        writer = _WholeWriter()
        stream.writer = writer
        if not await _until_done(writer.done, watcher):
            return
        text = filler_text(len(stream.token_times_s))
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "length",
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
            obj = "text_completion"
        body: dict[str, Any] = {
            "id": rid,
            "object": obj,
            "created": st.created,
            "model": st.model_name,
            "choices": [choice],
            "usage": _usage(stream),
        }
        if timing:
            body["servecap_timing"] = _timing(stream, st.driver.t0)
        raw = _dumps(body, stream, st.driver.t0)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": raw, "more_body": False})


class _Route:
    """One completion route as an ASGI endpoint for the FastAPI router (so other methods on
    the path get FastAPI's 405)."""

    def __init__(self, handler: Completions, chat: bool) -> None:
        self.handler, self.chat = handler, chat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handler(scope, receive, send, self.chat)


class EmulatorApp:
    """The ASGI app: the completion routes directly, everything else through FastAPI."""

    def __init__(self, state: EmulatorState, api: FastAPI, completions: Completions) -> None:
        self.state, self.api, self.completions = state, api, completions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            await self.api(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            if scope["method"] == "POST":
                path = scope["path"]
                if path == "/v1/completions":
                    await self.completions(scope, receive, tracked, False)
                    return
                if path == "/v1/chat/completions":
                    await self.completions(scope, receive, tracked, True)
                    return
            await self.api(scope, receive, tracked)
        except Exception as err:  # a bug must still answer in OpenAI's shape, never a bare 500
            if started:
                raise
            await _send_err(send, 500, f"internal error: {type(err).__name__}")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """A server process (uvicorn runs the lifespan; in-process tests do not): the garbage
        collector is taken in hand (:meth:`Driver.manage_gc`)."""
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                self.state.driver.manage_gc()
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def create_app(state: EmulatorState) -> EmulatorApp:
    """The ASGI app over one emulated engine (the driver starts on the first request)."""
    from fastapi.exceptions import RequestValidationError
    from starlette.routing import Route

    app = FastAPI(title="servecap emulator", docs_url=None, redoc_url=None, openapi_url=None)
    completions = Completions(state)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = ".".join(str(p) for p in first["loc"])
        return _err(400, f"{loc}: {first['msg']}", param=loc or None)

    @app.exception_handler(404)
    async def _not_found(request: Request, exc: Exception) -> JSONResponse:
        return _err(404, f"no route {request.method} {request.url.path}")

    @app.exception_handler(405)
    async def _bad_method(request: Request, exc: Exception) -> JSONResponse:
        return _err(405, f"method {request.method} not allowed on {request.url.path}")

    if state.pd is not None and state.pd.role == "prefill":
        pd = state.pd

        from fastapi import Header, Query
        from fastapi import Path as PathParam

        Room = PathParam(ge=0, le=MAX_ROOM)

        async def _bootstrap(authorization: str | None, work: Any) -> Any:
            if not pd.authorized(authorization):
                return _err(401, "the bootstrap endpoints need the pair's --pd-secret", param="authorization")
            try:
                return await work()
            except PdRefused as err:
                return _err(err.status, err.message, param=err.param)

        @app.get("/servecap/pd/ready/{room}", response_model=None)
        async def pd_ready(room: int = Room, authorization: str | None = Header(default=None)) -> Any:
            """Wait for the room's prefill (bounded): its prompt tokens (servecap.emulator.pd)."""

            async def work() -> dict[str, Any]:
                return {"prompt_tokens": await pd.ready(room)}

            return await _bootstrap(authorization, work)

        @app.get("/servecap/pd/kv/{room}", response_model=None)
        async def pd_kv(
            room: int = Room,
            tp: int = Query(default=1, ge=1, le=MAX_TP),
            bytes_per_token_per_gpu: int = Query(default=0, ge=0, le=2**40),
            hbm: float = Query(default=0.0, ge=0.0, le=1e16, allow_inf_nan=False),
            authorization: str | None = Header(default=None),
        ) -> Any:
            """The bootstrap endpoint: the room's KV, once prefilled and sent (servecap.emulator.pd)."""
            return await _bootstrap(authorization, lambda: pd.send(room, tp, bytes_per_token_per_gpu, hbm))

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": state.model_name,
                    "object": "model",
                    "created": state.created,
                    "owned_by": "servecap",
                    "root": state.model_name,
                    "parent": None,
                    "max_model_len": state.max_model_len,
                }
            ],
        }

    @app.get("/metrics")
    async def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(state.driver.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/servecap/stats")
    async def stats() -> dict[str, Any]:
        d = state.driver
        lags, steps = sorted(d.lags_s), sorted(d.step_lags_s)

        def q(xs: list[float], p: float) -> float | None:
            return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))] if xs else None

        return {
            "tokens": len(lags),
            "token_lag_p50_s": q(lags, 0.5),
            "token_lag_p99_s": q(lags, 0.99),
            "token_lag_max_s": lags[-1] if lags else None,
            "step_lag_p50_s": q(steps, 0.5),
            "step_lag_p99_s": q(steps, 0.99),
            "write_s_per_token": d.write_s / d.writes if d.writes else None,
            "steps": d.steps,
            "num_running": d.num_running,
            "num_waiting": d.num_waiting,
            "open_streams": len(d.streams),
        }

    @app.get("/servecap/deployment")
    async def deployment() -> Response:
        if state.deployment is None:
            return _err(404, "this emulator runs a fixed-latency reference, not a deployment")
        return JSONResponse(state.deployment)

    if state.enable_control_endpoints:

        @app.post("/servecap/stats/reset")
        async def stats_reset() -> dict[str, Any]:
            d = state.driver
            d.lags_s.clear()
            d.step_lags_s.clear()
            d.write_s, d.writes = 0.0, 0
            return {"ok": True}

    @app.get("/openapi.json")
    async def openapi() -> dict[str, Any]:
        from servecap.emulator.openapi import openapi_schema

        return openapi_schema(app)

    app.router.routes.append(Route("/v1/completions", _Route(completions, False), methods=["POST"]))
    app.router.routes.append(Route("/v1/chat/completions", _Route(completions, True), methods=["POST"]))
    return EmulatorApp(state, app, completions)


def build_state(
    engine: EmulatedEngine,
    *,
    model_name: str,
    max_model_len: int,
    block_size: int,
    vocab_size: int | None = None,
    cache_config: dict[str, str] | None = None,
    enable_control_endpoints: bool = False,
    request_overhead_s: float = 0.0,
) -> EmulatorState:
    metrics = EngineMetrics(model_name, max_model_len=max_model_len, cache_config=cache_config)
    driver = Driver(engine, metrics, request_overhead_s=request_overhead_s)
    return EmulatorState(
        model_name=model_name,
        max_model_len=max_model_len,
        block_size=block_size,
        driver=driver,
        vocab_size=vocab_size,
        enable_control_endpoints=enable_control_endpoints,
    )
