"""What a load generator saw of one request: the measured counterpart of a simulated record.

Times are seconds since the run's start on the client's monotonic clock. ``scheduled_s`` is
when the workload said the request arrives, ``dispatched_s`` when the load generator launched
it, ``sent_s`` when its bytes went out. :meth:`MeasuredRequest.to_record` gives the shared
:class:`~servecap.results.record.RequestRecord` the summary reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servecap.results.record import RequestRecord


@dataclass(frozen=True, slots=True)
class MeasuredRequest:
    request_id: str
    scheduled_s: float
    prompt_tokens: int  # what the workload asked for (the server's usage, when given, wins)
    output_tokens: int  # ditto (max_tokens)
    prefix_group: int | None = None
    prefix_tokens: int = 0
    user_id: int | None = None
    turn: int = 0
    dispatched_s: float | None = None
    sent_s: float | None = None
    first_token_s: float | None = None
    end_s: float | None = None
    token_times_s: tuple[float, ...] = ()
    usage_prompt_tokens: int | None = None
    usage_output_tokens: int | None = None
    cached_prompt_tokens: int | None = None  # None: the server did not report it
    chunks: int = 0  # content-bearing chunks received
    multi_token_chunks: int = 0  # tokens that arrived sharing a chunk with another
    error: str | None = None
    error_detail: str = ""
    http_status: int | None = None
    server_timing: dict[str, Any] | None = None
    trimmed: bool = False  # warm-up, cool-down, or cut off by an interrupt: stored, not summarized

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def measured_prompt_tokens(self) -> int:
        return self.usage_prompt_tokens if self.usage_prompt_tokens is not None else self.prompt_tokens

    @property
    def measured_output_tokens(self) -> int:
        return self.usage_output_tokens if self.usage_output_tokens is not None else self.chunks

    @property
    def ttft_s(self) -> float | None:
        """First token - sent (the server's part; the record's TTFT counts from the schedule)."""
        if self.first_token_s is None or self.sent_s is None:
            return None
        return self.first_token_s - self.sent_s

    def to_record(self, index: int) -> RequestRecord:
        """The shared record: times on the run's clock, token counts from the server's usage
        when given; ``index`` is the id when the request id is not an integer."""
        try:
            rid = int(self.request_id)
        except ValueError:
            rid = index
        return RequestRecord(
            request_id=rid,
            arrival_s=self.scheduled_s,
            prompt_tokens=self.measured_prompt_tokens,
            output_tokens=self.measured_output_tokens,
            first_token_s=self.first_token_s,
            end_s=self.end_s if self.error is None else None,
            sent_s=self.sent_s,
            token_times_s=self.token_times_s,
            cached_prompt_tokens=self.cached_prompt_tokens or 0,
            error=self.error,
            user_id=self.user_id,
            turn=max(1, self.turn),
        )
