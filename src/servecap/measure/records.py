"""Client traces -> the shared :class:`servecap.results.RequestRecord` (one schema for
simulated and measured runs), and the error tally of a run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from servecap.measure.trace import Trace
from servecap.results.record import RequestRecord


def to_record(trace: Trace, index: int) -> RequestRecord:
    """Times stay on the run's clock; token counts come from the server's usage when given."""
    try:
        rid = int(trace.request_id)
    except ValueError:
        rid = index
    return RequestRecord(
        request_id=rid,
        arrival_s=trace.scheduled_s,
        prompt_tokens=trace.measured_prompt_tokens,
        output_tokens=trace.measured_output_tokens,
        first_token_s=trace.first_token_s,
        end_s=trace.end_s if trace.error is None else None,
        sent_s=trace.sent_s,
        token_times_s=tuple(trace.token_times_s),
        cached_prompt_tokens=trace.cached_prompt_tokens,
        error=trace.error,
        user_id=trace.user_id,
        turn=max(1, trace.turn),
    )


def to_records(traces: Sequence[Trace], *, include_trimmed: bool = False) -> list[RequestRecord]:
    return [to_record(t, i) for i, t in enumerate(traces) if include_trimmed or not t.trimmed]


def error_counts(traces: Sequence[Trace]) -> dict[str, int]:
    """Requests per error kind (``http_503``, ``timeout``, ``broken_stream``, ...)."""
    return dict(sorted(Counter(t.error for t in traces if t.error is not None).items()))
