"""What the client sees of one request while it runs: every timestamp, the usage counts, and
how it failed (mutable, filled in by the client's callbacks; :meth:`ClientTrace.freeze` gives the
stored :class:`~servecap.results.measured.MeasuredRequest`).

Times are seconds since the run's start on the client's monotonic clock
(:func:`time.perf_counter`). ``scheduled_s`` is when the workload said the request arrives,
``dispatched_s`` when the dispatcher launched it, ``sent_s`` when its bytes went out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from servecap.results.measured import MeasuredRequest

# Error kinds (each request has at most one; None means it completed).
ERROR_KINDS = (
    "http_<status>",  # the server answered with a non-200 status
    "timeout",  # connect, read-stall or total-deadline timeout
    "connect_error",  # refused, unreachable, DNS
    "broken_stream",  # connection dropped or stream ended without [DONE]
    "bad_json",  # a data: line that is not JSON
    "server_error",  # an {"error": ...} object inside the stream
    "client_error",  # anything else raised on the client side (a bug: reported, not hidden)
    "interrupted",  # in flight when the run was interrupted (Ctrl-C): kept, not summarized
)


@dataclass(slots=True)
class ClientTrace:
    request_id: str
    scheduled_s: float
    prompt_tokens: int  # what the workload asked for (replaced by the server's usage)
    output_tokens: int  # ditto (max_tokens)
    prefix_group: int | None = None
    prefix_tokens: int = 0
    user_id: int | None = None
    turn: int = 0
    dispatched_s: float | None = None
    sent_s: float | None = None
    first_token_s: float | None = None
    end_s: float | None = None
    token_times_s: list[float] = field(default_factory=list)
    usage_prompt_tokens: int | None = None
    usage_output_tokens: int | None = None
    cached_prompt_tokens: int | None = None  # None: the server did not report it
    chunks: int = 0  # content-bearing chunks received
    multi_token_chunks: int = 0  # tokens that arrived sharing a chunk with another
    error: str | None = None
    error_detail: str = ""
    http_status: int | None = None
    server_timing: dict[str, Any] | None = None
    trimmed: bool = False  # in the warm-up or cool-down window: stored, not summarized
    answer_text: str = ""  # the streamed text, kept only when asked (chat users' history)
    hash_ids: tuple[int, ...] | None = None  # a block-hash trace's prompt (its text follows the ids)
    hash_block_tokens: int = 512

    @property
    def ok(self) -> bool:
        return self.error is None

    def freeze(self) -> MeasuredRequest:
        """The finished request as the shared, immutable measured record."""
        kw = {name: getattr(self, name) for name in _MEASURED_FIELDS}
        kw["token_times_s"] = tuple(self.token_times_s)
        return MeasuredRequest(**kw)

    @property
    def measured_prompt_tokens(self) -> int:
        return self.usage_prompt_tokens if self.usage_prompt_tokens is not None else self.prompt_tokens

    @property
    def measured_output_tokens(self) -> int:
        if self.usage_output_tokens is not None:
            return self.usage_output_tokens
        return self.chunks

    @property
    def dispatch_lag_s(self) -> float | None:
        return None if self.sent_s is None else self.sent_s - self.scheduled_s

    @property
    def ttft_s(self) -> float | None:
        if self.first_token_s is None or self.sent_s is None:
            return None
        return self.first_token_s - self.sent_s


_MEASURED_FIELDS = tuple(f.name for f in fields(MeasuredRequest))
