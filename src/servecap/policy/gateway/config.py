"""The gateway's settings as they appear in a fleet file (pydantic, ``extra="forbid"``), and
:func:`build_gateway`, which turns them into fresh policy objects for one run.

Every problem becomes one :class:`ServecapError` naming the field (``gateway.rate_limits.tenants.
acme.tpm``) and the value; misspelt keys get a "did you mean". See docs/gateway.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from servecap.errors import ServecapError, from_validation_error
from servecap.policy.gateway.cache import ExactCache, SemanticCache
from servecap.policy.gateway.provider import ExternalProvider
from servecap.policy.gateway.queue import GatewayQueue
from servecap.policy.gateway.ratelimit import RateLimiter, TenantLimits
from servecap.policy.gateway.request import GatewayRequest
from servecap.policy.gateway.routing import ByClass, ByPromptLength, ByShare, FallbackPolicy, OverflowPolicy


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class TenantLimitsConfig(_Model):
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    tokens: Literal["prompt", "output", "total"] = "total"
    burst_requests: float | None = Field(default=None, gt=0)
    burst_tokens: float | None = Field(default=None, gt=0)
    max_concurrent: int | None = Field(default=None, ge=1)
    daily_tokens: float | None = Field(default=None, gt=0)
    charge_at: Literal["admission", "completion"] = "admission"
    on_limit: Literal["reject", "queue"] = "reject"
    window: Literal["bucket", "fixed"] = "bucket"  # fixed: rpm/tpm per window_s (LiteLLM's counters)
    window_s: float = Field(default=60.0, gt=0)


class RateLimitsConfig(_Model):
    tenants: dict[str, TenantLimitsConfig] = Field(default_factory=dict)
    default: TenantLimitsConfig | None = None
    replicas: int = Field(default=1, ge=1, le=10_000)
    enforcement: Literal["global", "per_replica"] = "global"


class QueueConfig(_Model):
    """``tiers`` maps ``tenant`` or ``tenant/class`` to a tier (lower is served first and shed
    last); requests not listed keep their own ``priority``."""

    capacity: int = Field(ge=1, le=100_000_000)
    max_wait_s: float | None = Field(default=None, gt=0)
    tiers: dict[str, int] = Field(default_factory=dict)


class ExactCacheConfig(_Model):
    kind: Literal["exact"] = "exact"
    capacity: int = Field(default=100_000, ge=1)
    ttl_s: float | None = Field(default=None, gt=0)
    latency_s: float = Field(default=0.005, ge=0)
    skip_multi_turn: bool = False


class SemanticCacheConfig(_Model):
    """``hit_rate`` and ``false_hit_rate`` as measured at the cache's threshold, or
    ``threshold`` with a measured ``curve`` of ``[threshold, hit_rate, false_hit_rate]`` points.
    Exact repeats are answered too (an exact layer of ``capacity`` entries)."""

    kind: Literal["semantic"] = "semantic"
    hit_rate: float | None = Field(default=None, ge=0, le=1)
    false_hit_rate: float = Field(default=0.0, ge=0, le=1)
    class_hit_rates: dict[str, Annotated[float, Field(ge=0, le=1)]] | None = None
    threshold: float | None = None
    curve: list[tuple[float, float, float]] | None = None
    latency_s: float = Field(default=0.02, ge=0)
    classes: list[str] | None = None
    skip_multi_turn: bool = False
    capacity: int = Field(default=100_000, ge=1)
    ttl_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _rates(self) -> SemanticCacheConfig:
        if (self.hit_rate is None) == (self.threshold is None):
            raise ValueError("give 'hit_rate' (and 'false_hit_rate'), or 'threshold' with a measured 'curve'")
        if self.threshold is not None and not self.curve:
            raise ValueError("'threshold' needs a measured 'curve' of [threshold, hit_rate, false_hit_rate] points")
        return self


CacheConfig = Annotated[ExactCacheConfig | SemanticCacheConfig, Field(discriminator="kind")]


class ByClassConfig(_Model):
    kind: Literal["class"] = "class"
    pools: dict[str, str] = Field(default_factory=dict)
    default: str = Field(min_length=1)


class LengthStep(_Model):
    max_prompt_tokens: int = Field(ge=1)
    pool: str = Field(min_length=1)


class ByPromptLengthConfig(_Model):
    kind: Literal["prompt_length"] = "prompt_length"
    steps: list[LengthStep] = Field(min_length=1)
    default: str = Field(min_length=1)


class ByShareConfig(_Model):
    kind: Literal["share"] = "share"
    shares: dict[str, float] = Field(min_length=1)


RoutingConfig = Annotated[ByClassConfig | ByPromptLengthConfig | ByShareConfig, Field(discriminator="kind")]


class OverflowConfig(_Model):
    from_pool: str = Field(min_length=1)
    to_pool: str = Field(min_length=1)
    max_queue: int | None = Field(default=None, ge=0)
    max_ttft_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _threshold(self) -> OverflowConfig:
        if self.max_queue is None and self.max_ttft_s is None:
            raise ValueError("give max_queue and/or max_ttft_s")
        if self.from_pool == self.to_pool:
            raise ValueError(f"to_pool must differ from from_pool ({self.from_pool!r})")
        return self


_BOTH: list[Literal["failed", "rate_limited"]] = ["failed", "rate_limited"]


class FallbackConfig(_Model):
    chains: dict[str, list[str]] = Field(default_factory=dict)
    max_retries: int = Field(default=2, ge=0, le=100)
    budget_percent: float | None = Field(default=None, ge=0, le=100)
    min_retry_concurrency: int = Field(default=3, ge=0)
    on: list[Literal["failed", "rate_limited"]] = Field(default_factory=lambda: _BOTH.copy())

    @model_validator(mode="after")
    def _no_self_fallback(self) -> FallbackConfig:
        for pool, chain in self.chains.items():
            if pool in chain:
                raise ValueError(f"pool {pool!r} cannot fall back to itself")
        return self


class ProviderConfig(_Model):
    name: str = Field(min_length=1)
    ttft_median_s: float = Field(gt=0)
    ttft_sigma: float = Field(default=0.5, ge=0, le=10)
    output_tok_s: float = Field(default=50.0, gt=0)
    usd_per_m_input: float = Field(default=0.0, ge=0)
    usd_per_m_output: float = Field(default=0.0, ge=0)
    failure_rate: float = Field(default=0.0, ge=0, le=1)


class GatewayConfig(_Model):
    """The gateway stage of a fleet: every part optional (absent: that stage passes through)."""

    rate_limits: RateLimitsConfig | None = None
    queue: QueueConfig | None = None
    cache: CacheConfig | None = None
    routing: RoutingConfig | None = None
    overflow: list[OverflowConfig] = Field(default_factory=list)
    fallback: FallbackConfig | None = None
    providers: list[ProviderConfig] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Tiers:
    """A request's queue tier: ``tiers["tenant/class"]``, else ``tiers["tenant"]``, else its
    ``priority``."""

    table: Mapping[str, int]

    def of(self, req: GatewayRequest) -> int:
        if req.tenant is not None:
            hit = self.table.get(f"{req.tenant}/{req.request_class}")
            if hit is None:
                hit = self.table.get(req.tenant)
            if hit is not None:
                return hit
        return req.priority


@dataclass(frozen=True, slots=True)
class GatewayPolicies:
    """Fresh, stateful policy objects for one run (None: that stage is absent)."""

    limiter: RateLimiter | None
    queue: GatewayQueue[Any] | None
    tiers: Tiers
    cache: ExactCache | SemanticCache | None
    router: ByClass | ByPromptLength | ByShare | None
    overflow: tuple[OverflowPolicy, ...]
    fallback: FallbackPolicy | None
    providers: Mapping[str, ExternalProvider]


def gateway_from_dict(raw: Mapping[str, Any]) -> GatewayConfig:
    """Validate a mapping; the first problem becomes a ServecapError naming the field."""
    try:
        return GatewayConfig.model_validate(raw)
    except ValidationError as err:
        raise _to_error(err) from None


def build_gateway(cfg: GatewayConfig) -> GatewayPolicies:
    """The policies for one run (call again for another run: they hold state)."""
    limiter = None
    if cfg.rate_limits is not None:
        rl = cfg.rate_limits
        limiter = RateLimiter(
            {t: _limits(c, f"gateway.rate_limits.tenants.{t}") for t, c in rl.tenants.items()},
            default=None if rl.default is None else _limits(rl.default, "gateway.rate_limits.default"),
            replicas=rl.replicas,
            enforcement=rl.enforcement,
        )
    queue: GatewayQueue[Any] | None = None
    tiers = Tiers({})
    if cfg.queue is not None:
        wait = float("inf") if cfg.queue.max_wait_s is None else cfg.queue.max_wait_s
        queue = GatewayQueue(cfg.queue.capacity, wait)
        tiers = Tiers(dict(cfg.queue.tiers))
    return GatewayPolicies(
        limiter=limiter,
        queue=queue,
        tiers=tiers,
        cache=_cache(cfg.cache),
        router=_router(cfg.routing),
        overflow=tuple(OverflowPolicy(o.from_pool, o.to_pool, o.max_queue, o.max_ttft_s) for o in cfg.overflow),
        fallback=None
        if cfg.fallback is None
        else FallbackPolicy(
            {k: tuple(v) for k, v in cfg.fallback.chains.items()},
            max_retries=cfg.fallback.max_retries,
            budget_percent=cfg.fallback.budget_percent,
            min_retry_concurrency=cfg.fallback.min_retry_concurrency,
            on=frozenset(cfg.fallback.on),
        ),
        providers={p.name: ExternalProvider(**p.model_dump()) for p in cfg.providers},
    )


def _limits(c: TenantLimitsConfig, field: str) -> TenantLimits:
    return TenantLimits(**c.model_dump(), field=field)


def _cache(c: ExactCacheConfig | SemanticCacheConfig | None) -> ExactCache | SemanticCache | None:
    if c is None:
        return None
    ttl = float("inf") if c.ttl_s is None else c.ttl_s
    exact = ExactCache(c.capacity, ttl, c.latency_s, c.skip_multi_turn)
    if isinstance(c, ExactCacheConfig):
        return exact
    classes = None if c.classes is None else frozenset(c.classes)
    common: dict[str, Any] = {
        "latency_s": c.latency_s,
        "classes": classes,
        "skip_multi_turn": c.skip_multi_turn,
        "exact": exact,
        "class_hit_rates": c.class_hit_rates,
    }
    if c.threshold is not None:
        assert c.curve is not None
        return SemanticCache.at_threshold(c.threshold, c.curve, **common)
    assert c.hit_rate is not None
    return SemanticCache(c.hit_rate, c.false_hit_rate, **common)


def _router(
    c: ByClassConfig | ByPromptLengthConfig | ByShareConfig | None,
) -> ByClass | ByPromptLength | ByShare | None:
    if c is None:
        return None
    if isinstance(c, ByClassConfig):
        return ByClass(dict(c.pools), c.default)
    if isinstance(c, ByPromptLengthConfig):
        return ByPromptLength(tuple((s.max_prompt_tokens, s.pool) for s in c.steps), c.default)
    return ByShare(dict(c.shares))


_TAGS = {"exact", "semantic", "class", "prompt_length", "share"}


def _to_error(err: ValidationError) -> ServecapError:
    """The one formatter (:func:`servecap.errors.from_validation_error`), with the keys allowed
    where an unknown key was found (the union's tag in pydantic's path names the model)."""
    extra = next((e for e in err.errors() if e["type"] == "extra_forbidden"), None)
    allowed: list[str] = []
    if extra is not None:
        loc = [str(p) for p in extra["loc"] if str(p) not in _TAGS and not str(p).startswith("function-")]
        tags = [str(p) for p in extra["loc"] if str(p) in _BY_TAG]
        model = _BY_TAG[tags[-1]] if tags else _model_at(loc[:-1])
        allowed = sorted(model.model_fields) if model is not None else []
    return from_validation_error(err, "gateway", allowed_keys=lambda _loc: allowed, skip=_TAGS)


_BY_TAG: dict[str, type[BaseModel]] = {
    "exact": ExactCacheConfig,
    "semantic": SemanticCacheConfig,
    "class": ByClassConfig,
    "prompt_length": ByPromptLengthConfig,
    "share": ByShareConfig,
}


def _model_at(loc: list[str]) -> type[BaseModel] | None:
    """The model whose keys live at ``loc`` (for the list of allowed keys)."""
    model: type[BaseModel] = GatewayConfig
    by_key: dict[str, type[BaseModel]] = {
        "rate_limits": RateLimitsConfig,
        "default": TenantLimitsConfig,
        "queue": QueueConfig,
        "fallback": FallbackConfig,
        "overflow": OverflowConfig,
        "providers": ProviderConfig,
        "steps": LengthStep,
    }
    for i, p in enumerate(loc):
        if p in by_key and not (p == "default" and i > 0 and loc[i - 1] == "routing"):
            model = by_key[p]
        elif i > 0 and loc[i - 1] == "tenants":
            model = TenantLimitsConfig
        elif p in ("cache", "routing"):
            return None
        elif p.isdigit() or p == "tenants":
            continue
        else:
            return None
    return model
