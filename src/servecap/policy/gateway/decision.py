"""What a gateway policy decides about a request, as plain values the fleet simulator counts.

Every request ends in exactly one outcome; these are the gateway's part of it: admitted, rejected
with a reason (HTTP 429 or a timeout), queued, answered from the cache, routed to a pool,
overflowed to another pool, or sent to a fallback pool after a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RejectReason = Literal[
    "rpm",  # requests-per-minute bucket empty (429)
    "tpm",  # tokens-per-minute bucket empty (429)
    "concurrency",  # the tenant's in-flight cap reached (429)
    "daily_budget",  # the tenant's tokens for the day spent (429)
    "queue_full",  # the gateway queue is full and the request is in the lowest tier (429)
    "shed",  # pushed out of the queue by a request of a higher tier (429)
    "queue_timeout",  # waited longer than the queue's max wait (429/408)
    "retry_budget",  # failed and no retry budget left (the failure is returned)
    "no_fallback",  # failed and no fallback pool configured (the failure is returned)
]
REJECT_REASONS: tuple[RejectReason, ...] = (
    "rpm",
    "tpm",
    "concurrency",
    "daily_budget",
    "queue_full",
    "shed",
    "queue_timeout",
    "retry_budget",
    "no_fallback",
)
CacheKind = Literal["exact", "semantic"]


@dataclass(frozen=True, slots=True)
class Admit:
    """Passes this stage."""


@dataclass(frozen=True, slots=True)
class Reject:
    """Refused; ``reason`` says why (one of :data:`REJECT_REASONS`)."""

    reason: RejectReason


@dataclass(frozen=True, slots=True)
class Queue:
    """Held at the gateway; try again at ``ready_at_s`` (None: when something completes)."""

    reason: RejectReason
    ready_at_s: float | None


@dataclass(frozen=True, slots=True)
class CacheHit:
    """Answered from the response cache after ``latency_s``, with no GPU work.

    ``false_hit``: a semantic hit that returned another question's answer (a wrong answer);
    ``stale_risk``: a hit on a later turn of a conversation, whose right answer depends on the
    history the cache key did not see."""

    kind: CacheKind
    latency_s: float
    false_hit: bool = False
    stale_risk: bool = False


@dataclass(frozen=True, slots=True)
class Route:
    """Send to ``pool``."""

    pool: str


@dataclass(frozen=True, slots=True)
class Overflow:
    """``from_pool`` is past its threshold (``signal`` above ``threshold``): send to ``to_pool``."""

    from_pool: str
    to_pool: str
    signal: str
    value: float
    threshold: float


@dataclass(frozen=True, slots=True)
class Fallback:
    """``from_pool`` failed or returned 429: retry on ``to_pool`` (``attempt`` 1 is the first retry)."""

    from_pool: str
    to_pool: str
    attempt: int


Decision = Admit | Reject | Queue | CacheHit | Route | Overflow | Fallback
