"""Per-tenant rate limits and quotas: requests/min, tokens/min, concurrency, tokens/day.

The settings follow the AI gateways users run: LiteLLM's per key/user/team ``rpm_limit``,
``tpm_limit`` and ``max_parallel_requests``; APISIX's ``ai-rate-limiting`` ``limit_strategy``
(``total_tokens``, ``prompt_tokens``, ``completion_tokens``); Kong's AI Rate Limiting Advanced
limits per window. Two behaviours of real gateways are options, because users trip on them:

- ``charge_at="completion"``: token limits are charged when the response completes (its token
  count is known only then), and a request is admitted while the tenant is not in debt. Several
  admitted streams can overshoot the limit; the next requests pay the debt (LiteLLM counts TPM
  after the response, BerriAI/litellm#18730; Envoy AI Gateway applies token costs when the stream
  is done, envoyproxy/ai-gateway#2394). ``"admission"`` charges the request's tokens up front (a
  gateway reserving ``max_tokens``): the limit then holds exactly.
- ``enforcement="per_replica"`` with ``replicas=N``: each gateway replica keeps its own counters
  (Envoy's local rate limit is "independent limits per Envoy instance"; in-memory LiteLLM
  counters without a shared store), and a load balancer spreads requests at random over them, so
  a tenant gets up to N times its limit. ``"global"``: one shared counter (a Redis-backed limit).
- ``window="fixed"``: ``rpm``/``tpm`` count per fixed window of ``window_s`` seconds instead of a
  token bucket, as LiteLLM's proxy counts ``rpm_limit``/``tpm_limit`` (its window is
  ``LITELLM_RATE_LIMIT_WINDOW_SIZE``, 60 s by default; :mod:`servecap.policy.gateway.fixed_window`
  cites the source). Nothing refills inside a window, and a full burst passes again at the next.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from servecap.errors import ServecapError, did_you_mean
from servecap.policy.gateway.bucket import TokenBucket
from servecap.policy.gateway.decision import Admit, Queue, Reject, RejectReason
from servecap.policy.gateway.fixed_window import FixedWindow
from servecap.policy.gateway.request import GatewayRequest

DAY_S = 86_400.0
TokenKind = Literal["prompt", "output", "total"]
TOKEN_KINDS: tuple[TokenKind, ...] = ("prompt", "output", "total")
CHARGE_AT = ("admission", "completion")
ON_LIMIT = ("reject", "queue")
ENFORCEMENT = ("global", "per_replica")
WINDOWS = ("bucket", "fixed")


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """One tenant's limits (None: no limit of that kind).

    ``rpm``/``tpm`` are token buckets refilled at ``rpm / 60`` per second holding at most
    ``burst_requests`` / ``burst_tokens`` (default: one minute's worth, ``rpm`` / ``tpm``).
    ``tokens`` says which tokens count (prompt, output, or both). ``max_concurrent`` caps the
    tenant's requests in flight; ``daily_tokens`` is a budget per calendar day of simulated time
    (resets at every multiple of 86,400 s). ``on_limit``: reject with 429, or queue until the limit
    allows it. ``window="fixed"``: ``rpm``/``tpm`` are instead the most requests/tokens per fixed
    window of ``window_s`` seconds (LiteLLM's counters; no bursts to set).
    """

    rpm: float | None = None
    tpm: float | None = None
    tokens: TokenKind = "total"
    burst_requests: float | None = None
    burst_tokens: float | None = None
    max_concurrent: int | None = None
    daily_tokens: float | None = None
    charge_at: Literal["admission", "completion"] = "admission"
    on_limit: Literal["reject", "queue"] = "reject"
    window: Literal["bucket", "fixed"] = "bucket"
    window_s: float = 60.0
    field: str = "gateway.rate_limits"

    def __post_init__(self) -> None:
        f = self.field
        for name in ("rpm", "tpm", "burst_requests", "burst_tokens", "daily_tokens"):
            v = getattr(self, name)
            if v is not None and (not v > 0 or math.isinf(v)):
                raise ServecapError(f"{f}.{name}", v, "must be a positive number (leave it out for no limit)")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ServecapError(f"{f}.max_concurrent", self.max_concurrent, "must be at least 1")
        _one_of(f"{f}.tokens", self.tokens, TOKEN_KINDS)
        _one_of(f"{f}.charge_at", self.charge_at, CHARGE_AT)
        _one_of(f"{f}.on_limit", self.on_limit, ON_LIMIT)
        _one_of(f"{f}.window", self.window, WINDOWS)
        if not self.window_s > 0 or math.isinf(self.window_s):
            raise ServecapError(f"{f}.window_s", self.window_s, "must be a positive number of seconds")
        if self.window == "fixed":
            for name in ("burst_requests", "burst_tokens"):
                if getattr(self, name) is not None:
                    raise ServecapError(f"{f}.{name}", getattr(self, name), "a fixed window has no burst to set")
        if self.burst_requests is not None and self.rpm is None:
            raise ServecapError(f"{f}.burst_requests", self.burst_requests, "needs 'rpm'")
        if self.burst_tokens is not None and self.tpm is None:
            raise ServecapError(f"{f}.burst_tokens", self.burst_tokens, "needs 'tpm'")

    def counted_tokens(self, prompt_tokens: int, output_tokens: int) -> int:
        if self.tokens == "prompt":
            return prompt_tokens
        if self.tokens == "output":
            return output_tokens
        return prompt_tokens + output_tokens


@dataclass(slots=True)
class _State:
    """One tenant's counters on one gateway replica."""

    rpm: TokenBucket | FixedWindow | None
    tpm: TokenBucket | FixedWindow | None
    in_flight: int = 0
    day: int = 0
    day_tokens: float = 0.0


@dataclass(slots=True)
class _Ticket:
    tenant: str
    replica: int
    charged_tokens: int
    limits: TenantLimits


@dataclass(slots=True)
class RateLimiter:
    """Per-tenant limits; tenants without an entry get ``default`` (None: unlimited).

    Call :meth:`check` when a request arrives (or when a queued one is retried), and
    :meth:`complete` when an admitted request finishes (its actual output length), so
    concurrency is released and post-charged tokens are counted.
    """

    limits: Mapping[str, TenantLimits]
    default: TenantLimits | None = None
    replicas: int = 1
    enforcement: Literal["global", "per_replica"] = "global"
    _states: dict[tuple[str, int], _State] = field(default_factory=dict)
    _tickets: dict[int, _Ticket] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ServecapError("gateway.replicas", self.replicas, "must be at least 1")
        _one_of("gateway.rate_limits.enforcement", self.enforcement, ENFORCEMENT)

    def limits_for(self, tenant: str | None) -> TenantLimits | None:
        return self.limits.get(tenant or "", self.default)

    def check(self, req: GatewayRequest, now_s: float, rng: random.Random) -> Admit | Reject | Queue:
        """Admit (and charge what is charged at admission), reject, or queue ``req``."""
        lim = self.limits_for(req.tenant)
        if lim is None:
            return Admit()
        tenant = req.tenant or ""
        replica = rng.randrange(self.replicas) if self.enforcement == "per_replica" and self.replicas > 1 else 0
        st = self._state(tenant, replica, lim)
        n = lim.counted_tokens(req.prompt_tokens, req.output_tokens)
        up_front = lim.charge_at == "admission"
        self._roll_day(st, now_s)
        reason: RejectReason | None = None
        ready: float | None = None
        if up_front and st.tpm is not None and n > st.tpm.capacity:
            return Reject("tpm")  # can never fit: bigger than the whole burst
        if up_front and lim.daily_tokens is not None and n > lim.daily_tokens:
            return Reject("daily_budget")
        if lim.max_concurrent is not None and st.in_flight >= lim.max_concurrent:
            reason, ready = "concurrency", None
        elif lim.daily_tokens is not None and (
            st.day_tokens + n > lim.daily_tokens if up_front else st.day_tokens >= lim.daily_tokens
        ):
            reason, ready = "daily_budget", (math.floor(now_s / DAY_S) + 1) * DAY_S
        elif st.rpm is not None and not st.rpm.can_take(1, now_s):
            reason, ready = "rpm", st.rpm.ready_at_s(1, now_s)
        elif st.tpm is not None and up_front and not st.tpm.can_take(n, now_s):
            reason, ready = "tpm", st.tpm.ready_at_s(n, now_s)
        elif st.tpm is not None and not up_front and not st.tpm.level(now_s) > 0:
            # admitted again once the debt is paid off (and a little more refilled) or the window ends
            reason, ready = "tpm", st.tpm.debt_paid_at_s(now_s)
        if reason is not None:
            if lim.on_limit == "queue":
                return Queue(reason, ready)
            if reason == "rpm" and st.rpm is not None:
                st.rpm.refuse(1, now_s)  # LiteLLM counts the first refused request (fixed_window.py)
            return Reject(reason)
        if st.rpm is not None:
            st.rpm.charge(1, now_s)
        if up_front:
            if st.tpm is not None:
                st.tpm.charge(n, now_s)
            st.day_tokens += n
        st.in_flight += 1
        self._tickets[req.request_id] = _Ticket(tenant, replica, n if up_front else 0, lim)
        return Admit()

    def complete(self, req: GatewayRequest, now_s: float, output_tokens: int | None = None) -> None:
        """``req`` (admitted by :meth:`check`) finished at ``now_s`` having produced
        ``output_tokens`` (default: all of them); post-charged tokens are counted now."""
        ticket = self._tickets.pop(req.request_id, None)
        if ticket is None:
            return
        st = self._states[(ticket.tenant, ticket.replica)]
        st.in_flight -= 1
        lim = ticket.limits
        if lim.charge_at == "completion":
            out = req.output_tokens if output_tokens is None else output_tokens
            n = lim.counted_tokens(req.prompt_tokens, out)
            self._roll_day(st, now_s)
            if st.tpm is not None:
                st.tpm.charge(n, now_s)
            st.day_tokens += n

    def in_flight(self, tenant: str) -> int:
        """The tenant's admitted requests not yet completed, over all gateway replicas."""
        return sum(st.in_flight for (t, _), st in self._states.items() if t == tenant)

    def _state(self, tenant: str, replica: int, lim: TenantLimits) -> _State:
        st = self._states.get((tenant, replica))
        if st is None:
            st = _State(
                _counter(lim, lim.rpm, lim.burst_requests, "rpm"), _counter(lim, lim.tpm, lim.burst_tokens, "tpm")
            )
            self._states[(tenant, replica)] = st
        return st

    @staticmethod
    def _roll_day(st: _State, now_s: float) -> None:
        day = math.floor(now_s / DAY_S)
        if day != st.day:
            st.day, st.day_tokens = day, 0.0


def _counter(
    lim: TenantLimits, per_minute: float | None, burst: float | None, name: str
) -> TokenBucket | FixedWindow | None:
    """A limit's counter: a token bucket refilled at ``per_minute / 60`` per second holding ``burst``
    (default one minute's worth), or with ``window="fixed"`` ``per_minute`` per window."""
    if per_minute is None:
        return None
    if lim.window == "fixed":
        return FixedWindow(per_minute, lim.window_s, field=f"{lim.field}.{name}")
    return TokenBucket(burst or per_minute, per_minute / 60.0, field=f"{lim.field}.{name}")


def _one_of(field_name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ServecapError(field_name, value, f"must be one of {', '.join(allowed)}" + did_you_mean(value, allowed))
