"""The emulator's ASGI app: the OpenAI API as vLLM serves it, timed by the engine model.

Routes: ``GET /v1/models``, ``POST /v1/completions``, ``POST /v1/chat/completions`` (streaming
SSE ending in ``data: [DONE]``, or one JSON body), ``GET /metrics`` (Prometheus, vLLM's names),
``GET /health``, ``GET /servecap/stats`` (the emulator's own timing error, JSON),
``GET /servecap/deployment`` (the deployment flags it emulates, for ``servecap bench``).

Every output is ``max_tokens`` tokens of deterministic filler (fixed lengths, as with vLLM's
``ignore_eos``); prompt lengths are counted without a tokenizer (see
:func:`servecap.emulator.protocol.estimate_text_tokens`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from servecap.emulator.driver import Driver, EngineLike, Stream
from servecap.emulator.metrics import EngineMetrics
from servecap.emulator.protocol import (
    ChatRequest,
    CompletionRequest,
    chat_prompt_tokens,
    completion_prompt_tokens,
    error_body,
    filler_text,
    filler_token,
    prompt_key_units,
)


def _err(status: int, message: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param=param), status_code=status)


def prefix_block_hashes(units: list[str] | list[int], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the prompt's full blocks (vLLM's prefix-cache keys: a block's hash
    covers every token before it, so equal hashes mean equal prefixes)."""
    out: list[int] = []
    h = hashlib.blake2b(digest_size=8)
    for i in range(len(units) // block_size):
        h.update(repr(units[i * block_size : (i + 1) * block_size]).encode())
        out.append(int.from_bytes(h.copy().digest(), "little"))
    return tuple(out)


class EmulatorState:
    def __init__(self, *, model_name: str, max_model_len: int, block_size: int, driver: Driver) -> None:
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.block_size = block_size
        self.driver = driver
        self.created = int(time.time())
        self.deployment: dict[str, Any] | None = None  # the emulate flags (engine mode only)
        self._app: Any = None

    def driver_app(self) -> Any:
        """The ASGI app over this state (built once)."""
        if self._app is None:
            self._app = create_app(self)
        return self._app


class TokenStream(Response):
    """Writes one request's tokens as the driver hands them over (SSE or one JSON body)."""

    def __init__(self, state: EmulatorState, stream: Stream, *, chat: bool, sse: bool,
                 include_usage: bool, timing: bool) -> None:
        super().__init__(status_code=200, media_type="text/event-stream" if sse else "application/json")
        self.state, self.stream, self.chat, self.sse = state, stream, chat, sse
        self.include_usage, self.timing = include_usage, timing
        kind = "chatcmpl" if chat else "cmpl"
        self.rid = f"{kind}-{stream.request_id}"

    def _usage(self) -> dict[str, Any]:
        s = self.stream
        u: dict[str, Any] = {"prompt_tokens": s.prompt_tokens, "total_tokens": s.prompt_tokens + s.delivered,
                             "completion_tokens": s.delivered}
        if s.cached_prompt_tokens:
            u["prompt_tokens_details"] = {"cached_tokens": s.cached_prompt_tokens}
        return u

    def _timing(self) -> dict[str, Any]:
        s, t0 = self.stream, self.state.driver.t0
        times = s.token_times_s
        return {"clock": "perf_counter", "received_s": t0 + s.received_s,
                "first_token_s": t0 + times[0] if times else None,
                "end_s": t0 + times[-1] if times else None, "preemptions": s.preemptions,
                "cached_tokens": s.cached_prompt_tokens,
                "token_times_s": [t0 + x for x in times]}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.sse:
            await self._whole(send)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream; charset=utf-8"),
                                (b"cache-control", b"no-cache"), (b"x-request-id", self.rid.encode())]})
        st, driver, s = self.state, self.state.driver, self.stream
        created, model = st.created, json.dumps(st.model_name)
        if self.chat:
            head = f'data: {{"id":"{self.rid}","object":"chat.completion.chunk","created":{created},"model":{model},"choices":[{{"index":0,'
            role = head + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
            await send({"type": "http.response.body", "body": role.encode(), "more_body": True})
            mid, tail, last = '"delta":{"content":"', '"},"logprobs":null,"finish_reason":null}]}\n\n', '"},"logprobs":null,"finish_reason":"length"}]}\n\n'
        else:
            head = f'data: {{"id":"{self.rid}","object":"text_completion","created":{created},"model":{model},"choices":[{{"index":0,'
            mid, tail = '"text":"', '","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
            last = '","logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n'
        clock, t0 = driver.clock, driver.t0
        try:
            while True:
                await s.wait()
                times = s.token_times_s
                n = len(times)
                if n > s.delivered:
                    parts = []
                    for i in range(s.delivered, n):
                        end = s.finished and i == s.output_tokens - 1
                        parts.append(head + mid + filler_token(i) + (last if end else tail))
                    now = clock() - t0
                    for i in range(s.delivered, n):
                        driver.record_lag(now - times[i])
                    s.delivered = n
                    await send({"type": "http.response.body", "body": "".join(parts).encode(), "more_body": True})
                if s.finished and s.delivered >= len(s.token_times_s):
                    break
            out = ""
            if self.include_usage or self.timing:
                obj: dict[str, Any] = {"id": self.rid, "object": "chat.completion.chunk" if self.chat else "text_completion",
                                       "created": created, "model": st.model_name, "choices": [],
                                       "usage": self._usage()}
                if self.timing:
                    obj["servecap_timing"] = self._timing()
                out = "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"
            await send({"type": "http.response.body", "body": (out + "data: [DONE]\n\n").encode(), "more_body": False})
        except OSError:
            driver.abandon(s)
        finally:
            if not s.finished:
                driver.abandon(s)

    async def _whole(self, send: Send) -> None:
        s, st = self.stream, self.state
        while not s.finished:
            await s.wait()
            if s.finished:
                break
            s.delivered = len(s.token_times_s)
            s.waiter = None
            # wait for more: mark all delivered so wait() blocks until a new token
        s.delivered = len(s.token_times_s)
        text = filler_text(s.delivered)
        if self.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "logprobs": None, "finish_reason": "length"}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
            obj = "text_completion"
        body: dict[str, Any] = {"id": self.rid, "object": obj, "created": st.created, "model": st.model_name,
                                "choices": [choice], "usage": self._usage()}
        if self.timing:
            body["servecap_timing"] = self._timing()
        raw = json.dumps(body, separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]})
        await send({"type": "http.response.body", "body": raw, "more_body": False})


