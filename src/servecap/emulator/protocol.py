"""The OpenAI API as vLLM serves it: request bodies, response chunks and error bodies.

One pydantic model per endpoint lists the fields OpenAI and vLLM accept, with vLLM's ranges;
sampling fields are then ignored (the emulator produces filler text). Where the emulator is
stricter than vLLM it says so with a 400, so a load test that passes against the emulator does
not fail against vLLM for its request bodies:

- unknown fields are rejected, naming the field (vLLM logs and ignores them);
- types are strict: ``"max_tokens": "16"`` or ``true`` is refused (vLLM's models are pydantic's
  lax mode, which turns them into 16 and 1);
- ``Infinity``/``NaN`` are refused for every number (vLLM refuses them where a range is
  checked: temperature, penalties, top_p);
- ``n`` must be 1.

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

import logging
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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


_log = logging.getLogger("servecap.emulator")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


IGNORED_FIELDS_LOGGED = 10
"""Ignored field names one log line shows (a body with 10,000 unknown keys logs 10 and a count)."""


class _Strict(BaseModel):
    """Strict types (no ``"16"`` for 16, no ``true`` for 1), no Infinity/NaN.

    Unknown keys are accepted and ignored with a logged warning, as vLLM's OpenAI server does
    (``OpenAIBaseModel`` in ``vllm/entrypoints/openai/protocol.py``: ``extra="allow"`` and "The
    following fields were present in the request but ignored"): routers add their own fields
    (vLLM's router forwards ``no_stop_trim``, ``return_hidden_states``, ``separate_reasoning``, ...)
    and the real server serves such requests."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _log_ignored(self) -> _Strict:
        if self.model_extra:
            names = sorted(self.model_extra)
            shown = ", ".join(repr(n[:40]) for n in names[:IGNORED_FIELDS_LOGGED])
            more = f" and {len(names) - IGNORED_FIELDS_LOGGED:,} more" if len(names) > IGNORED_FIELDS_LOGGED else ""
            _log.warning("the following fields were present in the request but ignored: %s%s", shown, more)
        return self


class StreamOptions(_Strict):
    """vLLM's defaults: usage on when ``stream_options`` is given; null allowed."""

    include_usage: bool | None = True
    continuous_usage_stats: bool | None = False


TokenId = Annotated[int, Field(ge=0)]


class _Sampling(_Strict):
    """The sampling fields of both endpoints, with vLLM's ranges (``SamplingParams._verify_args``
    in ``vllm/sampling_params.py``: temperature finite in [0, 2], top_p in (0, 1], top_k 0 or
    -1 (off) or at least 1, min_p in [0, 1], presence/frequency penalty in [-2, 2], repetition
    penalty finite and > 0, max_tokens >= 1, 0 <= min_tokens <= max_tokens, seed an int64).
    Accepted and otherwise ignored by the emulator (its output is filler)."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = True
    min_tokens: int = Field(default=0, ge=0)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=1)
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = None
    seed: int | None = Field(default=None, ge=_INT64_MIN, le=_INT64_MAX)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    skip_special_tokens: bool | None = None
    include_stop_str_in_output: bool | None = None
    best_of: int | None = Field(default=None, ge=1, le=1)  # vLLM's V1 engine refused best_of > 1
    servecap_prompt_tokens: int | None = Field(default=None, ge=1)
    servecap_timing: bool = False

    @model_validator(mode="after")
    def _min_within_max(self) -> _Sampling:
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(
                f"min_tokens must be less than or equal to max_tokens={self.max_tokens}, got {self.min_tokens}"
            )
        if (isinstance(self.stop, list) and any(not x for x in self.stop)) or self.stop == "":
            raise ValueError("stop cannot contain an empty string")
        return self


class CompletionRequest(_Sampling):
    """``POST /v1/completions``. ``prompt``: text, texts, token ids (``>= 0``, below the
    model's vocabulary size: checked by the app) or lists of them, as vLLM's
    ``list[Annotated[int, Field(ge=0)]]``. ``best_of`` above 1 is refused, as vLLM's V1 engine
    refused it."""

    prompt: str | list[str] | list[TokenId] | list[list[TokenId]]
    echo: bool | None = False
    suffix: str | None = None
    logprobs: int | None = Field(default=None, ge=-1)


class ContentPart(BaseModel):
    """One part of a chat message's content (text read; images and the rest carried)."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # tool calls, names: carried, not read

    role: Literal["system", "user", "assistant", "tool", "developer", "function"]
    content: str | list[ContentPart] | None = None


class ChatRequest(_Sampling):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None


def prompt_token_ids(req: CompletionRequest) -> list[int]:
    """Every token id a completions prompt gives (none for text)."""
    p = req.prompt
    if isinstance(p, list) and p and isinstance(p[0], int):
        return [x for x in p if isinstance(x, int)]
    if isinstance(p, list) and p and isinstance(p[0], list):
        return [x for part in p if isinstance(part, list) for x in part]
    return []


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
                if part.text is not None:
                    total += estimate_text_tokens(part.text)
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
