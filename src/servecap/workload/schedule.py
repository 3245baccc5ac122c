"""Drawing a non-homogeneous Poisson process whose rate follows a :class:`ScheduleArrival`.

The method is exact (no time discretisation): the time axis is cut at every step start, spike
edge and, for a diurnal curve, 96 times a period. On each piece ``[a, b)`` the rate is bounded by
a constant ``λ̄`` (the rate itself where it is constant). Candidates are a homogeneous Poisson
process of the piecewise-constant envelope, drawn by inverting its integrated rate (given the
count ``N ~ Poisson(Λ̄)``, the points are ``N`` sorted uniforms on ``[0, Λ̄)`` mapped through
``Λ̄^{-1}``; Cinlar, *Introduction to Stochastic Processes*, 1975, §4.1), and a candidate at
``t`` is kept with probability ``λ(t) / λ̄`` (thinning; Lewis and Shedler, "Simulation of
nonhomogeneous Poisson processes by thinning", Naval Research Logistics Quarterly 26(3), 1979).
Where the rate is piecewise constant every candidate is kept.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.workload.schedule_spec import ConstantRate, DiurnalRate, PiecewiseRate, ScheduleArrival

PIECES_PER_PERIOD = 96  # a diurnal envelope step (15 minutes of a day): candidates ≈ 1.03 x arrivals
_MAX_HORIZON_S = 1e13


def rate_at(arrival: ScheduleArrival, t_s: NDArray[np.float64]) -> NDArray[np.float64]:
    """The instantaneous rate (requests/s) at times ``t_s``."""
    t = np.asarray(t_s, dtype=np.float64)
    out: NDArray[np.float64] = arrival.scale * _curve_at(arrival.rate, t) * _spike_factor(arrival, t)
    return out


def integrated_rate(arrival: ScheduleArrival, t0_s: float, t1_s: float) -> float:
    """``Λ(t0, t1) = ∫ rate dt``: the expected number of arrivals in ``[t0, t1)`` (exact)."""
    if t1_s <= t0_s:
        return 0.0
    a, b, m = _pieces(arrival, t0_s, t1_s)
    return float(np.sum(m * _curve_integral(arrival.rate, a, b)))


def schedule_times(
    arrival: ScheduleArrival,
    rng: np.random.Generator,
    *,
    num_requests: int | None,
    duration_s: float | None,
) -> NDArray[np.float64]:
    """Sorted arrival times until ``num_requests`` have arrived or ``duration_s`` is reached."""
    if num_requests is None and duration_s is None:
        raise ValueError("num_requests or duration_s is required")
    if duration_s is not None:
        times = _window(arrival, rng, 0.0, duration_s)
        return times[:num_requests] if num_requests is not None else times
    assert num_requests is not None
    end_s = _rate_ends_s(arrival)
    kept: list[NDArray[np.float64]] = []
    count = 0
    t0, width = 0.0, 1.0
    while count < num_requests:
        t1 = t0 + width if end_s is None else min(t0 + width, end_s)
        sel = _window(arrival, rng, t0, t1)
        kept.append(sel)
        count += len(sel)
        if count >= num_requests:
            break
        if (end_s is not None and t1 >= end_s) or t1 >= _MAX_HORIZON_S:
            raise ServecapError(
                "workload.num_requests",
                num_requests,
                f"the rate schedule is zero from t={t1:g} s on, after {count} requests; give duration_s",
            )
        t0, width = t1, width * 2.0
    return np.concatenate(kept)[:num_requests]


def _window(arrival: ScheduleArrival, rng: np.random.Generator, t0: float, t1: float) -> NDArray[np.float64]:
    """The arrivals in ``[t0, t1)``, sorted."""
    a, b, m = _pieces(arrival, t0, t1)
    curve = arrival.rate
    bound = m * _curve_bound(curve, a, b)  # λ̄ on each piece
    mass = bound * (b - a)
    cum = np.concatenate([[0.0], np.cumsum(mass)])
    total = float(cum[-1])
    if total <= 0.0:
        return np.zeros(0)
    n = int(rng.poisson(total))
    u = np.sort(rng.uniform(0.0, total, n))
    i = np.clip(np.searchsorted(cum, u, side="right") - 1, 0, len(a) - 1)
    lam = bound[i]
    ok = lam > 0.0
    t = np.where(ok, a[i] + (u - cum[i]) / np.where(ok, lam, 1.0), a[i])
    t = np.minimum(t, np.nextafter(b[i], -np.inf))  # stay inside the piece despite rounding
    if isinstance(curve, DiurnalRate):
        keep = rng.uniform(0.0, 1.0, n) * _curve_bound(curve, a, b)[i] < _curve_at(curve, t)
        ok &= keep
    out: NDArray[np.float64] = t[ok]
    return out


def _pieces(
    arrival: ScheduleArrival, t0: float, t1: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Pieces ``[a, b)`` covering ``[t0, t1)`` on which the spikes and steps are constant, and
    the multiplier ``scale x Π spikes`` on each."""
    cuts = [np.array([t0, t1])]
    curve = arrival.rate
    if isinstance(curve, PiecewiseRate):
        starts = np.array([s.start_s for s in curve.steps])
        if curve.period_s is None:
            cuts.append(starts)
        else:
            p = curve.period_s
            k = np.arange(math.floor(t0 / p), math.floor(t1 / p) + 1, dtype=np.float64)
            cuts.append((k[:, None] * p + starts[None, :]).ravel())
    elif isinstance(curve, DiurnalRate):
        step = curve.period_s / PIECES_PER_PERIOD
        j = np.arange(math.floor((t0 - curve.peak_at_s) / step), math.floor((t1 - curve.peak_at_s) / step) + 1)
        cuts.append(curve.peak_at_s + j.astype(np.float64) * step)
    for s in arrival.spikes:
        cuts.append(np.array([s.start_s, s.start_s + s.duration_s]))
    edges = np.unique(np.concatenate(cuts))
    edges = edges[(edges >= t0) & (edges <= t1)]
    a, b = edges[:-1], edges[1:]
    mid = 0.5 * (a + b)
    return a, b, arrival.scale * _spike_factor(arrival, mid)


