"""The gateway stage in the fleet simulator, end to end (docs/gateway.md, "In the fleet simulator")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servecap.errors import ServecapError
from servecap.fleet import FleetResult, simulate_fleet
from servecap.fleet.file_schema import build_fleet, fleet_from_dict
from servecap.workload import RequestArrays, generate_arrays, workload_from_dict

POOL = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192, "cold_start": "instant"}


def _fleet(gateway: dict[str, Any] | None, pools: list[dict[str, Any]] | None = None, **kw: Any) -> Any:
    raw: dict[str, Any] = {"pools": pools or [{**POOL, "name": "large", "replicas": 2}], **kw}
    if gateway is not None:
        raw["gateway"] = gateway
    spec, _ = build_fleet(fleet_from_dict(raw))
    return spec


def _two_tenants(n: int, rate: float, heavy_share: float = 0.5, seed: int = 0, repeats: float = 0.0) -> RequestArrays:
    faq: dict[str, Any] = {"name": "faq", "share": 0.3, "output_tokens": 64}
    if repeats:
        faq["repeats"] = {"rate": repeats, "groups": 20, "zipf_s": 1.0}
    wl = workload_from_dict(
        {
            "arrival": {"kind": "poisson", "rate_per_s": rate},
            "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.6, "max": 3000},
            "output_tokens": {"kind": "lognormal", "median": 120, "sigma": 0.5, "max": 600},
            "num_requests": n,
            "tenants": [
                {"name": "light", "share": 1 - heavy_share, "classes": [{"name": "chat", "share": 0.7}, faq]},
                {"name": "heavy", "share": heavy_share},
            ],
        }
    )
    return generate_arrays(wl, np.random.default_rng(seed))


def _run(gateway: dict[str, Any] | None, arrays: RequestArrays, seed: int = 0, **kw: Any) -> FleetResult:
    return simulate_fleet(_fleet(gateway, **kw), arrays, seed)


def _tenant_rows(arrays: RequestArrays, name: str) -> np.ndarray:
    return np.flatnonzero(arrays.tenant == arrays.tenant_names.index(name))


def _check_one_outcome(res: FleetResult, arrays: RequestArrays) -> None:
    g = res.gateway
    assert g is not None
    assert sum(g.arrivals_by_tenant.values()) == len(arrays)
    for tenant, n in g.arrivals_by_tenant.items():
        assert sum(g.outcomes_by_tenant.get(tenant, {}).values()) == n, tenant
    assert len(res.columns) == len(arrays)  # one record per request


def test_empty_gateway_changes_nothing() -> None:
    arrays = _two_tenants(400, 20.0)
    plain = simulate_fleet(_fleet(None), arrays, 3)
    gated = simulate_fleet(_fleet({}), arrays, 3)
    assert plain.records() == gated.records()
    assert gated.gateway is not None and gated.gateway.outcome_total("completed") == 400


def test_token_bucket_holds_over_every_window() -> None:
    """Admitted tokens in any window of length w are at most rate x w + burst (charged at
    admission, so every admission is a charge at the request's arrival)."""
    arrays = _two_tenants(600, 40.0, heavy_share=0.6)
    tpm, burst = 60_000.0, 5_000.0
    gw = {"rate_limits": {"tenants": {"heavy": {"tpm": tpm, "burst_tokens": burst, "tokens": "total"}}}}
    res = _run(gw, arrays)
    _check_one_outcome(res, arrays)
    heavy = _tenant_rows(arrays, "heavy")
    errors = res.columns.errors
    admitted = [int(i) for i in heavy if errors[int(i)] != "rate_limited_tpm"]
    assert 0 < len(admitted) < len(heavy)  # the limit bites
    t = arrays.arrival_s[admitted]
    tok = (arrays.prompt_tokens + arrays.output_tokens)[admitted]
    rate_s = tpm / 60
    for i in range(len(admitted)):
        window = np.cumsum(tok[i:])  # tokens admitted in [t_i, t_j]
        assert np.all(window <= rate_s * (t[i:] - t[i]) + burst + 1e-6)
    light = _tenant_rows(arrays, "light")
    assert all(errors[int(i)] is None for i in light)  # the light tenant has no limit


def test_cache_hit_never_reaches_a_replica() -> None:
    arrays = _two_tenants(600, 15.0, repeats=0.6)
    res = _run({"cache": {"kind": "exact", "latency_s": 0.004}}, arrays)
    _check_one_outcome(res, arrays)
    g = res.gateway
    assert g is not None
    hits = g.outcome_total("cache_hit_exact")
    assert hits > 20
    hit_ids = [i for i in range(len(arrays)) if i not in g.served_ids]
    assert len(hit_ids) == hits
    assert all(res.replica_of[i] == -1 for i in hit_ids)
    assert sum(r.routed for r in res.replicas) == len(arrays) - hits
    # answered in the cache's latency
    first = res.columns.first_token_s[hit_ids] - res.columns.arrival_s[hit_ids]
    assert np.allclose(first, 0.004)
    served = res.served_summary
    assert served is not None and served.num_requests == len(arrays) - hits


def _overflow_fleet_pools() -> list[dict[str, Any]]:
    return [
        {**POOL, "name": "large", "replicas": 1, "max_num_seqs": 8},
        {**POOL, "name": "small", "model": "meta-llama/Llama-3.2-1B", "replicas": 1},
    ]


def test_overflow_only_past_its_threshold() -> None:
    arrays = _two_tenants(500, 30.0)
    routing = {"kind": "share", "shares": {"large": 1.0}}
    never = {"routing": routing, "overflow": [{"from_pool": "large", "to_pool": "small", "max_queue": 10_000}]}
    res = _run(never, arrays, pools=_overflow_fleet_pools())
    assert res.gateway is not None and res.gateway.decision_total("overflowed") == 0
    assert all(r.routed == 0 for r in res.replicas if r.pool == "small")
    busy = {"routing": routing, "overflow": [{"from_pool": "large", "to_pool": "small", "max_queue": 4}]}
    res2 = _run(busy, arrays, pools=_overflow_fleet_pools())
    _check_one_outcome(res2, arrays)
    g = res2.gateway
    assert g is not None
    n = g.decision_total("overflowed")
    assert n > 0
    assert sum(r.routed for r in res2.replicas if r.pool == "small") == n
    # the large pool's waiting queue never grew far past the threshold (overflow relieved it)
    assert res2.summary.ttft_s.p99 is not None and res.summary.ttft_s.p99 is not None
    assert res2.summary.ttft_s.p99 < res.summary.ttft_s.p99


def test_fallback_on_a_failed_pool_loses_no_request() -> None:
    arrays = _two_tenants(400, 10.0)
    pools = [
        {**POOL, "name": "large", "replicas": 1, "crash_at_s": [5.0]},
        {**POOL, "name": "small", "model": "meta-llama/Llama-3.2-1B", "replicas": 1},
    ]
    gw = {
        "routing": {"kind": "share", "shares": {"large": 1.0}},
        "fallback": {"chains": {"large": ["small", "api"]}, "max_retries": 2},
        "providers": [{"name": "api", "ttft_median_s": 0.5, "usd_per_m_input": 3, "usd_per_m_output": 15}],
    }
    res = _run(gw, arrays, pools=pools, on_failure="fail")
    _check_one_outcome(res, arrays)
    g = res.gateway
    assert g is not None
    assert g.outcome_total("completed") == len(arrays)  # nothing lost: every request served
    assert g.decision_total("fell_back") > 0
    # without the fallback, the crash fails requests
    res2 = _run({"routing": gw["routing"]}, arrays, pools=pools, on_failure="fail")
    assert res2.gateway is not None and res2.gateway.outcome_total("failed") > 0


def test_external_provider_costs_per_token() -> None:
    arrays = _two_tenants(200, 10.0)
    gw = {
        "routing": {"kind": "share", "shares": {"api": 1.0}},
        "providers": [
            {
                "name": "api",
                "ttft_median_s": 0.4,
                "ttft_sigma": 0.0,
                "output_tok_s": 50,
                "usd_per_m_input": 3,
                "usd_per_m_output": 15,
            }
        ],
    }
    res = _run(gw, arrays)
    g = res.gateway
    assert g is not None and g.provider_requests == {"api": 200}
    want = float((arrays.prompt_tokens * 3 + arrays.output_tokens * 15).sum()) / 1e6
    assert g.provider_cost_usd == pytest.approx(want)
    assert all(r.routed == 0 for r in res.replicas)
    ttft = res.columns.first_token_s - res.columns.arrival_s
    assert np.allclose(ttft, 0.4)


def test_per_tenant_quota_isolates_a_heavy_tenant() -> None:
    """A heavy tenant floods one replica; its rpm limit keeps the light tenant within its SLO."""
    arrays = _two_tenants(1500, 60.0, heavy_share=0.85)
    pools = [{**POOL, "name": "large", "replicas": 1, "max_num_seqs": 32}]
    free = _run({}, arrays, pools=pools)
    limited = _run({"rate_limits": {"tenants": {"heavy": {"rpm": 300, "burst_requests": 10}}}}, arrays, pools=pools)
    light = _tenant_rows(arrays, "light")

    def p99_ttft(res: FleetResult) -> float:
        c = res.columns
        ttft = (c.first_token_s - c.arrival_s)[light]
        return float(np.percentile(ttft[np.isfinite(ttft)], 99))

    assert p99_ttft(free) > 2.0  # unprotected: the light tenant's p99 TTFT breaks a 1 s SLO
    assert p99_ttft(limited) < 1.0  # protected
    g = limited.gateway
    assert g is not None
    assert g.outcomes_by_tenant["heavy"].get("rate_limited_rpm", 0) > 0
    assert "rate_limited_rpm" not in g.outcomes_by_tenant["light"]


def test_completion_charging_overshoots_admission_does_not() -> None:
    arrays = _two_tenants(300, 30.0, heavy_share=0.95)
    limits = {"tpm": 20_000, "tokens": "output", "on_limit": "reject"}
    at_admission = _run({"rate_limits": {"tenants": {"heavy": {**limits, "charge_at": "admission"}}}}, arrays)
    at_completion = _run({"rate_limits": {"tenants": {"heavy": {**limits, "charge_at": "completion"}}}}, arrays)

    def admitted_output(res: FleetResult) -> int:
        ok = [i for i, e in enumerate(res.columns.errors) if e is None]
        return int(arrays.output_tokens[ok].sum())

    assert admitted_output(at_completion) > admitted_output(at_admission)


def test_per_replica_enforcement_multiplies_the_limit() -> None:
    """Four gateway replicas with their own counters pass about four times the limit."""
    arrays = _two_tenants(800, 40.0, heavy_share=0.95)
    limit = {"rpm": 120, "burst_requests": 5}
    one = _run({"rate_limits": {"tenants": {"heavy": limit}}}, arrays)
    four = _run({"rate_limits": {"tenants": {"heavy": limit}, "replicas": 4, "enforcement": "per_replica"}}, arrays)
    assert one.gateway is not None and four.gateway is not None
    h1 = one.gateway.outcomes_by_tenant["heavy"]["completed"]
    h4 = four.gateway.outcomes_by_tenant["heavy"]["completed"]
    span_s = float(arrays.arrival_s[-1])
    assert h1 <= 120 / 60 * span_s + 5 + 1
    assert 3 * h1 < h4 <= 4 * (120 / 60 * span_s + 5) + 1


def test_gateway_queue_sheds_the_lowest_tier_first() -> None:
    arrays = _two_tenants(600, 80.0, heavy_share=0.5)
    pools = [{**POOL, "name": "large", "replicas": 1, "max_num_seqs": 4}]
    gw = {"queue": {"capacity": 20, "max_wait_s": 10, "tiers": {"light": 0, "heavy": 5}}}
    res = _run(gw, arrays, pools=pools)
    _check_one_outcome(res, arrays)
    g = res.gateway
    assert g is not None
    heavy, light = g.outcomes_by_tenant["heavy"], g.outcomes_by_tenant["light"]
    assert heavy.get("shed", 0) + heavy.get("queue_full", 0) > 0
    assert light.get("shed", 0) == 0  # never pushed out for a worse tier
    assert light.get("completed", 0) / len(_tenant_rows(arrays, "light")) > heavy.get("completed", 0) / len(
        _tenant_rows(arrays, "heavy")
    )


_GATEWAYS = st.fixed_dictionaries(
    {},
    optional={
        "rate_limits": st.builds(
            lambda rpm, conc, on: {"tenants": {"heavy": {"rpm": rpm, "max_concurrent": conc, "on_limit": on}}},
            st.sampled_from([120, 600, 3000]),
            st.sampled_from([2, 16]),
            st.sampled_from(["reject", "queue"]),
        ),
        "queue": st.builds(
            lambda c, w: {"capacity": c, "max_wait_s": w}, st.sampled_from([1, 10]), st.sampled_from([0.5, 5.0])
        ),
        "cache": st.just({"kind": "semantic", "hit_rate": 0.3, "false_hit_rate": 0.1}),
        "fallback": st.just({"chains": {"large": ["api"]}, "max_retries": 1}),
    },
)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(gw=_GATEWAYS, seed=st.integers(0, 3))
def test_every_request_has_one_outcome(gw: dict[str, Any], seed: int) -> None:
    gw = dict(gw)
    gw["providers"] = [{"name": "api", "ttft_median_s": 0.3, "failure_rate": 0.2}]
    arrays = _two_tenants(300, 40.0, seed=seed)
    pools = [{**POOL, "name": "large", "replicas": 1, "max_num_seqs": 8, "crash_at_s": [3.0]}]
    res = _run(gw, arrays, seed=seed, pools=pools, on_failure="fail")
    _check_one_outcome(res, arrays)


@pytest.mark.parametrize(
    ("gateway", "field"),
    [
        ({"routing": {"kind": "class", "pools": {"faq": "smal"}, "default": "large"}}, "gateway.routing.pools.faq"),
        ({"overflow": [{"from_pool": "large", "to_pool": "nowhere", "max_queue": 1}]}, "gateway.overflow[0].to_pool"),
        ({"fallback": {"chains": {"large": ["api"]}}}, "gateway.fallback.chains.large[0]"),
        ({"rate_limits": {"tenants": {"a": {"tpm": -5}}}}, "gateway.rate_limits.tenants.a.tpm"),
        ({"queue": {"capacity": 0}}, "gateway.queue.capacity"),
        ({"cache": {"kind": "fuzzy"}}, "gateway.cache.kind"),
    ],
)
def test_bad_gateway_names_the_field(gateway: dict[str, Any], field: str) -> None:
    with pytest.raises(ServecapError) as err:
        _fleet(gateway)
    assert err.value.field == field
