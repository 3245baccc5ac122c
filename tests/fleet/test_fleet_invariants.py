"""Fleet invariants: determinism, agreement with the single-replica simulator, one outcome per
request, Little's law, no traffic before ready, cost = the integral of requested GPUs."""

from __future__ import annotations

import numpy as np
import pytest
from fleet_helpers import fleet, open_loop, prefix_arrays, setup_8b, step_arrays

from servecap.fleet import ColdStart, Phase, simulate_fleet
from servecap.fleet.simulate import requested_gpu_seconds
from servecap.policy.autoscalers import AutoscalerSettings
from servecap.sim import simulate
from servecap.workload import workload_from_flags

COLD_20S = ColdStart(Phase(20.0), Phase(0.0), float("inf"), Phase(0.0), Phase(0.0))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True))


@pytest.mark.parametrize("router", ["random", "least-outstanding", "prefix-affinity", "power-of-two"])
def test_same_seed_same_result(router: str) -> None:
    wl = open_loop(60, 400, prompt_sigma=0.8, output_sigma=0.8)
    a = simulate_fleet(fleet(3, router), wl, 7)
    b = simulate_fleet(fleet(3, router), wl, 7)
    assert _same(a.columns.first_token_s, b.columns.first_token_s)
    assert _same(a.columns.end_s, b.columns.end_s)
    assert a.replica_of == b.replica_of and a.replicas == b.replicas
    c = simulate_fleet(fleet(3, router), wl, 8)
    assert not _same(a.columns.end_s, c.columns.end_s)


@pytest.mark.parametrize(
    "workload",
    [
        open_loop(25, 400, prompt_sigma=1.0, output_sigma=1.0),
        workload_from_flags(rate=30, num_requests=300, prompt_tokens=256, output_tokens=64),
    ],
)
def test_one_replica_round_robin_equals_simulate(workload: object) -> None:
    setup = setup_8b()
    got = simulate_fleet(fleet(1, "round-robin", setup), workload, 3)  # type: ignore[arg-type]
    want = simulate(setup, workload, np.random.default_rng(3))  # type: ignore[arg-type]
    assert got.records() == want.records()


def test_one_replica_equals_simulate_with_shared_prefixes_and_closed_loop() -> None:
    setup = setup_8b()
    arr = prefix_arrays(300, 20, 5, 1024, 64, 64)
    got = simulate_fleet(fleet(1, "round-robin", setup), arr, 0)
    want = simulate(setup, arr)
    assert got.records() == want.records()
    users = workload_from_flags(users=20, think_time_s=2.0, num_requests=200, prompt_tokens=256, output_tokens=64)
    got_c = simulate_fleet(fleet(1, "round-robin", setup), users, 4)
    want_c = simulate(setup, users, np.random.default_rng(4))
    assert _same(got_c.columns.end_s, want_c.columns.end_s)
    assert _same(got_c.columns.arrival_s, want_c.columns.arrival_s)


def test_every_request_has_exactly_one_outcome_under_crashes_and_scaling() -> None:
    arr = step_arrays(5, 30, 40, 90)
    auto = AutoscalerSettings(target=4, interval_s=5, min_replicas=1, max_replicas=4, downscale_stabilization_s=20)
    spec = fleet(
        2,
        "least-outstanding",
        setup_8b(max_num_seqs=8),
        autoscaler=auto,
        cold_start=COLD_20S,
        crash_at_s=(45.0, 60.0),
        on_failure="fail",
    )
    res = simulate_fleet(spec, arr, 1)
    assert sum(res.outcomes.values()) == len(arr)
    assert res.outcomes.get("replica_failed", 0) > 0
    # a finished request has its times, a failed one has none
    ok = np.array([e is None for e in res.columns.errors])
    assert np.all(np.isfinite(res.columns.end_s[ok])) and np.all(np.isnan(res.columns.end_s[~ok]))
    retry = simulate_fleet(spec.__class__(**{**_fields(spec), "on_failure": "retry"}), arr, 1)
    assert sum(retry.outcomes.values()) == len(arr)
    assert retry.retried > 0 and retry.outcomes.get("replica_failed", 0) == 0
    assert retry.outcomes["ok"] == len(arr)


