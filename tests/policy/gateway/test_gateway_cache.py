"""Response caches: exact hits only after a stored answer, TTL/LRU, semantic rates, stale risk."""

from __future__ import annotations

import random

import pytest
from gateway_helpers import Req

from servecap.errors import ServecapError
from servecap.policy.gateway import CacheHit, ExactCache, SemanticCache, make


def test_exact_hit_only_after_the_answer_is_stored() -> None:
    c = ExactCache(capacity=10, latency_s=0.004)
    first, repeat, other = Req(0, duplicate_group=7), Req(1, duplicate_group=7), Req(2, duplicate_group=None)
    assert c.lookup(first, 0.0) is None
    assert c.lookup(repeat, 0.5) is None  # the first answer is still streaming
    c.store(first, 1.0)
    assert c.lookup(repeat, 2.0) == CacheHit("exact", 0.004)
    c.store(other, 2.0)
    assert c.lookup(other, 3.0) is None and len(c) == 1  # unique requests are never cached


def test_exact_ttl_and_lru() -> None:
    c = ExactCache(capacity=2, ttl_s=10.0)
    for g in (1, 2):
        c.store(Req(g, duplicate_group=g), 0.0)
    assert c.lookup(Req(9, duplicate_group=1), 1.0) is not None  # 1 is now the most recently used
    c.store(Req(3, duplicate_group=3), 2.0)  # evicts 2, the least recently used
    assert c.lookup(Req(9, duplicate_group=2), 3.0) is None
    assert c.lookup(Req(9, duplicate_group=1), 10.0) is not None  # stored at 0: held until 10 s
    assert c.lookup(Req(9, duplicate_group=1), 10.01) is None  # a lookup does not refresh the store time
    assert c.lookup(Req(9, duplicate_group=3), 12.0) is not None
    assert c.lookup(Req(9, duplicate_group=3), 12.01) is None


def test_multi_turn_hits_are_flagged_or_skipped() -> None:
    c = ExactCache()
    c.store(Req(0, duplicate_group=1), 0.0)
    later_turn = Req(1, duplicate_group=1, turn=3, history_tokens=900)
    assert c.lookup(later_turn, 1.0) == CacheHit("exact", c.latency_s, stale_risk=True)
    safe = ExactCache(skip_multi_turn=True)
    safe.store(Req(0, duplicate_group=1), 0.0)
    assert safe.lookup(later_turn, 1.0) is None
    assert safe.lookup(Req(2, duplicate_group=1), 1.0) is not None


def test_semantic_rates_and_classes() -> None:
    c = SemanticCache(hit_rate=0.3, false_hit_rate=0.1, classes=frozenset({"faq"}))
    rng = random.Random(4)
    hits = [c.lookup(Req(i, request_class="faq"), 0.0, rng) for i in range(20_000)]
    got = [h for h in hits if h is not None]
    assert len(got) / 20_000 == pytest.approx(0.3, abs=0.015)
    assert sum(h.false_hit for h in got) / len(got) == pytest.approx(0.1, abs=0.015)
    assert all(h.kind == "semantic" for h in got)
    assert c.lookup(Req(0, request_class="chat"), 0.0, rng) is None  # not a cached class


def test_semantic_with_an_exact_layer() -> None:
    c = SemanticCache(hit_rate=0.0, exact=ExactCache())
    rng = random.Random(0)
    c.store(Req(0, duplicate_group=5), 0.0)
    assert c.lookup(Req(1, duplicate_group=5), 1.0, rng) == CacheHit("exact", c.exact.latency_s)  # type: ignore[union-attr]
    assert c.lookup(Req(2, duplicate_group=6), 1.0, rng) is None


def test_threshold_curve_by_hand() -> None:
    curve = [(0.80, 0.40, 0.08), (0.90, 0.25, 0.02), (0.95, 0.15, 0.005)]
    c = SemanticCache.at_threshold(0.85, curve, latency_s=0.03)
    assert (c.hit_rate, c.false_hit_rate, c.latency_s) == pytest.approx((0.325, 0.05, 0.03))
    assert SemanticCache.at_threshold(0.95, curve).hit_rate == pytest.approx(0.15)
    with pytest.raises(ServecapError, match="outside the measured curve") as err:
        SemanticCache.at_threshold(0.99, curve)
    assert err.value.field == "gateway.cache.threshold"


@pytest.mark.parametrize(
    ("make_it", "field"),
    [
        (lambda: ExactCache(capacity=0), "gateway.cache.capacity"),
        (lambda: ExactCache(ttl_s=0), "gateway.cache.ttl_s"),
        (lambda: ExactCache(latency_s=-0.1), "gateway.cache.latency_s"),
        (lambda: SemanticCache(hit_rate=1.2), "gateway.cache.hit_rate"),
        (lambda: SemanticCache(hit_rate=0.2, false_hit_rate=-0.1), "gateway.cache.false_hit_rate"),
        (lambda: make("cache", "semantik", hit_rate=0.1), "gateway.cache.kind"),
        (lambda: make("cache", "exact", size=3), "gateway.cache"),
        (lambda: make("caches", "exact"), "gateway"),
    ],
)
def test_bad_cache_settings(make_it: object, field: str) -> None:
    with pytest.raises(ServecapError) as err:
        make_it()  # type: ignore[operator]
    assert err.value.field == field


def test_unknown_policy_names_suggest() -> None:
    with pytest.raises(ServecapError, match="did you mean: semantic"):
        make("cache", "semantik", hit_rate=0.1)
    assert isinstance(make("cache", "semantic", hit_rate=0.1), SemanticCache)
