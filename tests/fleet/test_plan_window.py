"""The planner's windows: the peak held steady, the steepest ramp, the length for a stable percentile."""

from __future__ import annotations

import numpy as np
import pytest

from servecap.fleet.plan_window import (
    class_shares,
    measure_requests,
    peak_of,
    peak_window,
    ramp_window,
    scaled,
    steepest_ramp,
)
from servecap.workload import workload_from_dict, workload_rate

DAY = {
    "arrival": {
        "kind": "schedule",
        "rate": {"kind": "diurnal", "peak_per_s": 10, "trough_per_s": 2, "peak_at_s": 43200},
    },
    "prompt_tokens": 100,
    "output_tokens": 20,
    "duration_s": 86400,
    "tenants": [
        {"name": "a", "share": 3, "classes": [{"name": "chat", "share": 0.85}, {"name": "faq", "share": 0.15}]},
        {"name": "b", "share": 1},
    ],
}


def test_measure_requests_by_hand() -> None:
    # a p99 target of a class with 15% of the traffic, 50 samples in its tail: 50 / 0.01 / 0.15
    assert measure_requests({("a", "faq"): 0.15}, {("a", "faq"): 99.0}, 50) == 33_334
    spec = workload_from_dict(DAY)
    shares = class_shares(spec, 43200)
    assert shares[("a", "chat")] == pytest.approx(0.75 * 0.85) and shares[("b", "default")] == pytest.approx(0.25)


def test_scaled_curve_and_its_peak() -> None:
    spec = scaled(workload_from_dict(DAY), 2.5)
    t, r = peak_of(spec)
    assert t == pytest.approx(43200) and r == pytest.approx(25.0)


def test_steepest_ramp_of_a_cosine_day() -> None:
    # rate(t + w) - rate(t) of a cosine peaking at 12:00 is largest for the window centred at 06:00
    spec = workload_from_dict(DAY)
    t0 = steepest_ramp(lambda t: workload_rate(spec, t), 86400, 3600)
    assert t0 + 1800 == pytest.approx(21600, abs=60)
    w = ramp_window(spec, horizon_s=86400, window_s=3600)
    assert w.rate_end_req_s > w.rate_start_req_s and w.workload.duration_s == 3600


def test_peak_window_holds_the_peak_and_keeps_the_mix() -> None:
    spec = workload_from_dict(DAY)
    w = peak_window(spec, horizon_s=86400, e2e_s=20.0, percentile_by_pair={("a", "faq"): 99.0}, tail=10)
    # warm-up max(30, 3 x 20 s); 10 / 0.01 / (0.75 x 0.15) = 8,889 requests at 10 req/s
    assert w.warmup_s == 60 and w.duration_s == pytest.approx(60 + 888.9, abs=0.1)
    rates = workload_rate(w.workload, np.array([0.0, 500.0]))
    assert rates == pytest.approx([10.0, 10.0])
    assert [t.name for t in w.workload.tenants or []] == ["a", "b"]
