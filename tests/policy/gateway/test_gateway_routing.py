"""Model routing: routers, overflow only past its threshold, fallback within its retry budgets."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from gateway_helpers import Req
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.errors import ServecapError
from servecap.policy.gateway import (
    ByClass,
    ByPromptLength,
    ByShare,
    ExternalProvider,
    Fallback,
    FallbackPolicy,
    Overflow,
    OverflowPolicy,
    PoolSignals,
    Reject,
    Route,
    make,
)

RNG = random.Random(0)


def test_routers() -> None:
    by_class = ByClass({"summarise": "large", "chat": "small"}, default="large")
    assert by_class.route(Req(0, request_class="chat"), RNG) == Route("small")
    assert by_class.route(Req(0, request_class="other"), RNG) == Route("large")
    by_len = ByPromptLength([(1_024, "small"), (8_192, "medium")], default="long")
    assert [by_len.route(Req(0, prompt_tokens=n), RNG).pool for n in (1, 1_024, 1_025, 8_192, 8_193)] == [
        "small",
        "small",
        "medium",
        "medium",
        "long",
    ]
    share = ByShare({"large": 0.25, "small": 0.75})
    rng = random.Random(1)
    counts = Counter(share.route(Req(0), rng).pool for _ in range(20_000))
    assert counts["large"] / 20_000 == pytest.approx(0.25, abs=0.015)
    assert make("routing", "class", pools={}, default="x") == ByClass({}, "x")


@settings(max_examples=60, deadline=None)
@given(threshold=st.integers(0, 50), depth=st.integers(0, 100), ttft=st.floats(0.01, 10), max_ttft=st.floats(0.1, 5))
def test_overflow_only_past_its_threshold(threshold: int, depth: int, ttft: float, max_ttft: float) -> None:
    by_queue = OverflowPolicy("large", "small", max_queue=threshold)
    d = by_queue.decide(Route("large"), {"large": PoolSignals(depth, ttft)})
    assert isinstance(d, Overflow) == (depth > threshold)
    if isinstance(d, Overflow):
        assert (d.to_pool, d.signal, d.value, d.threshold) == ("small", "queue_depth", depth, threshold)
    by_ttft = OverflowPolicy("large", "small", max_ttft_s=max_ttft)
    d = by_ttft.decide(Route("large"), {"large": PoolSignals(depth, ttft)})
    assert isinstance(d, Overflow) == (ttft > max_ttft)
    # other pools' requests never overflow
    assert by_queue.decide(Route("small"), {"large": PoolSignals(10**6, 99.0)}) == Route("small")


def test_overflow_without_signals_keeps_the_route() -> None:
    p = OverflowPolicy("large", "small", max_queue=1, max_ttft_s=1.0)
    assert p.decide(Route("large"), {}) == Route("large")
    assert p.decide(Route("large"), {"large": PoolSignals(0, None)}) == Route("large")


def test_fallback_chain_and_per_request_retries() -> None:
    fb = FallbackPolicy({"large": ["medium", "provider"], "medium": ["small"]}, max_retries=2)
    assert fb.on_failure(1, "large", "failed", 10) == Fallback("large", "medium", 1)
    assert fb.on_failure(1, "medium", "rate_limited", 10) == Fallback("medium", "provider", 2)
    assert fb.on_failure(1, "provider", "failed", 10) == Reject("retry_budget")  # 2 retries used
    fb.done(1)
    assert fb.on_failure(2, "small", "failed", 10) == Reject("no_fallback")  # small has no chain
    only_failures = FallbackPolicy({"large": ["small"]}, on=frozenset({"failed"}))
    assert only_failures.on_failure(3, "large", "rate_limited", 1) == Reject("no_fallback")
    three = FallbackPolicy({"large": ["medium"], "medium": ["small"]}, max_retries=5)
    assert three.on_failure(4, "large", "failed", 1).to_pool == "medium"  # type: ignore[union-attr]
    assert three.on_failure(4, "medium", "failed", 1).to_pool == "small"  # type: ignore[union-attr]
    assert three.on_failure(4, "small", "failed", 1) == Reject("no_fallback")  # chain exhausted


@settings(max_examples=60, deadline=None)
@given(
    budget=st.floats(0, 100),
    min_conc=st.integers(0, 5),
    max_retries=st.integers(0, 3),
    events=st.lists(st.tuples(st.integers(0, 30), st.booleans(), st.integers(1, 200)), max_size=150),
)
def test_fallback_retry_budgets_hold(
    budget: float, min_conc: int, max_retries: int, events: list[tuple[int, bool, int]]
) -> None:
    """Every failure gets a decision; retries per request ≤ max_retries; concurrent retries stay
    within max(min_retry_concurrency, budget% x active requests)."""
    fb = FallbackPolicy(
        {"a": ["b", "c", "d"], "b": ["c"], "c": ["d"]},
        max_retries=max_retries,
        budget_percent=budget,
        min_retry_concurrency=min_conc,
    )
    pool_of: dict[int, str] = {}
    retries: Counter[int] = Counter()
    for rid, finish, active in events:
        if finish:
            fb.done(rid)
            pool_of.pop(rid, None)
            retries.pop(rid, None)
            continue
        pool = pool_of.get(rid, "a")
        before = fb.retries_in_flight
        d = fb.on_failure(rid, pool, "failed", active)
        assert isinstance(d, Fallback | Reject)
        if isinstance(d, Fallback):
            retries[rid] += 1
            assert retries[rid] == d.attempt <= max_retries
            pool_of[rid] = d.to_pool
            if fb.retries_in_flight > before:  # a new retry started: it had to fit the budget
                assert fb.retries_in_flight <= max(min_conc, budget / 100 * active)
        else:
            fb.done(rid)
            pool_of.pop(rid, None)
            retries.pop(rid, None)
    for rid in list(pool_of):
        fb.done(rid)
    assert fb.retries_in_flight == 0


def test_provider_by_hand() -> None:
    p = ExternalProvider(
        "api", ttft_median_s=0.4, ttft_sigma=0.0, output_tok_s=80, usd_per_m_input=3, usd_per_m_output=15
    )
    # 2,000 prompt tokens at $3/M + 500 output tokens at $15/M = 0.006 + 0.0075
    assert p.cost_usd(2_000, 500) == pytest.approx(0.0135)
    assert p.sample_ttft_s(random.Random(0)) == pytest.approx(0.4)
    assert p.e2e_s(0.4, 81) == pytest.approx(1.4)
    assert not p.fails(random.Random(0))
    flaky = ExternalProvider("flaky", ttft_median_s=1.0, failure_rate=0.2)
    rng = random.Random(2)
    assert sum(flaky.fails(rng) for _ in range(10_000)) / 10_000 == pytest.approx(0.2, abs=0.015)


@pytest.mark.parametrize(
    ("make_it", "field"),
    [
        (lambda: ByClass({}, default=""), "gateway.routing.default"),
        (lambda: ByPromptLength([(100, "a"), (50, "b")], default="c"), "gateway.routing.steps.1.max_prompt_tokens"),
        (lambda: ByShare({}), "gateway.routing.shares"),
        (lambda: ByShare({"a": -1.0}), "gateway.routing.shares.a"),
        (lambda: ByShare({"a": 0.0}), "gateway.routing.shares"),
        (lambda: OverflowPolicy("large", "small"), "gateway.overflow"),
        (lambda: OverflowPolicy("large", "large", max_queue=3), "gateway.overflow.to_pool"),
        (lambda: OverflowPolicy("large", "small", max_queue=-1), "gateway.overflow.max_queue"),
        (lambda: OverflowPolicy("large", "small", max_ttft_s=0), "gateway.overflow.max_ttft_s"),
        (lambda: FallbackPolicy({}, max_retries=-1), "gateway.fallback.max_retries"),
        (lambda: FallbackPolicy({}, budget_percent=150), "gateway.fallback.budget_percent"),
        (lambda: FallbackPolicy({"a": ["a"]}), "gateway.fallback.chains.a.0"),
        (lambda: FallbackPolicy({}, on=frozenset({"timeout"})), "gateway.fallback.on"),
        (lambda: ExternalProvider("p", ttft_median_s=0), "gateway.providers.p.ttft_median_s"),
        (lambda: ExternalProvider("p", ttft_median_s=1, usd_per_m_output=-2), "gateway.providers.p.usd_per_m_output"),
        (lambda: ExternalProvider("p", ttft_median_s=1, failure_rate=2), "gateway.providers.p.failure_rate"),
        (lambda: make("routing", "by_clas"), "gateway.routing.kind"),
    ],
)
def test_bad_routing_settings(make_it: object, field: str) -> None:
    with pytest.raises(ServecapError) as err:
        make_it()  # type: ignore[operator]
    assert err.value.field == field
