"""Tenants and request classes in the workload file (pydantic, ``extra="forbid"``).

``tenants: [...]`` splits an open-loop workload into tenants, each with one or more classes of
requests. A tenant takes a ``share`` of the workload's ``arrival`` or has an ``arrival`` of its
own (a rate schedule); a class takes a ``share`` of its tenant's requests and has its own lengths,
shared prefixes, response-cache repeats, SLO targets and priority. See docs/workload.md.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from servecap.workload.spec_parts import Arrival, Dist, PrefixSpec, coerce_dist

_PERCENTILE = re.compile(r"^p(\d{1,2}(\.\d+)?|100)$")


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class SloSpec(_Model):
    """Latency targets as percentiles: ``ttft_s: {p99: 1.0}`` means 99% of the class's requests
    see their first token within 1 s. Metrics: time to first token, time per output token
    (mean over a request's decode), inter-token latency, end-to-end latency, queue time."""

    ttft_s: dict[str, float] | None = None
    tpot_s: dict[str, float] | None = None
    itl_s: dict[str, float] | None = None
    e2e_s: dict[str, float] | None = None
    queue_s: dict[str, float] | None = None

    @field_validator("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s")
    @classmethod
    def _percentiles(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("give at least one percentile target, e.g. {p99: 1.0}")
        for key, target in v.items():
            if not _PERCENTILE.match(key) or not 0 < float(key[1:]) <= 100:
                raise ValueError(f"{key!r} is not a percentile key (p50, p90, p99, p99.9, ...)")
            if target <= 0:
                raise ValueError(f"{key}: the target must be > 0 seconds (got {target:g})")
        return v

    def targets(self) -> tuple[tuple[str, float, float], ...]:
        """``(metric, percentile, max_s)`` for each target, e.g. ``("ttft_s", 99.0, 1.0)``."""
        out: list[tuple[str, float, float]] = []
        for metric in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s"):
            table: dict[str, float] | None = getattr(self, metric)
            for key, target in (table or {}).items():
                out.append((metric, float(key[1:]), float(target)))
        return tuple(out)


class RepeatSpec(_Model):
    """Exact repeats (what an exact-match response cache answers): with probability ``rate`` a
    request is a repeat of one of ``groups`` popular questions (Zipf exponent ``zipf_s``; 0 is
    uniform). Requests of one question have the same ``duplicate_group`` id and identical
    prompt, prefix and output; the first is a miss, the later ones are the cacheable repeats."""

    rate: float = Field(ge=0, le=1)
    groups: int = Field(default=1000, ge=1, le=10_000_000)
    zipf_s: float = Field(default=1.0, ge=0, le=10)


class SessionsSpec(_Model):
    """``count`` users/sessions per tenant; each request carries one ``session_id`` (for session
    routing), picked uniformly or with Zipf popularity ``zipf_s`` (some users are heavier)."""

    count: int = Field(ge=1, le=100_000_000)
    zipf_s: float = Field(default=0.0, ge=0, le=10)


class ClassSpec(_Model):
    """A class of requests (chat, summarise, agent step...) within a tenant. Lengths and
    ``prefix`` default to the workload's top-level ones; ``priority`` (lower is served first)
    to the tenant's."""

    name: str = Field(min_length=1, max_length=64)
    share: float = Field(default=1.0, gt=0)
    prompt_tokens: Dist | None = None
    output_tokens: Dist | None = None
    prefix: PrefixSpec | None = None
    repeats: RepeatSpec | None = None
    slo: SloSpec | None = None
    priority: int | None = Field(default=None, ge=-1_000_000, le=1_000_000)

    @field_validator("prompt_tokens", "output_tokens", mode="before")
    @classmethod
    def _number_is_fixed(cls, v: Any) -> Any:
        return coerce_dist(v)


class TenantSpec(_Model):
    """A tenant (a customer, a team, an app): ``share`` of the workload's ``arrival``, or an
    ``arrival`` of its own (then ``share`` must not be given)."""

    name: str = Field(min_length=1, max_length=64)
    share: float | None = Field(default=None, gt=0)
    arrival: Arrival | None = None
    classes: list[ClassSpec] = Field(default_factory=lambda: [ClassSpec(name="default")], min_length=1)
    sessions: SessionsSpec | None = None
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)

    @model_validator(mode="after")
    def _share_or_arrival(self) -> TenantSpec:
        if self.share is not None and self.arrival is not None:
            raise ValueError("give 'share' (of the workload's arrival) or an 'arrival' of its own, not both")
        names = [c.name for c in self.classes]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"class {dup!r} is named twice")
        if self.arrival is not None and self.arrival.kind in ("trace", "agentic"):
            raise ValueError("a tenant's arrival must be synthetic (not a trace)")
        return self
