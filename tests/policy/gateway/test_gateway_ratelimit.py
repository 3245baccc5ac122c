"""Token buckets and per-tenant limits: the window bound, semantics options, isolation, errors."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from gateway_helpers import Req
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.errors import ServecapError
from servecap.policy.gateway import Admit, FixedWindow, Queue, RateLimiter, Reject, TenantLimits, TokenBucket

EPS = 1e-9


def test_bucket_by_hand() -> None:
    b = TokenBucket(capacity=10, rate_per_s=1.0)
    assert b.try_take(10, 0.0)  # starts full
    assert not b.try_take(1, 0.0)
    assert not b.try_take(1, 0.5)  # 0.5 refilled
    assert b.ready_at_s(1, 0.5) == pytest.approx(1.0)
    assert b.try_take(1, 1.0)
    assert b.level(100.0) == 10  # never above capacity
    assert b.ready_at_s(11, 100.0) == float("inf")
    b.charge(25, 100.0)  # post-charging may leave a debt
    assert b.level(100.0) == -15
    assert b.ready_at_s(1, 100.0) == pytest.approx(116.0)
    with pytest.raises(ServecapError, match="backwards"):
        b.level(99.0)


def _window_bound_holds(events: list[tuple[float, float]], rate_per_s: float, burst: float) -> None:
    """For every window [t_i, t_j] between admissions: Σ admitted ≤ rate x (t_j - t_i) + burst."""
    for i, j in itertools.combinations_with_replacement(range(len(events)), 2):
        t0, t1 = events[i][0], events[j][0]
        taken = sum(n for t, n in events[i : j + 1] if t0 <= t <= t1)
        assert taken <= rate_per_s * (t1 - t0) + burst + EPS * max(1.0, burst)


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.floats(1, 1_000),
    rate=st.floats(0.01, 500),
    arrivals=st.lists(st.tuples(st.floats(0, 5), st.floats(0, 400)), min_size=1, max_size=80),
)
def test_bucket_admits_at_most_rate_times_window_plus_burst(
    capacity: float, rate: float, arrivals: list[tuple[float, float]]
) -> None:
    b = TokenBucket(capacity, rate)
    now = 0.0
    admitted: list[tuple[float, float]] = []
    for gap, n in arrivals:
        now += gap
        if b.try_take(n, now):
            admitted.append((now, n))
    _window_bound_holds(admitted, rate, capacity)


def test_fixed_window_by_hand() -> None:
    """LiteLLM's counter: ``limit`` per window, the window opening at the whole second of its first
    request; nothing refills inside it; its entries vanish ``window_s`` after that request."""
    w = FixedWindow(limit=3, window_s=5)
    assert [w.try_take(1, t) for t in (0.4, 0.5, 0.6, 0.7)] == [True, True, True, False]
    assert w.ready_at_s(1, 4.0) > 5.4  # over the limit: refused until the entries vanish
    assert not w.try_take(1, 4.99)  # no refill inside the window
    assert not w.try_take(1, 5.2)  # past int(0.4) + 5, but the counter is over: still refused
    assert not w.try_take(1, 5.4)  # the entries expire strictly after 0.4 + 5
    assert w.try_take(1, 5.41)  # a new window (start 5, entries until 10.41): a full burst again
    assert w.try_take(1, 5.5) and w.try_take(1, 5.6) and not w.try_take(1, 5.7)
    assert w.ready_at_s(4, 12.7) == float("inf")  # more than a window's worth: never


def test_fixed_window_restarted_at_its_whole_second_is_forgotten_when_its_entries_expire() -> None:
    """A window that ends full but never refused restarts at ``int(t0) + window_s``; its entries
    still vanish after ``t0 + window_s``, so what it counted meanwhile is forgotten: 9 requests
    pass a limit of 3 within about 1.1 s (as measured through LiteLLM's proxy)."""
    w = FixedWindow(limit=3, window_s=5)
    assert all(w.try_take(1, t) for t in (0.7, 0.75, 0.8))  # start 0, entries until 5.7
    assert w.level(4.9) == 0 and w.ready_at_s(1, 4.9) == 5.0  # restarts at the whole second
    assert all(w.try_take(1, t) for t in (5.2, 5.25, 5.3))  # restarted at 5 (entries still until 5.7)
    assert not w.try_take(1, 5.35)
    assert all(w.try_take(1, t) for t in (5.9, 5.95, 6.0))  # the entries vanished: a fresh window
    assert not w.try_take(1, 6.05)


def test_fixed_window_post_charge_past_the_limit_waits_for_the_entries_to_expire() -> None:
    w = FixedWindow(limit=100, window_s=60)
    w.charge(30, 10.5)  # start 10, entries until 70.5
    w.charge(90, 11.0)  # a response's tokens, counted after it: over the limit
    assert w.level(11.0) == -20
    assert w.debt_paid_at_s(11.0) == math.nextafter(70.5, math.inf)
    assert w.level(70.0) == -20 and w.level(70.6) == 100
    with pytest.raises(ServecapError, match="backwards"):
        w.level(16.0)


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(1, 20),
    window_s=st.integers(1, 10),
    gaps=st.lists(st.floats(0, 3), min_size=1, max_size=80),
)
def test_fixed_window_bounds(limit: int, window_s: int, gaps: list[float]) -> None:
    """At most ``3 x limit`` admitted in any ``window_s`` (a window, its restart at the whole
    second, and the fresh one after the entries expire), and a refusal means ``limit`` were
    admitted in the ``window_s + 1`` seconds before it."""
    w = FixedWindow(limit, window_s)
    now, admitted = 0.0, []
    for gap in gaps:
        now += gap
        if w.try_take(1, now):
            admitted.append(now)
        else:
            assert len([t for t in admitted if t > now - window_s - 1]) >= limit
    for t0 in admitted:
        assert len([t for t in admitted if t0 <= t < t0 + window_s]) <= 3 * limit