def create_app(state: EmulatorState) -> FastAPI:
    """The ASGI app over one emulated engine (the driver starts on the first request)."""
    app = FastAPI(title="servecap emulator", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(404)
    async def _not_found(request: Request, exc: Exception) -> JSONResponse:
        return _err(404, f"no route {request.method} {request.url.path}")

    @app.exception_handler(405)
    async def _bad_method(request: Request, exc: Exception) -> JSONResponse:
        return _err(405, f"method {request.method} not allowed on {request.url.path}")

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{
            "id": state.model_name, "object": "model", "created": state.created, "owned_by": "servecap",
            "root": state.model_name, "parent": None, "max_model_len": state.max_model_len}]}

    @app.get("/metrics")
    async def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(state.driver.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/servecap/stats")
    async def stats() -> dict[str, Any]:
        lags = sorted(state.driver.lags_s)

        def q(p: float) -> float | None:
            return lags[min(len(lags) - 1, int(p * (len(lags) - 1) + 0.5))] if lags else None

        d = state.driver
        return {"tokens": len(lags), "token_lag_p50_s": q(0.5), "token_lag_p99_s": q(0.99),
                "token_lag_max_s": lags[-1] if lags else None, "steps": d.steps,
                "num_running": d.num_running, "num_waiting": d.num_waiting, "open_streams": len(d.streams)}

    @app.get("/servecap/deployment")
    async def deployment() -> Response:
        if state.deployment is None:
            return _err(404, "this emulator runs a fixed-latency reference, not a deployment")
        return JSONResponse(state.deployment)

    @app.post("/servecap/stats/reset")
    async def stats_reset() -> dict[str, Any]:
        state.driver.lags_s.clear()
        return {"ok": True}

    async def _handle(request: Request, chat: bool) -> Response:
        received_s = state.driver.now()  # before parsing: the server's time counts from here
        try:
            raw = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _err(400, "request body is not valid JSON")
        if not isinstance(raw, dict):
            return _err(400, "request body must be a JSON object")
        model_cls: type[ChatRequest] | type[CompletionRequest] = ChatRequest if chat else CompletionRequest
        try:
            req = model_cls.model_validate(raw)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            return _err(400, f"{loc}: {first['msg']}", param=loc or None)
        if req.model != state.model_name:
            return _err(404, f"The model `{req.model}` does not exist.", param="model")
        prompt = chat_prompt_tokens(req) if isinstance(req, ChatRequest) else completion_prompt_tokens(req)
        if prompt <= 0:
            return _err(400, "the prompt is empty", param="prompt")
        max_tokens = req.max_tokens
        if isinstance(req, ChatRequest) and req.max_completion_tokens is not None:
            max_tokens = req.max_completion_tokens
        if max_tokens is None:
            max_tokens = 16 if not chat else max(1, state.max_model_len - prompt)
        if prompt + max_tokens > state.max_model_len:
            return _err(400, f"This model's maximum context length is {state.max_model_len} tokens. However, "
                        f"you requested {prompt + max_tokens} tokens ({prompt} in the messages, "
                        f"{max_tokens} in the completion). Please reduce the length of the messages or completion.",
                        param="max_tokens")
        keys = prefix_block_hashes(prompt_key_units(req), state.block_size)
        rid = state.driver.next_request_id()
        stream = state.driver.submit(rid, prompt, max_tokens, keys or None, received_s)
        if stream is None:
            return _err(503, "the server is overloaded: waiting queue full")
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        return TokenStream(state, stream, chat=chat, sse=req.stream, include_usage=include_usage,
                           timing=req.servecap_timing)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await _handle(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await _handle(request, chat=True)

    return app


MakeRequest = Callable[[str, int, int, Any], Any]


def build_state(engine: EngineLike, make_request: MakeRequest, *, model_name: str, max_model_len: int,
                block_size: int) -> EmulatorState:
    driver = Driver(engine, EngineMetrics(model_name), make_request)
    return EmulatorState(model_name=model_name, max_model_len=max_model_len, block_size=block_size,
                         driver=driver)