def _spike_factor(arrival: ScheduleArrival, t: NDArray[np.float64]) -> NDArray[np.float64]:
    f = np.ones_like(t, dtype=np.float64)
    for s in arrival.spikes:
        f = np.where((t >= s.start_s) & (t < s.start_s + s.duration_s), f * s.multiplier, f)
    return f


def _curve_at(curve: ConstantRate | PiecewiseRate | DiurnalRate, t: NDArray[np.float64]) -> NDArray[np.float64]:
    if isinstance(curve, ConstantRate):
        return np.full_like(t, curve.rate_per_s, dtype=np.float64)
    if isinstance(curve, PiecewiseRate):
        starts = np.array([s.start_s for s in curve.steps])
        rates = np.array([s.rate_per_s for s in curve.steps])
        tt = t if curve.period_s is None else np.mod(t, curve.period_s)
        out: NDArray[np.float64] = rates[np.clip(np.searchsorted(starts, tt, side="right") - 1, 0, len(rates) - 1)]
        return out
    theta = 2.0 * np.pi * (t - curve.peak_at_s) / curve.period_s
    d: NDArray[np.float64] = curve.trough_per_s + (curve.peak_per_s - curve.trough_per_s) * 0.5 * (1.0 + np.cos(theta))
    return d


def _curve_bound(
    curve: ConstantRate | PiecewiseRate | DiurnalRate, a: NDArray[np.float64], b: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The curve's maximum on each piece (its value where it is constant on the piece)."""
    if not isinstance(curve, DiurnalRate):
        return _curve_at(curve, 0.5 * (a + b))
    p = curve.period_s
    has_peak = np.floor((b - curve.peak_at_s) / p) >= np.ceil((a - curve.peak_at_s) / p)
    ends = np.maximum(_curve_at(curve, a), _curve_at(curve, b))
    out: NDArray[np.float64] = np.where(has_peak, curve.peak_per_s, ends)
    return out


def _curve_integral(
    curve: ConstantRate | PiecewiseRate | DiurnalRate, a: NDArray[np.float64], b: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``∫_a^b curve dt`` on each piece; for the diurnal curve
    ``trough (b-a) + (peak-trough)/2 [(b-a) + P/(2π) (sin θ_b - sin θ_a)]``."""
    if not isinstance(curve, DiurnalRate):
        out: NDArray[np.float64] = _curve_at(curve, 0.5 * (a + b)) * (b - a)
        return out
    p = curve.period_s
    w = 2.0 * np.pi / p
    sin_b = np.sin(w * (b - curve.peak_at_s))
    sin_a = np.sin(w * (a - curve.peak_at_s))
    amp = curve.peak_per_s - curve.trough_per_s
    d: NDArray[np.float64] = curve.trough_per_s * (b - a) + 0.5 * amp * ((b - a) + (sin_b - sin_a) / w)
    return d


def _rate_ends_s(arrival: ScheduleArrival) -> float | None:
    """The time from which the rate is zero forever (None: never)."""
    curve = arrival.rate
    if isinstance(curve, ConstantRate):
        return 0.0 if curve.rate_per_s == 0 else None
    if isinstance(curve, PiecewiseRate):
        rates = [s.rate_per_s for s in curve.steps]
        if curve.period_s is not None:
            return 0.0 if max(rates) == 0 else None
        if rates[-1] > 0:
            return None
        # zero after the last step that has a positive rate ends (spikes multiply, so stay zero)
        last = max((i for i, r in enumerate(rates) if r > 0), default=-1)
        return 0.0 if last < 0 else curve.steps[last + 1].start_s
    return None
