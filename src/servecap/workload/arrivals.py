"""Open-loop arrival processes: times in seconds from the start of the run, sorted."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from servecap.workload.schedule import schedule_times
from servecap.workload.schedule_spec import ScheduleArrival
from servecap.workload.spec import (
    ConstantArrival,
    DiurnalArrival,
    GammaArrival,
    PoissonArrival,
)

SyntheticArrival = ConstantArrival | PoissonArrival | GammaArrival | DiurnalArrival | ScheduleArrival


def arrival_times(
    arrival: SyntheticArrival,
    rng: np.random.Generator,
    *,
    num_requests: int | None,
    duration_s: float | None,
) -> NDArray[np.float64]:
    """Arrival times until ``num_requests`` have arrived or ``duration_s`` is reached."""
    if num_requests is None and duration_s is None:
        raise ValueError("num_requests or duration_s is required")
    if isinstance(arrival, DiurnalArrival):
        return _diurnal(arrival, rng, num_requests, duration_s)
    if isinstance(arrival, ScheduleArrival):
        return schedule_times(arrival, rng, num_requests=num_requests, duration_s=duration_s)
    rate = arrival.rate_per_s
    if num_requests is not None:
        n = num_requests
    else:
        assert duration_s is not None
        # enough draws to pass duration_s with overwhelming probability; extended if not
        n = int(rate * duration_s + 10.0 * np.sqrt(rate * duration_s) + 16)
    times = _draw(arrival, rng, n)
    if duration_s is not None:
        while num_requests is None and times[-1] < duration_s:
            more = _draw(arrival, rng, n)
            more = more + times[-1] + 1.0 / rate if isinstance(arrival, ConstantArrival) else more + times[-1]
            times = np.concatenate([times, more])
        times = times[times < duration_s]
    return times


def _draw(
    arrival: ConstantArrival | PoissonArrival | GammaArrival, rng: np.random.Generator, n: int
) -> NDArray[np.float64]:
    rate = arrival.rate_per_s
    if isinstance(arrival, ConstantArrival):
        return np.arange(n, dtype=np.float64) / rate
    if isinstance(arrival, PoissonArrival):
        return np.cumsum(rng.exponential(1.0 / rate, n))
    assert isinstance(arrival, GammaArrival)
    # gamma(shape k, scale θ): mean kθ = 1/rate, cv = 1/sqrt(k)
    shape = 1.0 / arrival.cv**2
    return np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), n))


def diurnal_rate(arrival: DiurnalArrival, t_s: NDArray[np.float64]) -> NDArray[np.float64]:
    """The instantaneous rate (requests/s) at times ``t_s``."""
    r = arrival.peak_to_trough
    amp = (r - 1.0) / (r + 1.0)
    phase = 2.0 * np.pi * (t_s - arrival.peak_at_s) / arrival.period_s
    out: NDArray[np.float64] = arrival.rate_per_s * (1.0 + amp * np.cos(phase))
    return out


def _diurnal(
    arrival: DiurnalArrival, rng: np.random.Generator, num_requests: int | None, duration_s: float | None
) -> NDArray[np.float64]:
    """Thinning: candidates at the peak rate, each kept with probability rate(t) / peak."""
    r = arrival.peak_to_trough
    peak = arrival.rate_per_s * (1.0 + (r - 1.0) / (r + 1.0))
    chunk = 4096 if duration_s is None else int(peak * duration_s + 10.0 * np.sqrt(peak * duration_s) + 16)
    kept: list[NDArray[np.float64]] = []
    count = 0
    last = 0.0
    while True:
        cand = last + np.cumsum(rng.exponential(1.0 / peak, chunk))
        keep = rng.uniform(0.0, 1.0, chunk) * peak < diurnal_rate(arrival, cand)
        last = float(cand[-1])
        sel = cand[keep]
        if duration_s is not None:
            sel = sel[sel < duration_s]
        kept.append(sel)
        count += len(sel)
        if num_requests is not None and count >= num_requests:
            break
        if duration_s is not None and last >= duration_s:
            break
    times = np.concatenate(kept)
    return times[:num_requests] if num_requests is not None else times
