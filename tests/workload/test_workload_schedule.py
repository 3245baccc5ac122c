"""Time-varying arrival rates: the integral by hand, counts in windows against it, determinism."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from servecap.errors import ServecapError
from servecap.workload import generate_arrays, workload_from_dict
from servecap.workload.schedule import integrated_rate, rate_at, schedule_times
from servecap.workload.schedule_spec import ScheduleArrival

DAY_S = 86_400.0


def _arrival(raw: dict[str, Any]) -> ScheduleArrival:
    spec = workload_from_dict(
        {"arrival": {"kind": "schedule", **raw}, "prompt_tokens": 1, "output_tokens": 1, "num_requests": 1}
    )
    assert isinstance(spec.arrival, ScheduleArrival)
    return spec.arrival


DIURNAL = {"rate": {"kind": "diurnal", "peak_per_s": 30.0, "trough_per_s": 6.0, "peak_at_s": 50_400.0}}
SPIKY = {
    **DIURNAL,
    "spikes": [
        {"start_s": 3_600.0, "duration_s": 900.0, "multiplier": 4.0},
        {"start_s": 4_000.0, "duration_s": 600.0, "multiplier": 0.5},  # overlaps: multipliers compose
    ],
}
STEPS = {
    "rate": {
        "kind": "piecewise",
        "steps": [
            {"start_s": 0, "rate_per_s": 2},
            {"start_s": 600, "rate_per_s": 10},
            {"start_s": 900, "rate_per_s": 0},
        ],
        "period_s": 1_200,
    }
}


def test_integral_by_hand() -> None:
    # 2/s for 600 s, 10/s for 300 s, 0 for 300 s: 1200 + 3000 = 4200 per 1200-s period
    steps = _arrival(STEPS)
    assert integrated_rate(steps, 0, 1_200) == pytest.approx(4_200)
    assert integrated_rate(steps, 0, 3_600) == pytest.approx(12_600)
    assert integrated_rate(steps, 500, 700) == pytest.approx(100 * 2 + 100 * 10)
    # a constant 2/s with x3 for 10 s: 2 x 90 + 6 x 10 = 240
    spiked = _arrival({"rate": 2, "spikes": [{"start_s": 50, "duration_s": 10, "multiplier": 3}]})
    assert integrated_rate(spiked, 0, 100) == pytest.approx(240)
    # diurnal over a whole day: the mean (peak + trough) / 2 = 18/s times 86,400 s
    diurnal = _arrival(DIURNAL)
    assert integrated_rate(diurnal, 0, DAY_S) == pytest.approx(18 * DAY_S)
    # from the peak to the trough (half a day): trough x P/2 + (peak - trough) x P/4
    assert integrated_rate(diurnal, 50_400, 50_400 + DAY_S / 2) == pytest.approx(6 * DAY_S / 2 + 24 * DAY_S / 4)
    # scale multiplies everything
    scaled = _arrival({**DIURNAL, "scale": 0.5})
    assert integrated_rate(scaled, 0, DAY_S) == pytest.approx(9 * DAY_S)


def test_rate_at_peak_trough_and_spikes() -> None:
    diurnal = _arrival(DIURNAL)
    r = rate_at(diurnal, np.array([50_400.0, 50_400.0 - DAY_S / 2, 50_400.0 + DAY_S / 4]))
    assert r == pytest.approx([30.0, 6.0, 18.0])
    spiky = _arrival(SPIKY)
    t = np.array([3_700.0, 4_100.0, 4_550.0, 4_600.0])
    base = rate_at(diurnal, t)
    assert rate_at(spiky, t) == pytest.approx(base * np.array([4.0, 2.0, 0.5, 1.0]))
    steps = _arrival(STEPS)
    assert rate_at(steps, np.array([0.0, 599.0, 600.0, 1_000.0, 1_200.0, 1_900.0])) == pytest.approx(
        [2, 2, 10, 0, 2, 10]
    )


@pytest.mark.parametrize("raw", [DIURNAL, SPIKY, STEPS], ids=["diurnal", "spiky", "steps"])
def test_counts_in_windows_match_the_integral(raw: dict[str, Any]) -> None:
    """Counts in disjoint windows of a Poisson process are independent Poisson(Λ_window): the
    chi-square statistic Σ (n - Λ)² / Λ over 48 windows stays below its 99.9% quantile (84.0 for 48
    degrees of freedom), and no window is more than 4.5 standard deviations off. Fixed seed."""
    arrival = _arrival(raw)
    horizon = DAY_S if raw is not STEPS else 3_600.0
    times = schedule_times(arrival, np.random.default_rng(7), num_requests=None, duration_s=horizon)
    edges = np.linspace(0.0, horizon, 49)
    counts, _ = np.histogram(times, bins=edges)
    expected = np.array([integrated_rate(arrival, a, b) for a, b in itertools.pairwise(edges)])
    keep = expected > 0
    assert np.all(counts[~keep] == 0)
    chi2 = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    assert chi2 < 84.0
    assert np.max(np.abs(counts[keep] - expected[keep]) / np.sqrt(expected[keep])) < 4.5
    assert np.all(np.diff(times) >= 0) and times[0] >= 0 and times[-1] < horizon


def test_spike_window_carries_its_multiplier() -> None:
    arrival = _arrival({"rate": 5, "spikes": [{"start_s": 100, "duration_s": 100, "multiplier": 10}]})
    times = schedule_times(arrival, np.random.default_rng(1), num_requests=None, duration_s=300)
    inside = np.sum((times >= 100) & (times < 200))
    outside = len(times) - inside
    assert abs(inside - 5_000) < 4.5 * math.sqrt(5_000)
    assert abs(outside - 1_000) < 4.5 * math.sqrt(1_000)


def test_num_requests_stop_and_determinism() -> None:
    raw = {
        "arrival": {"kind": "schedule", **SPIKY},
        "prompt_tokens": 10,
        "output_tokens": 5,
        "num_requests": 20_000,
    }
    spec = workload_from_dict(raw)
    a = generate_arrays(spec, np.random.default_rng(11))
    b = generate_arrays(spec, np.random.default_rng(11))
    c = generate_arrays(spec, np.random.default_rng(12))
    assert len(a) == 20_000
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    # both stops: whichever comes first
    both = generate_arrays(workload_from_dict({**raw, "duration_s": 60.0}), np.random.default_rng(11))
    assert 0 < len(both) < 20_000 and both.arrival_s[-1] < 60.0


def test_a_schedule_that_ends_cannot_fill_num_requests() -> None:
    raw = {
        "arrival": {
            "kind": "schedule",
            "rate": {
                "kind": "piecewise",
                "steps": [{"start_s": 0, "rate_per_s": 1}, {"start_s": 100, "rate_per_s": 0}],
            },
        },
        "prompt_tokens": 1,
        "output_tokens": 1,
        "num_requests": 10_000,
    }
    with pytest.raises(ServecapError, match="zero from t=100") as err:
        generate_arrays(workload_from_dict(raw), np.random.default_rng(0))
    assert err.value.field == "workload.num_requests"
    few = generate_arrays(workload_from_dict({**raw, "num_requests": 50}), np.random.default_rng(0))
    assert len(few) == 50 and few.arrival_s[-1] < 100


@pytest.mark.parametrize(
    ("rate", "field", "text"),
    [
        ({"kind": "diurnal", "peak": 3}, "workload.arrival.rate", "did you mean: peak_at_s, peak_per_s"),
        ({"kind": "diurnal", "peak_per_s": 3, "trough_per_s": 5}, "workload.arrival.rate", "must be <= peak_per_s"),
        ({"kind": "piecewise", "steps": [{"start_s": 5, "rate_per_s": 1}]}, "workload.arrival.rate", "start at 0"),
        (
            {"kind": "piecewise", "steps": [{"start_s": 0, "rate_per_s": 1}, {"start_s": 0, "rate_per_s": 2}]},
            "workload.arrival.rate",
            "strictly increasing",
        ),
        (
            {"kind": "piecewise", "steps": [{"start_s": 0, "rate_per_s": -1}]},
            "workload.arrival.rate.steps.0.rate_per_s",
            "greater than or equal to 0",
        ),
        ({"kind": "weekly", "rate_per_s": 1}, "workload.arrival.rate.kind", "expected one of"),
    ],
)
def test_bad_schedules_name_the_field(rate: dict[str, Any], field: str, text: str) -> None:
    raw = {"arrival": {"kind": "schedule", "rate": rate}, "prompt_tokens": 1, "output_tokens": 1, "num_requests": 1}
    with pytest.raises(ServecapError, match=text) as err:
        workload_from_dict(raw)
    assert err.value.field == field


def test_bad_spike_names_the_field() -> None:
    raw = {
        "arrival": {"kind": "schedule", "rate": 1, "spikes": [{"start_s": 1, "duration_s": 0, "multiplier": 2}]},
        "prompt_tokens": 1,
        "output_tokens": 1,
        "num_requests": 1,
    }
    with pytest.raises(ServecapError, match="greater than 0") as err:
        workload_from_dict(raw)
    assert err.value.field == "workload.arrival.spikes.0.duration_s"


@pytest.mark.parametrize(
    ("arrival", "rate"),
    [
        ({"kind": "poisson", "rate_per_s": 5}, 5.0),
        ({"kind": "constant", "rate_per_s": 2.5}, 2.5),
        ({"kind": "gamma", "rate_per_s": 4, "cv": 2}, 4.0),
        ({"kind": "diurnal", "rate_per_s": 3, "peak_to_trough": 3, "period_s": 3600}, 3.0),
        ({"kind": "schedule", "rate": 7}, None),
    ],
)
def test_mean_rate_is_rate_per_s_where_one_number_gives_it(arrival: dict[str, Any], rate: float | None) -> None:
    from servecap.workload.spec_parts import mean_rate_per_s

    spec = workload_from_dict({"arrival": arrival, "prompt_tokens": 10, "output_tokens": 5, "num_requests": 3})
    assert mean_rate_per_s(spec.arrival) == rate
    assert mean_rate_per_s(None) is None