def test_fixed_window_rpm_like_litellm_counts_per_window() -> None:
    """rpm 8 in 5 s windows: a burst of 10 passes 8; three more 2.5 s later pass none (a token
    bucket of the same rpm per minute refills nothing worth a request in 2.5 s either); a burst at
    6 s opens a new window and 8 pass again, where the bucket (8 per minute) passes none."""
    rng = random.Random(0)
    fixed = RateLimiter({}, default=TenantLimits(rpm=8, window="fixed", window_s=5))
    bucket = RateLimiter({}, default=TenantLimits(rpm=8))
    times = [0.04 * i for i in range(10)] + [2.5, 2.55, 2.6] + [6.0 + 0.04 * i for i in range(10)]
    got = {"fixed": 0, "bucket": 0}
    for name, lim in (("fixed", fixed), ("bucket", bucket)):
        for i, t in enumerate(times):
            if lim.check(Req(i), t, rng) == Admit():
                got[name] += 1
    assert got == {"fixed": 16, "bucket": 8}


def test_fixed_window_queue_waits_for_the_next_window() -> None:
    rng = random.Random(0)
    q = RateLimiter({"a": TenantLimits(rpm=2, window="fixed", window_s=60, on_limit="queue")})
    out = [q.check(Req(i, tenant="a"), 10.5, rng) for i in range(3)]
    assert out == [Admit(), Admit(), Queue("rpm", 70.0)]  # the window opened at 10 s
    assert q.check(Req(2, tenant="a"), 70.0, rng) == Admit()


@settings(max_examples=40, deadline=None)
@given(
    tpm=st.floats(100, 100_000),
    burst=st.floats(100, 50_000),
    kind=st.sampled_from(["prompt", "output", "total"]),
    reqs=st.lists(st.tuples(st.floats(0, 3), st.integers(1, 3_000), st.integers(1, 3_000)), min_size=1, max_size=60),
)
def test_tenant_tpm_limit_holds_exactly_over_any_window(
    tpm: float, burst: float, kind: str, reqs: list[tuple[float, int, int]]
) -> None:
    lim = TenantLimits(tpm=tpm, burst_tokens=burst, tokens=kind)  # type: ignore[arg-type]
    limiter = RateLimiter({"a": lim})
    rng = random.Random(0)
    now = 0.0
    admitted: list[tuple[float, float]] = []
    for i, (gap, p, o) in enumerate(reqs):
        now += gap
        r = Req(i, prompt_tokens=p, output_tokens=o, tenant="a")
        if isinstance(limiter.check(r, now, rng), Admit):
            admitted.append((now, lim.counted_tokens(p, o)))
            limiter.complete(r, now)
    _window_bound_holds(admitted, tpm / 60.0, burst)


