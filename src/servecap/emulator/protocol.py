"""The OpenAI API as vLLM serves it: request bodies, response chunks and error bodies.

Request models list the fields OpenAI and vLLM accept; sampling fields are accepted and
ignored (the emulator produces filler text). Unknown fields are rejected with a 400 naming the
field (pydantic ``extra="forbid"``), unlike vLLM, which logs and ignores them.

Non-standard extension fields (documented in docs/measure.md):

- ``servecap_prompt_tokens``: the prompt's token count, used instead of the tokenizer-free
  estimate (the emulator never loads a tokenizer);
- ``servecap_timing``: when true, the final usage chunk carries ``servecap_timing`` with the
  server-side times of the request on the server's ``perf_counter`` clock (received,
  engine-scheduled first token, end and every token's scheduled time), its preemptions and
  prefix-cache hits, so a client can separate its own overhead from the engine's latency and
  ``servecap calibrate`` can fit against the engine's exact step schedule.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CHARS_PER_TOKEN = 4


def estimate_text_tokens(text: str) -> int:
    """Tokenizer-free prompt length: ``ceil(characters / 4)`` (at least 1 for non-empty text).

    OpenAI's rule of thumb ("a token is about 4 characters of English text", OpenAI
    tokenizer help page); exact for the load generator's filler (one 4-character word per
    token), approximate for anything else.
    """
    if not text:
        return 0
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool = False
    continuous_usage_stats: bool = False


class _Sampling(BaseModel):
    """Fields accepted for compatibility and ignored by the emulator."""

    model_config = ConfigDict(extra="forbid")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = True
    min_tokens: int = Field(default=0, ge=0)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    n: int = Field(default=1, ge=1, le=1)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: Any = None
    user: str | None = None
    skip_special_tokens: bool | None = None
    include_stop_str_in_output: bool | None = None
    servecap_prompt_tokens: int | None = Field(default=None, ge=1)
    servecap_timing: bool = False


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int] | list[list[int]]
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # tool calls, names, images: carried, not read

    role: Literal["system", "user", "assistant", "tool", "developer", "function"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None


def completion_prompt_tokens(req: CompletionRequest) -> int:
    """Token count of a completions prompt: token ids count exactly, text by the estimate."""
    if req.servecap_prompt_tokens is not None:
        return req.servecap_prompt_tokens
    p = req.prompt
    if isinstance(p, str):
        return estimate_text_tokens(p)
    if not p:
        return 0
    first = p[0]
    if isinstance(first, int):
        return len(p)
    if isinstance(first, str):
        return estimate_text_tokens(str(first))
    return len(first)


def chat_prompt_tokens(req: ChatRequest) -> int:
    """Token count of a chat prompt: the messages' text by the estimate (no chat template)."""
    if req.servecap_prompt_tokens is not None:
        return req.servecap_prompt_tokens
    total = 0
    for m in req.messages:
        c = m.content
        if isinstance(c, str):
            total += estimate_text_tokens(c)
        elif isinstance(c, list):
            for part in c:
                text = part.get("text")
                if isinstance(text, str):
                    total += estimate_text_tokens(text)
    return total


def prompt_key(req: CompletionRequest | ChatRequest) -> str | list[int]:
    """The prompt as prefix caching compares it: token ids, or the text (whose 4-character
    pieces stand for tokens, as in :func:`estimate_text_tokens`)."""
    if isinstance(req, CompletionRequest):
        p = req.prompt
        if isinstance(p, list) and p and isinstance(p[0], int):
            return [int(x) for x in p]
        if isinstance(p, list) and p and isinstance(p[0], list):
            return [int(x) for x in p[0]]
        return p if isinstance(p, str) else (str(p[0]) if p else "")
    return "".join(m.content if isinstance(m.content, str) else "" for m in req.messages)


def error_body(status: int, message: str, *, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = {
        400: "BadRequestError",
        404: "NotFoundError",
        405: "MethodNotAllowed",
        413: "RequestTooLarge",
        422: "BadRequestError",
        429: "RateLimitError",
        500: "InternalServerError",
        503: "ServiceUnavailableError",
    }.get(status, "Error")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


_FILLER = (" the", " and", " for", " are", " but", " not", " you", " all", " any", " can")


def filler_token(index: int) -> str:
    """Deterministic output text: one 4-character word per token (so ``ceil(len/4)`` counts it)."""
    return _FILLER[index % len(_FILLER)]


def filler_text(num_tokens: int, start: int = 0) -> str:
    return "".join(filler_token(i) for i in range(start, start + num_tokens))
