"""Edges of target tracking (found by benchmarks/mutation.py): the tolerance band is closed, as
HPA's ``math.Abs(1.0 - usageRatio) <= tolerance`` keeps the count; an average signal from zero
replicas asks for one replica exactly when there is any load."""

from __future__ import annotations

from servecap.policy.autoscalers import AutoscalerSettings, TargetTracking


def test_a_ratio_on_the_tolerance_keeps_the_count() -> None:
    # 1.25 and 0.625 / 0.5 are exact in binary: the band's edge itself, not a rounding of it
    waiting = TargetTracking(AutoscalerSettings(signal="num_requests_waiting", target=4.0, tolerance=0.25))
    assert waiting.raw(2, 10.0) == 2  # 5 per replica = 1.25 x the target: on the edge, kept
    assert waiting.raw(2, 10.5) == 3  # past it: ceil(10.5 / 4)
    kv = TargetTracking(AutoscalerSettings(signal="kv_usage", target=0.5, tolerance=0.25, max_replicas=20))
    assert kv.raw(4, 0.625) == 4  # 1.25 x: kept
    assert kv.raw(4, 0.65) == 6  # ceil(4 x 1.3)


def test_an_average_signal_from_zero_replicas() -> None:
    kv = TargetTracking(AutoscalerSettings(signal="kv_usage", target=0.5, max_replicas=20))
    assert kv.raw(0, 0.0) == 0  # no load, no replica
    assert kv.raw(0, 0.9) == 1  # any load: one replica (the ratio of nothing is meaningless)
    assert kv.raw(1, 0.9) == 2  # from one replica the ratio applies: ceil(1 x 1.8)


def test_one_replica_within_the_band_stays_one() -> None:
    a = TargetTracking(AutoscalerSettings(signal="num_requests_waiting", target=5.0))
    assert a.raw(1, 5.2) == 1  # 1.04 x the target, inside HPA's 0.1: not ceil(5.2 / 5) = 2


def test_a_scale_down_goes_at_most_max_step_down_at_a_time() -> None:
    s = AutoscalerSettings(signal="inflight", target=2.0, min_replicas=0, downscale_stabilization_s=0, max_step_down=1)
    a = TargetTracking(s)
    assert [a.decide(float(t), n, 0.0) for t, n in ((0, 5), (10, 4), (20, 3))] == [4, 3, 2]
