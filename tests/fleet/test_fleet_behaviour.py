"""Known effects the fleet simulator must reproduce (direction and rough size, not figures)."""

from __future__ import annotations

import numpy as np
from fleet_helpers import fleet, open_loop, prefix_arrays, setup_8b, step_arrays

from servecap.fleet import ColdStart, FleetResult, Phase, simulate_fleet
from servecap.policy.autoscalers import AutoscalerSettings


def test_least_outstanding_beats_round_robin_on_heavy_tails() -> None:
    wl = open_loop(80, 2500, prompt=1024, output=128, prompt_sigma=1.2, output_sigma=1.2)
    rr = simulate_fleet(fleet(4, "round-robin"), wl, 1)
    lo = simulate_fleet(fleet(4, "least-outstanding"), wl, 1)
    assert lo.summary.ttft_s.p99 < 0.7 * rr.summary.ttft_s.p99


def test_prefix_affinity_beats_random_on_shared_prefixes() -> None:
    # 60 groups x 2,048-token prompts = 7,680 blocks of prefix: more than one replica's 4,000
    small = setup_8b(kv_cache_memory_bytes=4000 * 16 * 131072)
    arr = prefix_arrays(1500, 30, 60, 2048, 64, 64)
    rnd = simulate_fleet(fleet(4, "random", small), arr, 1)
    aff = simulate_fleet(fleet(4, "prefix-affinity", small), arr, 1)
    assert rnd.summary.prefix_cache_hit_rate is not None and aff.summary.prefix_cache_hit_rate is not None
    assert aff.summary.prefix_cache_hit_rate > rnd.summary.prefix_cache_hit_rate + 0.3
    assert aff.summary.ttft_s.p99 < 0.6 * rnd.summary.ttft_s.p99


def test_pure_prefix_routing_collapses_on_a_hot_group_and_the_gate_prevents_it() -> None:
    small = setup_8b(kv_cache_memory_bytes=4000 * 16 * 131072)
    arr = prefix_arrays(1500, 50, 60, 2048, 64, 256, hot=0.8)  # 80% of the traffic in group 0
    gated = simulate_fleet(fleet(4, "prefix-affinity", small), arr, 1)
    pure = simulate_fleet(fleet(4, "prefix-affinity", small, router_settings={"balance_abs_threshold": None}), arr, 1)
    assert pure.summary.ttft_s.p99 > 20 * gated.summary.ttft_s.p99
    busiest = max(r.routed for r in pure.replicas)
    assert busiest > 0.75 * len(arr)  # the hot group's replica takes nearly everything


def test_stale_signals_raise_p99_ttft() -> None:
    wl = open_loop(80, 2500, prompt=1024, output=128, prompt_sigma=1.0, output_sigma=1.0)
    exact = simulate_fleet(fleet(4, "least-outstanding"), wl, 1)
    stale = simulate_fleet(fleet(4, "least-outstanding", scrape_interval_s=2.0), wl, 1)
    assert stale.summary.ttft_s.p99 > 1.3 * exact.summary.ttft_s.p99


def _violation_window_s(res: FleetResult, ttft_slo_s: float) -> float:
    c = res.columns
    late = c.arrival_s[(c.first_token_s - c.arrival_s) > ttft_slo_s]
    return float(late.max() - late.min()) if len(late) else 0.0


def _scaled(cold_s: float, schedule: tuple[tuple[float, int], ...] = ()) -> FleetResult:
    arr = step_arrays(5, 40, 150, 250)
    cold = ColdStart(Phase(cold_s), Phase(0.0), float("inf"), Phase(0.0), Phase(0.0))
    auto = AutoscalerSettings(target=5, interval_s=10, min_replicas=1, max_replicas=8, schedule=schedule)
    return simulate_fleet(
        fleet(1, "least-outstanding", setup_8b(max_num_seqs=8), autoscaler=auto, cold_start=cold), arr, 1
    )


def test_longer_cold_start_longer_violation_window_and_scale_ahead_shortens_it() -> None:
    fast, slow = _scaled(30.0), _scaled(120.0)
    w_fast, w_slow = _violation_window_s(fast, 1.0), _violation_window_s(slow, 1.0)
    assert w_slow > w_fast + 45.0
    ahead = _scaled(120.0, schedule=((20.0, 4),))  # raise the floor a cold start before the step
    assert _violation_window_s(ahead, 1.0) < 0.5 * w_slow
    assert np.nanpercentile(ahead.columns.first_token_s - ahead.columns.arrival_s, 99) < 1.0
