"""Model routing at the gateway: which pool serves a request, overflow, and fallback.

- Routers pick a pool per request: :class:`ByClass` (a table of request classes), by prompt
  length (:class:`ByPromptLength`: short prompts to a small model), or a share
  (:class:`ByShare`: a learned router's accuracy/cost trade-off summed up as "the strong model
  gets x% of requests", as RouteLLM reports its routers; Ong et al., arXiv:2406.18665, 2024).
- :class:`OverflowPolicy`: graceful degradation — when the large pool's queue or p99 TTFT is
  past its threshold, send to a smaller pool instead.
- :class:`FallbackPolicy`: when a pool fails or answers 429, retry on the next pool of its
  chain (LiteLLM's router ``fallbacks``, tried after ``num_retries``), within a retry budget per
  request and a fleet-wide one: concurrent retries at most ``max(min_retry_concurrency,
  budget_percent% x active requests)`` (Envoy's circuit-breaker ``retry_budget``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from servecap.errors import ServecapError
from servecap.policy.gateway.decision import Fallback, Overflow, Reject, Route
from servecap.policy.gateway.request import GatewayRequest

FailureKind = Literal["failed", "rate_limited"]


def _check_pool(name: str, pool: str) -> None:
    if not isinstance(pool, str) or not pool:
        raise ServecapError(name, pool, "must be a pool name")


@dataclass(frozen=True, slots=True)
class ByClass:
    """``pools[request_class]``, else ``default``."""

    pools: Mapping[str, str]
    default: str

    def __post_init__(self) -> None:
        _check_pool("gateway.routing.default", self.default)
        for cls, pool in self.pools.items():
            _check_pool(f"gateway.routing.pools.{cls}", pool)

    def route(self, req: GatewayRequest, rng: random.Random) -> Route:
        return Route(self.pools.get(req.request_class or "", self.default))


@dataclass(frozen=True, slots=True)
class ByPromptLength:
    """The first ``(max_prompt_tokens, pool)`` step the prompt fits (steps sorted by length),
    else ``default`` (the long-context pool)."""

    steps: Sequence[tuple[int, str]]
    default: str

    def __post_init__(self) -> None:
        _check_pool("gateway.routing.default", self.default)
        last = 0
        for i, (limit, pool) in enumerate(self.steps):
            if limit <= last:
                raise ServecapError(
                    f"gateway.routing.steps.{i}.max_prompt_tokens", limit, "must be positive and increasing"
                )
            _check_pool(f"gateway.routing.steps.{i}.pool", pool)
            last = limit

    def route(self, req: GatewayRequest, rng: random.Random) -> Route:
        for limit, pool in self.steps:
            if req.prompt_tokens <= limit:
                return Route(pool)
        return Route(self.default)


@dataclass(frozen=True, slots=True)
class ByShare:
    """Pool ``p`` with probability ``shares[p] / Σ shares`` (pools tried in the given order)."""

    shares: Mapping[str, float]

    def __post_init__(self) -> None:
        if not self.shares:
            raise ServecapError("gateway.routing.shares", {}, "needs at least one pool")
        for pool, w in self.shares.items():
            _check_pool("gateway.routing.shares", pool)
            if not 0 <= w < math.inf:
                raise ServecapError(f"gateway.routing.shares.{pool}", w, "must be >= 0")
        if sum(self.shares.values()) <= 0:
            raise ServecapError("gateway.routing.shares", dict(self.shares), "must not all be 0")

    def route(self, req: GatewayRequest, rng: random.Random) -> Route:
        total = sum(self.shares.values())
        u = rng.random() * total
        acc = 0.0
        last = ""
        for pool, w in self.shares.items():
            if w <= 0:
                continue
            acc += w
            last = pool
            if u < acc:
                return Route(pool)
        return Route(last)


@dataclass(frozen=True, slots=True)
class PoolSignals:
    """What overflow reads of a pool: requests waiting (gateway + replica queues) and the p99
    TTFT over the recent window (None: no recent request)."""

    queue_depth: int
    ttft_p99_s: float | None = None


@dataclass(frozen=True, slots=True)
class OverflowPolicy:
    """Send ``from_pool``'s requests to ``to_pool`` while ``from_pool``'s queue depth is above
    ``max_queue`` or its p99 TTFT above ``max_ttft_s`` (strictly: at the threshold it still
    takes them). At least one threshold is required."""

    from_pool: str
    to_pool: str
    max_queue: int | None = None
    max_ttft_s: float | None = None

    def __post_init__(self) -> None:
        _check_pool("gateway.overflow.from_pool", self.from_pool)
        _check_pool("gateway.overflow.to_pool", self.to_pool)
        if self.from_pool == self.to_pool:
            raise ServecapError("gateway.overflow.to_pool", self.to_pool, "must differ from from_pool")
        if self.max_queue is None and self.max_ttft_s is None:
            raise ServecapError("gateway.overflow", None, "give max_queue and/or max_ttft_s")
        if self.max_queue is not None and self.max_queue < 0:
            raise ServecapError("gateway.overflow.max_queue", self.max_queue, "must be >= 0")
        if self.max_ttft_s is not None and not self.max_ttft_s > 0:
            raise ServecapError("gateway.overflow.max_ttft_s", self.max_ttft_s, "must be positive (seconds)")

    def decide(self, route: Route, signals: Mapping[str, PoolSignals]) -> Route | Overflow:
        if route.pool != self.from_pool:
            return route
        sig = signals.get(self.from_pool)
        if sig is None:
            return route
        if self.max_queue is not None and sig.queue_depth > self.max_queue:
            return Overflow(self.from_pool, self.to_pool, "queue_depth", float(sig.queue_depth), float(self.max_queue))
        if self.max_ttft_s is not None and sig.ttft_p99_s is not None and sig.ttft_p99_s > self.max_ttft_s:
            return Overflow(self.from_pool, self.to_pool, "ttft_p99_s", sig.ttft_p99_s, self.max_ttft_s)
        return route


@dataclass(slots=True)
class _Attempts:
    tried: list[str]
    retrying: bool = False


@dataclass(slots=True)
class FallbackPolicy:
    """Fallback chains ``{pool: [next, next, ...]}``; at most ``max_retries`` retries per
    request, and concurrent retries within ``max(min_retry_concurrency, budget_percent% of the
    active requests)`` (no fleet-wide budget when ``budget_percent`` is None). ``on`` says which
    failures fall back (a failed pool, a 429).

    Call :meth:`on_failure` when an attempt fails and :meth:`done` when the request ends (any
    outcome); every failure gets a :class:`Fallback` or a :class:`Reject` (``retry_budget``,
    ``no_fallback``), so no request is lost.
    """

    chains: Mapping[str, Sequence[str]]
    max_retries: int = 2
    budget_percent: float | None = None
    min_retry_concurrency: int = 3
    on: frozenset[str] = frozenset({"failed", "rate_limited"})
    _attempts: dict[int, _Attempts] = field(default_factory=dict)
    _retrying: int = 0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ServecapError("gateway.fallback.max_retries", self.max_retries, "must be >= 0")
        if self.budget_percent is not None and not 0 <= self.budget_percent <= 100:
            raise ServecapError("gateway.fallback.budget_percent", self.budget_percent, "must be in [0, 100]")
        if self.min_retry_concurrency < 0:
            raise ServecapError("gateway.fallback.min_retry_concurrency", self.min_retry_concurrency, "must be >= 0")
        bad = set(self.on) - {"failed", "rate_limited"}
        if bad:
            raise ServecapError("gateway.fallback.on", sorted(bad)[0], "must be 'failed' or 'rate_limited'")
        for pool, chain in self.chains.items():
            for i, nxt in enumerate(chain):
                _check_pool(f"gateway.fallback.chains.{pool}.{i}", nxt)
                if nxt == pool:
                    raise ServecapError(f"gateway.fallback.chains.{pool}.{i}", nxt, "a pool cannot fall back to itself")

    @property
    def retries_in_flight(self) -> int:
        return self._retrying

    def retry_budget(self, active_requests: int) -> float:
        """Concurrent retries allowed with ``active_requests`` in flight."""
        if self.budget_percent is None:
            return math.inf
        return max(float(self.min_retry_concurrency), self.budget_percent / 100.0 * active_requests)

    def on_failure(self, request_id: int, pool: str, kind: FailureKind, active_requests: int) -> Fallback | Reject:
        """``pool`` failed ``request_id`` (``kind``): where to retry, or why not."""
        att = self._attempts.get(request_id)
        if att is None:
            att = self._attempts[request_id] = _Attempts([pool])
        elif pool not in att.tried:
            att.tried.append(pool)
        if kind not in self.on:
            return Reject("no_fallback")
        retries_done = len(att.tried) - 1
        nxt = next((p for p in self._chain_of(att.tried[0]) if p not in att.tried), None)
        if nxt is None:
            return Reject("no_fallback")
        if retries_done >= self.max_retries:
            return Reject("retry_budget")
        if not att.retrying and self._retrying + 1 > self.retry_budget(active_requests):
            return Reject("retry_budget")
        if not att.retrying:
            att.retrying = True
            self._retrying += 1
        att.tried.append(nxt)
        return Fallback(pool, nxt, retries_done + 1)

    def done(self, request_id: int) -> None:
        """``request_id`` ended (served, cached, rejected or failed): release its retry."""
        att = self._attempts.pop(request_id, None)
        if att is not None and att.retrying:
            self._retrying -= 1

    def _chain_of(self, first_pool: str) -> list[str]:
        """The pools to try after ``first_pool``: its chain, then each fallback's own chain."""
        out: list[str] = []
        todo = list(self.chains.get(first_pool, ()))
        while todo:
            p = todo.pop(0)
            if p not in out and p != first_pool:
                out.append(p)
                todo.extend(self.chains.get(p, ()))
        return out
