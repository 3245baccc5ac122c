"""Autoscaling per role: the prefill pool and the decode pool scale on their own signals, with
cold starts, as NVIDIA Dynamo's planner scales prefill workers on the prefill queue and TTFT and
decode workers on KV-cache use and ITL."""

from __future__ import annotations

from fleet_helpers import setup_8b
from test_pd_fleet import _FP, check_released, run

from servecap.fleet import FleetSpec, Pool
from servecap.fleet.spec import ColdStart, Phase
from servecap.policy.autoscalers import AutoscalerSettings

_COLD = ColdStart(Phase(5.0), Phase(0.0), float("inf"), Phase(0.0), Phase(0.0))  # 5 s, fixed


def test_prefill_and_decode_pools_scale_on_their_own_signals() -> None:
    prefill = Pool(
        "p",
        setup_8b(),
        replicas=1,
        cold_start=_COLD,
        role="prefill",
        kv=_FP,
        autoscaler=AutoscalerSettings(signal="num_requests_waiting", target=2.0, interval_s=2.0, max_replicas=4),
    )
    decode = Pool(
        "d",
        setup_8b(2000 * 131_072 * 12),  # room for about a dozen long answers
        replicas=1,
        cold_start=_COLD,
        role="decode",
        kv=_FP,
        autoscaler=AutoscalerSettings(signal="kv_usage", target=0.5, interval_s=2.0, max_replicas=4),
    )
    spec = FleetSpec((prefill, decode))
    fleet, rec = run(spec, 40.0, 1200, 3000, 600)
    assert sorted(r.request_id for r in rec.records) == list(range(1200))
    assert all(r.error is None for r in rec.records)
    pools_scaled = {pool for _, pool, a, b in fleet.scale_events if b > a}
    assert pools_scaled == {"p", "d"}
    # a new replica serves nothing before its cold start ends
    for r in fleet.replicas:
        if r.requested_s > 0:
            assert r.ready_s is None or r.ready_s >= r.requested_s + 5.0
    check_released(fleet)


def test_a_prefill_pool_on_ttft_and_a_decode_pool_on_itl_scale_up_under_load() -> None:
    # NVIDIA Dynamo's planner: prefill workers on TTFT, decode workers on ITL. One decode replica
    # whose batch grows past the 12 ms ITL target (a step of 8B on an H100 is ~7.5 ms alone)
    # and one prefill replica whose queue pushes p99 TTFT past 1 s.
    prefill = Pool(
        "p",
        setup_8b(),
        replicas=1,
        cold_start=_COLD,
        role="prefill",
        kv=_FP,
        # a request's TTFT is counted when it has finished (600 tokens: seconds later): a 30 s window
        autoscaler=AutoscalerSettings(signal="p99_ttft_s", target=1.0, interval_s=2.0, max_replicas=4, window_s=30.0),
    )
    decode = Pool(
        "d",
        setup_8b(),
        replicas=1,
        cold_start=_COLD,
        role="decode",
        kv=_FP,
        autoscaler=AutoscalerSettings(signal="p99_itl_s", target=0.012, interval_s=2.0, max_replicas=4, window_s=5.0),
    )
    fleet, rec = run(FleetSpec((prefill, decode)), 40.0, 1200, 3000, 600)
    assert sorted(r.request_id for r in rec.records) == list(range(1200))
    assert all(r.error is None for r in rec.records)
    assert {pool for _, pool, a, b in fleet.scale_events if b > a} == {"p", "d"}
    check_released(fleet)
