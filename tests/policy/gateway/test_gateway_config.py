"""The gateway's fleet-file settings: a full example builds fresh policies; bad settings name the field."""

from __future__ import annotations

import random
from typing import Any

import pytest
from gateway_helpers import Req

from servecap.errors import ServecapError
from servecap.policy.gateway import Admit, ByShare, Reject, SemanticCache, make
from servecap.policy.gateway.config import build_gateway, gateway_from_dict

FULL: dict[str, Any] = {
    "rate_limits": {
        "tenants": {"acme": {"rpm": 600, "tpm": 200_000, "charge_at": "completion"}, "beta": {"max_concurrent": 2}},
        "default": {"rpm": 60},
        "replicas": 2,
        "enforcement": "per_replica",
    },
    "queue": {"capacity": 100, "max_wait_s": 30, "tiers": {"acme": 0, "beta/batch": 5}},
    "cache": {"kind": "semantic", "threshold": 0.9, "curve": [[0.8, 0.4, 0.08], [0.95, 0.1, 0.01]], "classes": ["faq"]},
    "routing": {"kind": "share", "shares": {"large": 0.3, "small": 0.7}},
    "overflow": [{"from_pool": "large", "to_pool": "small", "max_queue": 16, "max_ttft_s": 2.0}],
    "fallback": {"chains": {"large": ["small", "api"]}, "max_retries": 2, "budget_percent": 20},
    "providers": [{"name": "api", "ttft_median_s": 0.6, "usd_per_m_input": 3, "usd_per_m_output": 15}],
}


def test_a_full_gateway_builds_fresh_policies() -> None:
    cfg = gateway_from_dict(FULL)
    g = build_gateway(cfg)
    assert g.limiter is not None and g.limiter.replicas == 2 and g.limiter.enforcement == "per_replica"
    assert g.queue is not None and g.queue.capacity == 100 and g.queue.max_wait_s == 30
    assert isinstance(g.cache, SemanticCache) and g.cache.hit_rate == pytest.approx(0.2)
    assert g.cache.false_hit_rate == pytest.approx(1 / 30)  # 0.08 + (0.1 / 0.15) x (0.01 - 0.08)
    assert isinstance(g.router, ByShare)
    assert g.overflow[0].max_queue == 16 and g.fallback is not None and g.fallback.budget_percent == 20
    assert g.providers["api"].cost_usd(1_000_000, 0) == pytest.approx(3.0)
    # tiers: tenant/class first, then tenant, then the request's own priority
    assert g.tiers.of(Req(0, tenant="beta", request_class="batch", priority=1)) == 5
    assert g.tiers.of(Req(0, tenant="acme", request_class="chat", priority=9)) == 0
    assert g.tiers.of(Req(0, tenant="other", priority=3)) == 3
    # beta's cap of 2 in flight, enforced on each of the 2 gateway replicas: 4 in all
    rng = random.Random(0)
    out = [g.limiter.check(Req(i, tenant="beta"), 0.0, rng) for i in range(10)]
    assert out.count(Admit()) == 4 and out.count(Reject("concurrency")) == 6
    # a second build starts from empty state
    again = build_gateway(cfg)
    assert again.limiter is not None and again.limiter.check(Req(9, tenant="beta"), 0.0, rng) == Admit()


def test_an_empty_gateway_passes_everything_through() -> None:
    g = build_gateway(gateway_from_dict({}))
    assert (g.limiter, g.queue, g.cache, g.router, g.fallback) == (None, None, None, None, None)
    assert g.overflow == () and dict(g.providers) == {}


@pytest.mark.parametrize(
    ("raw", "field", "text"),
    [
        ({"rate_limits": {"tenants": {"acme": {"tpm": -5}}}}, "gateway.rate_limits.tenants.acme.tpm", "greater than 0"),
        ({"rate_limits": {"tenants": {"acme": {"tpmm": 5}}}}, "gateway.rate_limits.tenants.acme", "did you mean: tpm"),
        ({"rate_limits": {"replicas": 0}}, "gateway.rate_limits.replicas", "greater than or equal to 1"),
        (
            {"rate_limits": {"default": {"rpm": 5, "window": "sliding"}}},
            "gateway.rate_limits.default.window",
            "'bucket' or 'fixed'",
        ),
        (
            {"rate_limits": {"default": {"rpm": 5, "window_s": 0}}},
            "gateway.rate_limits.default.window_s",
            "greater than 0",
        ),
        (
            {"rate_limits": {"tenants": {"a": {"rpm": 5, "burst_requests": 9, "window": "fixed"}}}},
            "gateway.rate_limits.tenants.a.burst_requests",
            "no burst",
        ),
        ({"rate_limits": {"enforcement": "local"}}, "gateway.rate_limits.enforcement", "'global' or 'per_replica'"),
        ({"queue": {"capacity": 0}}, "gateway.queue.capacity", "greater than or equal to 1"),
        ({"queue": {"capacty": 3}}, "gateway.queue", "did you mean: capacity"),
        ({"cache": {"kind": "semantik"}}, "gateway.cache.kind", "expected one of"),
        ({"cache": {"kind": "semantic"}}, "gateway.cache", "give 'hit_rate'"),
        ({"cache": {"kind": "semantic", "hitrate": 0.2}}, "gateway.cache", "did you mean: hit_rate"),
        ({"cache": {"kind": "exact", "capacity": 0}}, "gateway.cache.capacity", "greater than or equal to 1"),
        (
            {"cache": {"kind": "semantic", "threshold": 0.99, "curve": [[0.8, 0.4, 0.1], [0.9, 0.2, 0.01]]}},
            "gateway.cache.threshold",
            "outside the measured curve",
        ),
        ({"routing": {"kind": "by_class"}}, "gateway.routing.kind", "expected one of"),
        ({"routing": {"kind": "class", "pool": {}}}, "gateway.routing", "did you mean: pools"),
        ({"routing": {"kind": "share", "shares": {"a": -1}}}, "gateway.routing.shares.a", "must be >= 0"),
        ({"overflow": [{"from_pool": "a", "to_pool": "b"}]}, "gateway.overflow.0", "max_queue and/or max_ttft_s"),
        ({"overflow": [{"from_pool": "a", "to_pool": "a", "max_queue": 1}]}, "gateway.overflow.0", "must differ"),
        ({"fallback": {"chains": {"a": ["a"]}}}, "gateway.fallback", "cannot fall back to itself"),
        ({"fallback": {"max_retries": -1}}, "gateway.fallback.max_retries", "greater than or equal to 0"),
        ({"providers": [{"name": "x", "ttft_median_s": -1}]}, "gateway.providers.0.ttft_median_s", "greater than 0"),
        ({"gatway": {}}, "gateway", "unknown key"),
    ],
)
def test_bad_gateway_settings_name_the_field(raw: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(ServecapError, match=text) as err:
        build_gateway(gateway_from_dict(raw))
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_the_documented_gateway_section_builds() -> None:
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).parents[3] / "docs" / "gateway.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if b.startswith("gateway:"))
    g = build_gateway(gateway_from_dict(yaml.safe_load(block)["gateway"]))
    assert isinstance(g.cache, SemanticCache) and g.cache.hit_rate == pytest.approx(0.25)
    assert g.fallback is not None and g.providers["api"].cost_usd(2_000, 500) == pytest.approx(0.0135)
    with pytest.raises(ServecapError) as err:
        make("cache", "semantik", hit_rate=0.1)
    assert str(err.value) in doc