def test_rpm_rejects_then_queues_with_a_ready_time() -> None:
    rng = random.Random(0)
    rej = RateLimiter({"a": TenantLimits(rpm=60, burst_requests=2)})
    out = [rej.check(Req(i, tenant="a"), 0.0, rng) for i in range(3)]
    assert out == [Admit(), Admit(), Reject("rpm")]
    q = RateLimiter({"a": TenantLimits(rpm=60, burst_requests=2, on_limit="queue")})
    out = [q.check(Req(i, tenant="a"), 0.0, rng) for i in range(3)]
    assert out[2] == Queue("rpm", 1.0)  # 1 request/s refill: the third fits at t = 1 s
    assert q.check(Req(3, tenant="a"), 1.0, rng) == Admit()


def test_a_request_bigger_than_the_burst_is_rejected_even_when_queueing() -> None:
    limiter = RateLimiter({"a": TenantLimits(tpm=1_000, on_limit="queue")})
    r = Req(0, prompt_tokens=900, output_tokens=200, tenant="a")
    assert limiter.check(r, 0.0, random.Random(0)) == Reject("tpm")


def test_concurrency_cap_released_on_completion() -> None:
    rng = random.Random(0)
    limiter = RateLimiter({"a": TenantLimits(max_concurrent=2)})
    a, b, c = (Req(i, tenant="a") for i in range(3))
    assert limiter.check(a, 0, rng) == Admit() and limiter.check(b, 0, rng) == Admit()
    assert limiter.check(c, 0, rng) == Reject("concurrency")
    assert limiter.in_flight("a") == 2
    limiter.complete(a, 1.0)
    assert limiter.check(c, 1.0, rng) == Admit()


def test_daily_budget_resets_at_midnight() -> None:
    rng = random.Random(0)
    limiter = RateLimiter({"a": TenantLimits(daily_tokens=1_000, on_limit="queue")})
    r = [Req(i, prompt_tokens=300, output_tokens=100, tenant="a") for i in range(4)]
    assert [limiter.check(x, 10.0, rng) for x in r[:2]] == [Admit(), Admit()]  # 800 of 1000
    assert limiter.check(r[2], 20.0, rng) == Queue("daily_budget", 86_400.0)
    assert limiter.check(r[2], 86_400.0, rng) == Admit()


def test_post_charged_tokens_let_concurrent_streams_overshoot() -> None:
    """As LiteLLM counts TPM after the response: five concurrent 175-token requests all pass a
    100-token limit (875 admitted), and the next request waits for the debt to be paid off."""
    rng = random.Random(0)
    post = RateLimiter({"a": TenantLimits(tpm=100, charge_at="completion")})
    reqs = [Req(i, prompt_tokens=75, output_tokens=100, tenant="a") for i in range(6)]
    assert all(post.check(r, 0.0, rng) == Admit() for r in reqs[:5])
    for r in reqs[:5]:
        post.complete(r, 1.0)
    assert post.check(reqs[5], 1.0, rng) == Reject("tpm")
    # all five in flight at once, then done: a debt of 875 - 100 = 775 tokens, paid off at 100/60 tokens/s
    queued = RateLimiter({"a": TenantLimits(tpm=100, charge_at="completion", on_limit="queue")})
    assert all(queued.check(r, 0.0, rng) == Admit() for r in reqs[:5])
    for r in reqs[:5]:
        queued.complete(r, 0.0)
    decision = queued.check(reqs[5], 0.0, rng)
    assert isinstance(decision, Queue) and decision.ready_at_s == pytest.approx(775 / (100 / 60), rel=1e-5)
    # charged up front, only the first fits
    pre = RateLimiter({"a": TenantLimits(tpm=200)})
    assert [pre.check(r, 0.0, rng) for r in reqs[:2]] == [Admit(), Reject("tpm")]


def test_completion_charge_counts_what_was_produced() -> None:
    rng = random.Random(0)
    limiter = RateLimiter({"a": TenantLimits(tpm=600, tokens="output", charge_at="completion")})
    r = Req(0, prompt_tokens=10, output_tokens=1_000, tenant="a")
    assert limiter.check(r, 0.0, rng) == Admit()
    limiter.complete(r, 0.0, output_tokens=500)  # cut short at 500 tokens
    assert limiter.check(Req(1, tenant="a"), 0.0, rng) == Admit()  # 600 - 500 > 0


