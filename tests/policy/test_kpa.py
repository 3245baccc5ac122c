"""The KPA autoscaler (Knative's stable and panic windows), worked by hand; and the registry."""

from __future__ import annotations

import pytest

from servecap.errors import ServecapError
from servecap.policy.autoscalers import AUTOSCALERS, PRESETS, AutoscalerSettings, Kpa, make_autoscaler


def _kpa(**kw: object) -> Kpa:
    s = AutoscalerSettings(
        policy="kpa", signal="num_requests_waiting", target=5.0, interval_s=2.0, min_replicas=1, max_replicas=100
    )
    if kw:
        from dataclasses import replace

        s = replace(s, **kw)  # type: ignore[arg-type]
    a = make_autoscaler(s)
    assert isinstance(a, Kpa)
    return a


def test_knative_defaults() -> None:
    a = _kpa()
    assert (a.stable_window_s, a.panic_window_s, a.panic_threshold) == (60.0, 6.0, 2.0)
    assert (a.options["max_scale_up_rate"], a.options["max_scale_down_rate"]) == (1000.0, 2.0)
    kpa = PRESETS["knative-kpa"]
    assert (kpa.policy, kpa.interval_s, kpa.signal) == ("kpa", 2.0, "num_requests_waiting")


def test_stable_mode_averages_the_stable_window() -> None:
    a = _kpa()
    # 2 replicas, 8 waiting for 60 s: stable average 8 -> ceil(8 / 5) = 2; panic ceil(8/5)=2 < 2 x 2
    for t in range(0, 60, 2):
        assert a.decide(float(t), 2, 8.0) == 2
    assert a.mode() == ""
    # a step to 12 waiting: panic window 12 -> 3, 3 / 2 = 1.5 < 2: no panic; the stable average
    # (27 x 8 + 3 x 12) / 30 = 8.4 -> 2: the step waits for the stable window
    assert [a.decide(float(t), 2, 12.0) for t in (60, 62, 64)] == [2, 2, 2]
    # once the 60 s window holds 12 only: 3
    for t in range(66, 124, 2):
        last = a.decide(float(t), 2, 12.0)
    assert last == 3


def test_panic_mode_scales_up_at_once_and_never_down_while_panicking() -> None:
    a = _kpa()
    for t in range(0, 60, 2):
        a.decide(float(t), 2, 8.0)
    # a burst: 40 waiting. Panic window (6 s: samples at 60 and older than 54 -> 56, 58, 60):
    # (8 + 8 + 40) / 3 = 18.67 -> 4 = 2 x 2 ready: over the 200% threshold -> panic, 4 replicas
    assert a.decide(60.0, 2, 40.0) == 4 and a.mode() == "panic mode"
    # (8 + 40 + 40) / 3 = 29.3 -> 6; 6 / 4 = 1.5 under the threshold but still panicking: 6
    assert a.decide(62.0, 4, 40.0) == 6
    # the burst ends: the panic count falls, but a panicking KPA never scales down
    assert a.decide(64.0, 6, 0.0) == 6 and a.decide(66.0, 6, 0.0) == 6
    # the last decision over the threshold was at 60 s: panic ends after 60 s more (at > 120 s)
    for t in range(68, 121, 2):
        assert a.decide(float(t), 6, 0.0) == 6
    assert a.mode() == "panic mode"
    # at 122 s panic ends; the stable window (62, 122] holds zeros only -> 0, clamped by
    # max-scale-down-rate 2: at least floor(6 / 2) = 3
    assert a.decide(122.0, 6, 0.0) == 3 and a.mode() == ""


def test_a_count_exactly_at_the_target_is_not_rounded_up() -> None:
    # 10 waiting at target 5 is exactly 2 replicas (ceil with a 1e-9 guard against float noise):
    # panic 2 / 1 ready = the 200% threshold, so 2, not 3
    assert _kpa().decide(0.0, 1, 10.0) == 2


def test_scale_up_rate_and_bounds() -> None:
    a = _kpa(max_replicas=10, options=(("max_scale_up_rate", 2.0),))
    # from 1 replica, 100 waiting: panic wants 20, the rate allows ceil(2 x 1) = 2
    assert a.decide(0.0, 1, 100.0) == 2
    assert a.decide(2.0, 2, 100.0) == 4  # ceil(2 x 2)
    assert a.decide(4.0, 4, 100.0) == 8
    assert a.decide(6.0, 8, 100.0) == 10  # max_replicas
    assert a.raw(3, 23.0) == 5  # ceil(23 / 5), the stable window's ask at this value


def test_bad_options_and_signals_are_one_error() -> None:
    with pytest.raises(ServecapError, match=r"autoscaler.options.panic_window=.*did you mean: panic_window_pct"):
        _kpa(options=(("panic_window", 5.0),))
    with pytest.raises(ServecapError, match=r"autoscaler.options.panic_threshold_pct=100.*range"):
        _kpa(options=(("panic_threshold_pct", 100.0),))
    with pytest.raises(ServecapError, match=r"autoscaler.signal='kv_usage': policy 'kpa' reads one of"):
        _kpa(signal="kv_usage")
    with pytest.raises(ServecapError, match=r"autoscaler.policy='kap'.*did you mean: kpa"):
        make_autoscaler(AutoscalerSettings(policy="kap"))


def test_every_registered_policy_is_built_from_its_preset_and_keeps_its_bounds() -> None:
    for name, cls in AUTOSCALERS.items():
        preset = PRESETS[cls.default_preset]
        assert preset.policy == name  # each policy's default preset runs that policy
        a = make_autoscaler(AutoscalerSettings(policy=name, signal=preset.signal, min_replicas=2, max_replicas=5))
        assert a.signal == preset.signal and type(a) is cls
        assert a.decide(0.0, 3, 1e6) == 5  # a flood: capped at max_replicas
        assert a.decide(1e5, 5, 0.0) == 2  # long idle: floored at min_replicas
