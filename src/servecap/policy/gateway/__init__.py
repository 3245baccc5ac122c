"""The AI gateway's pure policies: rate limits and quotas, a priority queue with shedding, a
response cache, and model routing with overflow and fallback (docs/gateway.md).

Each policy is a small class; the clock (``now_s``) and the random generator
(``random.Random``) are passed in; every call returns a decision value
(:mod:`servecap.policy.gateway.decision`) that the fleet simulator counts per tenant.
"""

from servecap.policy.gateway.bucket import TokenBucket
from servecap.policy.gateway.cache import ExactCache, SemanticCache
from servecap.policy.gateway.decision import (
    Admit,
    CacheHit,
    Decision,
    Fallback,
    Overflow,
    Queue,
    Reject,
    Route,
)
from servecap.policy.gateway.fixed_window import FixedWindow
from servecap.policy.gateway.provider import ExternalProvider
from servecap.policy.gateway.queue import GatewayQueue
from servecap.policy.gateway.ratelimit import RateLimiter, TenantLimits
from servecap.policy.gateway.registry import CACHES, MODEL_ROUTERS, make
from servecap.policy.gateway.request import GatewayRequest
from servecap.policy.gateway.routing import (
    ByClass,
    ByPromptLength,
    ByShare,
    FallbackPolicy,
    OverflowPolicy,
    PoolSignals,
)

__all__ = [
    "CACHES",
    "MODEL_ROUTERS",
    "Admit",
    "ByClass",
    "ByPromptLength",
    "ByShare",
    "CacheHit",
    "Decision",
    "ExactCache",
    "ExternalProvider",
    "Fallback",
    "FallbackPolicy",
    "FixedWindow",
    "GatewayQueue",
    "GatewayRequest",
    "Overflow",
    "OverflowPolicy",
    "PoolSignals",
    "Queue",
    "RateLimiter",
    "Reject",
    "Route",
    "SemanticCache",
    "TenantLimits",
    "TokenBucket",
    "make",
]
