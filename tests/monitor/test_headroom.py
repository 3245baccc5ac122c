"""Headroom against the plan's batch or the KV pool, worked by hand."""

import pytest
from helpers import end, start

from servecap.errors import ServecapError
from servecap.monitor.headroom import Capacity, capacity_from_cache_config, capacity_from_plan, headroom
from servecap.monitor.scrape import Down
from servecap.monitor.snapshot import CacheConfig
from servecap.monitor.views import replica_views
from servecap.monitor.window import window_stats


def test_golden_72_percent() -> None:
    w = window_stats(start(), end())  # running 12 + waiting 6 = 18 in the server
    h = headroom(w, 1, capacity_from_plan(25, "ttft_slo"))
    assert h.load_per_replica == 18
    assert h.utilization == pytest.approx(0.72)
    assert h.traffic_headroom == pytest.approx(25 / 18 - 1)  # +38.9%
    assert "at 72% of capacity" in h.summary() and "+39% traffic" in h.summary()


def test_past_capacity_says_so() -> None:
    w = window_stats(start(), end())
    h = headroom(w, 1, Capacity(10.0, "plan", "plan batch"))
    assert h.utilization == pytest.approx(1.8) and h.queueing
    assert "queue" in h.summary()


def test_capacity_from_cache_config_info() -> None:
    # 1,152 tokens per request -> ceil(1152 / 16) = 72 blocks; 81,767 // 72 = 1,135 requests
    c = capacity_from_cache_config(CacheConfig(81767, 16, 0.9, "auto"), 1152)
    assert c.requests_per_replica == 1135


def test_no_capacity_no_replica_are_errors() -> None:
    with pytest.raises(ServecapError, match="num_gpu_blocks"):
        capacity_from_cache_config(CacheConfig(None, 16, None, None), 100)
    with pytest.raises(ServecapError, match="batch"):
        capacity_from_plan(0, "kv")
    with pytest.raises(ServecapError, match="replicas_up"):
        headroom(window_stats(start(), end()), 0, Capacity(5.0, "plan", "x"))


def test_replica_views_for_the_autoscaler_policies() -> None:
    views = replica_views([end("a"), Down("b", 10.0, "refused")])
    assert [(v.is_ready, v.num_running, v.num_waiting) for v in views] == [(True, 12, 6), (False, 0, 0)]
    assert views[0].kv_usage == 0.7 and views[0].prefix_hit_blocks([1, 2]) == 0