def test_per_replica_enforcement_multiplies_the_limit() -> None:
    def admitted(replicas: int, enforcement: str) -> int:
        limiter = RateLimiter(
            {"a": TenantLimits(rpm=10)},
            replicas=replicas,
            enforcement=enforcement,  # type: ignore[arg-type]
        )
        rng = random.Random(3)
        return sum(isinstance(limiter.check(Req(i, tenant="a"), 0.0, rng), Admit) for i in range(200))

    assert admitted(4, "global") == 10
    assert admitted(1, "per_replica") == 10
    assert admitted(4, "per_replica") == 40  # four counters of 10 each: 4x the limit


def test_a_heavy_tenant_is_limited_and_a_light_one_untouched() -> None:
    def run(with_heavy: bool) -> tuple[list[bool], int]:
        limiter = RateLimiter({"heavy": TenantLimits(rpm=60, tpm=20_000), "light": TenantLimits(rpm=60, tpm=20_000)})
        rng = random.Random(1)
        light: list[bool] = []
        heavy_ok = 0
        for i in range(600):
            t = i * 0.1
            if with_heavy:
                h = Req(10_000 + i, prompt_tokens=2_000, output_tokens=500, tenant="heavy")
                heavy_ok += isinstance(limiter.check(h, t, rng), Admit)
                limiter.complete(h, t)
            if i % 20 == 0:
                lr = Req(i, prompt_tokens=200, output_tokens=100, tenant="light")
                light.append(isinstance(limiter.check(lr, t, rng), Admit))
                limiter.complete(lr, t)
        return light, heavy_ok

    light_alone, _ = run(False)
    light_with_heavy, heavy_ok = run(True)
    assert light_with_heavy == light_alone and all(light_alone)
    # 60 s at 20,000 tokens/min plus the 20,000 burst: at most 16 of the 2,500-token requests
    assert heavy_ok <= (20_000 + 20_000) // 2_500 and heavy_ok < 600


def test_unlimited_tenants_and_defaults() -> None:
    rng = random.Random(0)
    limiter = RateLimiter({"a": TenantLimits(rpm=1)}, default=TenantLimits(rpm=2))
    assert limiter.check(Req(0, tenant="zzz"), 0, rng) == Admit()
    assert limiter.check(Req(1, tenant="zzz"), 0, rng) == Admit()
    assert limiter.check(Req(2, tenant="zzz"), 0, rng) == Reject("rpm")
    assert RateLimiter({}).check(Req(3, tenant="x"), 0, rng) == Admit()


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: TenantLimits(rpm=-1), "gateway.rate_limits.rpm"),
        (lambda: TenantLimits(tpm=0), "gateway.rate_limits.tpm"),
        (lambda: TenantLimits(tpm=10, burst_tokens=-5), "gateway.rate_limits.burst_tokens"),
        (lambda: TenantLimits(burst_requests=5), "gateway.rate_limits.burst_requests"),
        (lambda: TenantLimits(max_concurrent=0), "gateway.rate_limits.max_concurrent"),
        (lambda: TenantLimits(daily_tokens=float("inf")), "gateway.rate_limits.daily_tokens"),
        (lambda: TenantLimits(tokens="completion"), "gateway.rate_limits.tokens"),  # type: ignore[arg-type]
        (lambda: TenantLimits(charge_at="later"), "gateway.rate_limits.charge_at"),  # type: ignore[arg-type]
        (lambda: TenantLimits(on_limit="drop"), "gateway.rate_limits.on_limit"),  # type: ignore[arg-type]
        (lambda: RateLimiter({}, replicas=0), "gateway.replicas"),
        (lambda: RateLimiter({}, enforcement="local"), "gateway.rate_limits.enforcement"),  # type: ignore[arg-type]
        (lambda: TenantLimits(rpm=5, window="sliding"), "gateway.rate_limits.window"),  # type: ignore[arg-type]
        (lambda: TenantLimits(rpm=5, window="fixed", window_s=0), "gateway.rate_limits.window_s"),
        (lambda: TenantLimits(rpm=5, burst_requests=9, window="fixed"), "gateway.rate_limits.burst_requests"),
        (lambda: FixedWindow(0, 60), "window.limit"),
        (lambda: TokenBucket(0, 1), "bucket.capacity"),
        (lambda: TokenBucket(1, -1), "bucket.rate"),
    ],
)
def test_bad_limits_name_the_field(make: object, field: str) -> None:
    with pytest.raises(ServecapError) as err:
        make()  # type: ignore[operator]
    assert err.value.field == field
    assert "\n" not in str(err.value)
