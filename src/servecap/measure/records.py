"""Client traces -> the shared :class:`servecap.results.RequestRecord` (one schema for
simulated and measured runs), and the error tally of a run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from servecap.measure.trace import ClientTrace
from servecap.results.measured import MeasuredRequest
from servecap.results.record import RequestRecord


def to_records(
    requests: Sequence[ClientTrace | MeasuredRequest], *, include_trimmed: bool = False
) -> list[RequestRecord]:
    out = []
    for i, t in enumerate(requests):
        if include_trimmed or not t.trimmed:
            out.append((t.freeze() if isinstance(t, ClientTrace) else t).to_record(i))
    return out


def error_counts(requests: Sequence[ClientTrace | MeasuredRequest]) -> dict[str, int]:
    """Requests per error kind (``http_503``, ``timeout``, ``broken_stream``, ...)."""
    return dict(sorted(Counter(t.error for t in requests if t.error is not None).items()))
