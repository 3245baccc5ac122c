"""The workload file's schema (pydantic, ``extra="forbid"``): arrivals, lengths, prefixes, users.

A workload is either **open loop** (``arrival``: requests arrive on a schedule regardless of how
fast they are served) or **closed loop** (``users``: N users each send a turn, wait for the
answer, think, and send the next turn). See docs/workload.md for the format with examples.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.mix_spec import TenantSpec
from servecap.workload.schedule_spec import ScheduleArrival
from servecap.workload.spec_parts import (
    Arrival,
    ConstantArrival,
    Dist,
    DiurnalArrival,
    EmpiricalDist,
    ExponentialDist,
    FixedDist,
    GammaArrival,
    LogNormalDist,
    MixtureComponent,
    MixtureDist,
    NormalDist,
    PoissonArrival,
    PrefixSpec,
    TraceArrival,
    UniformDist,
    coerce_dist,
    mean_rate_per_s,
)

SCHEMA: Literal["servecap.workload/1"] = "servecap.workload/1"

__all__ = [  # the pieces re-exported: import them from here or from spec_parts
    "SCHEMA",
    "Arrival",
    "ConstantArrival",
    "Dist",
    "DiurnalArrival",
    "EmpiricalDist",
    "ExponentialDist",
    "FixedDist",
    "GammaArrival",
    "LogNormalDist",
    "MixtureComponent",
    "MixtureDist",
    "NormalDist",
    "PoissonArrival",
    "PrefixSpec",
    "ScheduleArrival",
    "TenantSpec",
    "TraceArrival",
    "UniformDist",
    "UsersSpec",
    "WorkloadSpec",
    "coerce_dist",
]


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


MAX_REQUESTS = 100_000_000
"""Most requests one workload generates (``num_requests``, or ``rate_per_s x duration_s``)."""
MAX_DURATION_S = 365 * 86_400.0
"""Longest simulated span of arrivals: a year."""
MAX_TOKENS = 100_000_000
"""Longest prompt or output a length distribution may give (any model's context is shorter)."""
MAX_THINK_TIME_S = 86_400.0
"""Longest think time (any parameter of its distribution) and users' start spread: a day (the
simulation's work grows with its simulated seconds)."""
MAX_USERS = 1_000_000
"""Most closed-loop users (each holds its own conversation state)."""


def _largest_number(dumped: Any) -> float:
    """The largest number among a distribution's parameters (through mixtures), ``sigma`` and
    weights aside."""
    if isinstance(dumped, dict):
        return max((_largest_number(v) for k, v in dumped.items() if k not in ("sigma", "weight", "std")), default=0.0)
    if isinstance(dumped, list | tuple):
        return max((_largest_number(v) for v in dumped), default=0.0)
    if isinstance(dumped, int | float) and not isinstance(dumped, bool):
        return float(dumped)
    return 0.0


# ---- users and the whole workload ----------------------------------------------------------


class UsersSpec(_Model):
    """Closed loop: ``count`` users, each in conversations of ``turns`` turns. A turn's prompt is
    the shared prefix (if any) + the whole conversation so far + ``prompt_tokens`` new tokens;
    after the answer's last token the user thinks for ``think_time_s`` and sends the next turn.
    A conversation also ends when the next turn would exceed ``max_context_tokens``; the user
    then starts a new one. Users start at times uniform in ``[0, start_spread_s)``
    (default: the mean think time)."""

    count: int = Field(ge=1, le=MAX_USERS)
    think_time_s: Dist = Field(default_factory=lambda: FixedDist(value=30.0))
    turns: Dist = Field(default_factory=lambda: FixedDist(value=5))
    max_context_tokens: int = Field(default=8192, ge=2)
    start_spread_s: float | None = Field(default=None, ge=0, le=MAX_THINK_TIME_S)

    @field_validator("think_time_s", "turns", mode="before")
    @classmethod
    def _number_is_fixed(cls, v: Any) -> Any:
        return coerce_dist(v)

    @field_validator("think_time_s", mode="after")
    @classmethod
    def _bounded_think_time(cls, v: Any) -> Any:
        if _largest_number(v.model_dump()) > MAX_THINK_TIME_S:
            raise ValueError(f"a think time of more than {MAX_THINK_TIME_S:,.0f} s (a day)")
        return v


class WorkloadSpec(_Model):
    """A whole workload. Exactly one of ``arrival`` (open loop) and ``users`` (closed loop).

    Stop conditions: ``num_requests`` (requests generated) and/or ``duration_s`` (no request
    arrives at or after it); at least one is required, except for a trace (replayed whole).
    """

    schema_: Literal["servecap.workload/1"] = Field(default=SCHEMA, alias="schema")
    name: str = ""
    arrival: Arrival | None = None
    users: UsersSpec | None = None
    prompt_tokens: Dist | None = None
    output_tokens: Dist | None = None
    prefix: PrefixSpec | None = None
    tenants: list[TenantSpec] | None = Field(default=None, min_length=1)
    num_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)
    duration_s: float | None = Field(default=None, gt=0, le=MAX_DURATION_S)

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("prompt_tokens", "output_tokens", mode="before")
    @classmethod
    def _number_is_fixed(cls, v: Any) -> Any:
        return coerce_dist(v)

    @field_validator("prompt_tokens", "output_tokens", mode="after")
    @classmethod
    def _bounded_length(cls, v: Any) -> Any:
        if v is not None and _largest_number(v.model_dump()) > MAX_TOKENS:
            raise ValueError(f"a length of more than {MAX_TOKENS:,} tokens")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        if self.tenants is not None:
            return self._consistent_mix(self.tenants)
        if (self.arrival is None) == (self.users is None):
            raise ValueError("give exactly one of 'arrival' (open loop) and 'users' (closed loop)")
        is_trace = isinstance(self.arrival, TraceArrival | AgenticArrival)
        if is_trace:
            if self.prompt_tokens is not None or self.output_tokens is not None:
                what = "a trace" if isinstance(self.arrival, TraceArrival) else "an agentic arrival"
                raise ValueError(f"{what} supplies the lengths: drop 'prompt_tokens'/'output_tokens'")
        else:
            if self.prompt_tokens is None:
                raise ValueError("'prompt_tokens' is required")
            if self.output_tokens is None:
                raise ValueError("'output_tokens' is required")
            if self.num_requests is None and self.duration_s is None:
                raise ValueError("give 'num_requests' or 'duration_s' (or both) to end the run")
            self._bounded_size()
        return self

    def _bounded_size(self) -> None:
        """The open loop's size from its numbers, before any request is drawn: at most
        :data:`MAX_REQUESTS` requests (``rate_per_s x duration_s``) over at most
        :data:`MAX_DURATION_S` (``num_requests / rate_per_s``)."""
        rate = mean_rate_per_s(self.arrival)
        if rate is None:
            return
        if self.duration_s is not None and self.num_requests is None and rate * self.duration_s > MAX_REQUESTS:
            raise ValueError(
                f"rate_per_s x duration_s = {rate:g} x {self.duration_s:g} = {rate * self.duration_s:.3g} requests, "
                f"over the limit of {MAX_REQUESTS:,}: lower the rate or the duration, or give num_requests"
            )
        if self.num_requests is not None and self.duration_s is None and self.num_requests / rate > MAX_DURATION_S:
            raise ValueError(
                f"num_requests / rate_per_s = {self.num_requests:,} / {rate:g} = {self.num_requests / rate:.3g} s "
                f"of arrivals, over the limit of {MAX_DURATION_S:,.0f} s (a year): raise the rate or give duration_s"
            )

    def _consistent_mix(self, tenants: list[TenantSpec]) -> WorkloadSpec:
        if self.users is not None:
            raise ValueError("'tenants' split an open-loop workload: drop 'users'")
        if isinstance(self.arrival, TraceArrival | AgenticArrival):
            raise ValueError("'tenants' need a synthetic arrival process (not a trace or agentic sessions)")
        names = [t.name for t in tenants]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"tenant {dup!r} is named twice")
        shared = [t.name for t in tenants if t.arrival is None]
        if shared and self.arrival is None:
            raise ValueError(f"tenant {shared[0]!r} has no 'arrival' of its own: give the workload's 'arrival'")
        if not shared and self.arrival is not None:
            raise ValueError("every tenant has its own 'arrival': drop the workload's 'arrival'")
        for t in tenants:
            for c in t.classes:
                for what, own, top in (
                    ("prompt_tokens", c.prompt_tokens, self.prompt_tokens),
                    ("output_tokens", c.output_tokens, self.output_tokens),
                ):
                    if own is None and top is None:
                        raise ValueError(f"tenant {t.name!r} class {c.name!r} has no '{what}' (nor has the workload)")
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("give 'num_requests' or 'duration_s' (or both) to end the run")
        return self

    @property
    def closed_loop(self) -> bool:
        return self.users is not None