def _fields(spec: object) -> dict[str, object]:
    return {f: getattr(spec, f) for f in spec.__slots__}  # type: ignore[attr-defined]


def test_littles_law_per_replica_and_fleet() -> None:
    spec = fleet(4, "least-outstanding")
    res = simulate_fleet(spec, open_loop(80, 1500, prompt_sigma=1.0, output_sigma=1.0), 2)
    for r in res.replicas:
        assert r.area_s == pytest.approx(r.sojourn_s, rel=1e-9)
    # fleet-wide: L = lambda W over the run, from the records alone
    c = res.columns
    ok = np.isfinite(c.end_s)
    # in the fleet from arrival to end, less the API servers' per-request cost the client also sees
    overhead = spec.pools[0].setup.efficiency.request_overhead_s
    w_total = float(np.sum(c.end_s[ok] - c.arrival_s[ok] - overhead))
    assert res.mean_in_system * res.horizon_s == pytest.approx(w_total, rel=1e-9)
    lam = ok.sum() / res.horizon_s
    w_mean = w_total / ok.sum()
    assert res.mean_in_system == pytest.approx(lam * w_mean, rel=1e-9)


def test_no_traffic_before_ready_and_cost_is_the_gpu_integral() -> None:
    arr = step_arrays(5, 30, 30, 80)
    auto = AutoscalerSettings(target=4, interval_s=5, min_replicas=0, max_replicas=4, downscale_stabilization_s=10)
    spec = fleet(
        1,
        "round-robin",
        setup_8b(max_num_seqs=8),
        autoscaler=auto,
        cold_start=COLD_20S,
        price_per_gpu_hour=3.0,
        gpus_per_replica=2,
    )
    res = simulate_fleet(spec, arr, 0)
    started_cold = [r for r in res.replicas if r.requested_s > 0]
    assert started_cold, "the autoscaler should have added replicas"
    for r in res.replicas:
        if r.ready_s is not None:
            assert r.ready_s - r.requested_s == pytest.approx(0.0 if r.requested_s == 0 else 20.0)
        served = [i for i, rid in enumerate(res.replica_of) if rid == r.replica_id]
        if served:
            assert r.ready_s is not None
            assert float(np.min(res.columns.first_token_s[served])) >= r.ready_s
            assert float(np.min(res.columns.queue_time_s[served] + res.columns.arrival_s[served])) >= r.ready_s
    gpu_s = requested_gpu_seconds(res.gpu_log, res.horizon_s)
    assert res.gpu_hours == pytest.approx(gpu_s / 3600, rel=1e-9)
    assert res.cost_usd == pytest.approx(gpu_s / 3600 * 3.0, rel=1e-9)
    assert any(to < frm for _, _, frm, to in res.scale_events), "it should also have scaled down"


def test_requested_gpu_seconds_by_hand() -> None:
    # 2 GPUs from 0 to 10 s, 4 more from 5 s, 2 leave at 8 s; run ends at 10 s
    log = [(0.0, 2), (5.0, 4), (8.0, -2)]
    assert requested_gpu_seconds(log, 10.0) == pytest.approx(2 * 5 + 6 * 3 + 4 * 2)


