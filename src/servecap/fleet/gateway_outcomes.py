"""What the gateway stage counts: one outcome per request, per tenant, and the decisions on the way.

Outcomes (each request has exactly one; their sum is the number of arrivals):

| outcome | meaning |
|---|---|
| ``completed`` | served by a replica or an external provider |
| ``cache_hit_exact`` / ``cache_hit_semantic`` | answered from the response cache (no GPU work) |
| ``rate_limited_rpm`` / ``_tpm`` / ``_concurrency`` / ``_daily_budget`` | refused with HTTP 429 |
| ``queue_full`` / ``shed`` / ``queue_timeout`` | refused by the gateway queue |
| ``failed`` | every attempt failed (the record's ``error`` says how the last one did) |

Decisions (counted, not outcomes: the request goes on): ``overflowed``, ``fell_back``,
``queued_for_limit`` (waited for its tenant's limit), ``queued_at_gateway`` (waited for a replica
slot), ``false_hit`` and ``stale_risk`` (cache hits that may be wrong answers).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

OUTCOMES: tuple[str, ...] = (
    "completed",
    "cache_hit_exact",
    "cache_hit_semantic",
    "rate_limited_rpm",
    "rate_limited_tpm",
    "rate_limited_concurrency",
    "rate_limited_daily_budget",
    "queue_full",
    "shed",
    "queue_timeout",
    "failed",
)
DECISIONS: tuple[str, ...] = (
    "overflowed",
    "fell_back",
    "queued_for_limit",
    "queued_at_gateway",
    "false_hit",
    "stale_risk",
)
NO_TENANT = "-"


@dataclass(slots=True)
class GatewayCounts:
    """Per-tenant counters (tenant ``-``: requests without one)."""

    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    decisions: dict[str, Counter[str]] = field(default_factory=dict)
    arrivals: Counter[str] = field(default_factory=Counter)

    def arrive(self, tenant: str | None) -> None:
        self.arrivals[tenant or NO_TENANT] += 1

    def outcome(self, tenant: str | None, name: str) -> None:
        assert name in OUTCOMES, name
        self.outcomes.setdefault(tenant or NO_TENANT, Counter())[name] += 1

    def decision(self, tenant: str | None, name: str) -> None:
        assert name in DECISIONS, name
        self.decisions.setdefault(tenant or NO_TENANT, Counter())[name] += 1

    def total(self, name: str) -> int:
        return sum(c[name] for c in self.outcomes.values()) + sum(c[name] for c in self.decisions.values())


@dataclass(frozen=True, slots=True)
class GatewayStats:
    """The gateway's part of a fleet result."""

    outcomes_by_tenant: dict[str, dict[str, int]]
    decisions_by_tenant: dict[str, dict[str, int]]
    arrivals_by_tenant: dict[str, int]
    provider_requests: dict[str, int]  # completed by each external provider
    provider_cost_usd: float
    served_ids: frozenset[int]  # requests served by a replica or a provider (not the cache)

    def outcome_total(self, name: str) -> int:
        return sum(c.get(name, 0) for c in self.outcomes_by_tenant.values())

    def decision_total(self, name: str) -> int:
        return sum(c.get(name, 0) for c in self.decisions_by_tenant.values())
