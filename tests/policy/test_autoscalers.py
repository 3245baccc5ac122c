"""The target-tracking autoscaler, worked by hand."""

from __future__ import annotations

import pytest

from servecap.errors import ServecapError
from servecap.policy.autoscalers import PRESETS, AutoscalerSettings, TargetTracking


def test_hpa_formula_and_tolerance() -> None:
    a = TargetTracking(AutoscalerSettings(signal="kv_usage", target=0.5, max_replicas=20, downscale_stabilization_s=0))
    assert a.raw(4, 0.9) == 8  # ceil(4 x 0.9 / 0.5) = ceil(7.2)
    assert a.raw(4, 0.54) == 4  # within 10% of the target
    assert a.raw(4, 0.2) == 2  # ceil(1.6)
    w = TargetTracking(AutoscalerSettings(signal="num_requests_waiting", target=5))
    assert w.raw(2, 23.0) == 5  # ceil(23 / 5)
    assert w.raw(0, 1.0) == 1  # from zero: any waiting work
    assert w.raw(2, 10.4) == 2  # 5.2 per replica: within tolerance


def test_stabilisation_windows_and_step_limits() -> None:
    s = AutoscalerSettings(
        signal="inflight",
        target=2,
        max_replicas=10,
        upscale_stabilization_s=20,
        downscale_stabilization_s=60,
        max_step_up=2,
    )
    a = TargetTracking(s)
    assert a.decide(0.0, 2, 4.0) == 2  # recommendation 2
    assert a.decide(10.0, 2, 20.0) == 2  # up: the lowest of the last 20 s is still 2
    assert a.decide(30.0, 2, 20.0) == 4  # the 0-s recommendation left the window: 10, at most +2
    assert a.decide(40.0, 4, 2.0) == 4  # recommendation 1, but the highest of the last 60 s is 10
    assert a.decide(89.0, 4, 2.0) == 4  # 10 (at 30 s) is still in the window
    assert a.decide(95.0, 4, 2.0) == 1  # the window [35, 95] holds only 1s


def test_schedule_raises_the_floor() -> None:
    s = AutoscalerSettings(min_replicas=1, max_replicas=8, schedule=((100.0, 6), (200.0, 2)))
    assert [s.floor_at(t) for t in (0.0, 99.0, 100.0, 150.0, 250.0)] == [1, 1, 6, 6, 2]
    a = TargetTracking(s)
    assert a.decide(120.0, 1, 0.0) == 6


def test_presets_are_the_documented_defaults() -> None:
    keda, ray = PRESETS["keda-vllm"], PRESETS["ray-serve"]
    # keda-vllm: HPA as Kubernetes applies it (15 s sync period, tolerance 0.1, scale-down window
    # 300 s, scale-up max(100%, 4 pods) per period) on running + waiting per replica (issue 32)
    assert (keda.signal, keda.interval_s, keda.downscale_stabilization_s, keda.tolerance) == (
        "inflight",
        15.0,
        300.0,
        0.1,
    )
    assert dict(keda.options) == {"scale_up_percent": 100.0, "scale_up_pods": 4.0}
    assert (ray.signal, ray.target, ray.interval_s, ray.upscale_stabilization_s, ray.downscale_stabilization_s) == (
        "inflight",
        2.0,
        10.0,
        30.0,
        600.0,
    )


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"min_replicas": 5, "max_replicas": 2}, "autoscaler.min_replicas=5"),
        ({"signal": "cpu"}, "autoscaler.signal='cpu'"),
        ({"upscale_stabilization_s": -1}, "autoscaler.upscale_stabilization_s=-1"),
        ({"max_replicas": 0}, "autoscaler.max_replicas=0"),
        ({"interval_s": 0}, "autoscaler.interval_s=0"),
    ],
)
def test_bad_settings_name_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ServecapError) as e:
        AutoscalerSettings(**kw)  # type: ignore[arg-type]
    assert str(e.value).startswith(field)