def test_per_tenant_and_class_summaries_on_a_time_varying_mix() -> None:
    from servecap.workload import workload_from_dict

    wl = workload_from_dict(
        {
            "arrival": {
                "kind": "schedule",
                "rate": {
                    "kind": "piecewise",
                    "steps": [{"start_s": 0, "rate_per_s": 10}, {"start_s": 20, "rate_per_s": 40}],
                },
            },
            "prompt_tokens": 256,
            "output_tokens": 64,
            "num_requests": 1200,
            "tenants": [
                {
                    "name": "acme",
                    "share": 3,
                    "classes": [{"name": "chat", "share": 0.7}, {"name": "faq", "share": 0.3}],
                },
                {"name": "batchco", "share": 1},
            ],
        }
    )
    res = simulate_fleet(fleet(3, "least-outstanding"), wl, 5)
    assert set(res.by_tenant) == {"acme", "batchco"}
    assert sum(s.num_requests for s in res.by_tenant.values()) == 1200
    assert sum(s.num_requests for s in res.by_class.values()) == 1200
    assert res.by_tenant["acme"].num_requests > 2 * res.by_tenant["batchco"].num_requests
    rate = np.array(res.timeseries.arrival_rate_req_s)
    t = np.array(res.timeseries.time_s)
    assert rate[(t > 3) & (t < 18)].mean() < 0.5 * rate[(t > 23) & (t < 35)].mean()


def test_p99_ttft_signal_scales_up_and_mtbf_crashes_are_deterministic() -> None:
    arr = step_arrays(5, 30, 20, 60)
    auto = AutoscalerSettings(
        signal="p99_ttft_s", target=0.5, interval_s=5, min_replicas=1, max_replicas=6, window_s=10
    )
    spec = fleet(1, "least-outstanding", setup_8b(max_num_seqs=8), autoscaler=auto, cold_start=COLD_20S, mtbf_s=30.0)
    a = simulate_fleet(spec, arr, 3)
    b = simulate_fleet(spec, arr, 3)
    assert any(to > frm for _, _, frm, to in a.scale_events)
    assert sum(1 for r in a.replicas if r.state == "failed") >= 1
    assert a.replicas == b.replicas and a.outcomes == b.outcomes
    assert sum(a.outcomes.values()) == len(arr)


def test_rolling_p99_by_hand() -> None:
    from servecap.fleet.simulate import rolling_p99

    first = np.array([1.0, 2.0, 3.0, 12.0, np.nan])
    ttft = np.array([0.1, 0.3, 0.2, 0.5, np.nan])
    # at 10 s with a 10-s window: (0, 10] holds the first three -> p99 of {0.1, 0.2, 0.3} = 0.298
    # at 12 s: (2, 12] holds 3 s and 12 s -> p99 of {0.2, 0.5} = 0.497; at 30 s: none -> 0
    assert rolling_p99(ttft, first, [10.0, 12.0, 30.0], 10.0) == pytest.approx((0.298, 0.497, 0.0))


def test_route_to_a_named_pool_waits_for_that_pools_cold_start() -> None:
    from servecap.fleet import FleetSpec, Pool
    from servecap.fleet.fleet import Fleet
    from servecap.workload import RequestSpec

    big = Pool("big", setup_8b(), replicas=2, cold_start=COLD_20S)
    small = Pool(
        "small",
        setup_8b(max_num_seqs=8),
        replicas=0,
        cold_start=COLD_20S,
        autoscaler=AutoscalerSettings(min_replicas=0, max_replicas=2, interval_s=5),
    )
    f = Fleet(FleetSpec((big, small), router="least-outstanding"), 0)
    for i in range(6):
        f.advance_to(float(i))
        assert f.route(RequestSpec(i, float(i), 128, 16), float(i), "small" if i % 2 else "big")
    f.advance_to(100.0)
    pools = {r.replica_id: r.pool for r in f.replicas}
    served = {rid: pools[r.replica_id] for r in f.replicas for rid in r.served_ids}
    assert served == {0: "big", 1: "small", 2: "big", 3: "small", 4: "big", 5: "small"}
    records = {x.request_id: x for x in f.take_finished()}
    small_ready = min(r.ready_s for r in f.replicas if r.pool == "small" and r.ready_s is not None)
    assert small_ready == pytest.approx(25.0)  # scaled from zero at the 5-s tick, then a 20-s cold start
    assert all(records[i].first_token_s >= small_ready for i in (1, 3, 5))  # type: ignore[operator]
    assert records[1].arrival_s == 1.0  # its latency counts from its arrival
    with pytest.raises(Exception, match="pool='tiny'"):
        f.route(RequestSpec(9, 100.0, 16, 16), 100.0, "tiny")
