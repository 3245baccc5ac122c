"""Predictive scale-ahead: an autoscaler floor that follows a known rate curve, ``lead_s`` early.

For a rate curve ``rate(t)`` (requests/s) and a replica that serves ``req_s_per_replica``, the
floor from ``t`` to ``t + step_s`` is
``ceil(headroom x max{rate(u) : t <= u <= t + lead_s + step_s} / req_s_per_replica)``: the
replicas the traffic will need by the time a replica asked for in that step is ready (``lead_s``
is a cold start). It is evaluated on a grid of ``step_s`` (the curve sampled 8 times per step inside
the window) and returned as the autoscaler's schedule entries ``(from_s, floor)``, one per change.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError

RateFn = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def scale_ahead_schedule(
    rate: RateFn,
    *,
    req_s_per_replica: float,
    lead_s: float,
    horizon_s: float,
    step_s: float = 60.0,
    headroom: float = 1.0,
) -> tuple[tuple[float, int], ...]:
    """The floor's changes over ``[0, horizon_s]`` (see the module's docstring)."""
    for name, value, ok in (
        ("req_s_per_replica", req_s_per_replica, req_s_per_replica > 0),
        ("lead_s", lead_s, lead_s >= 0),
        ("horizon_s", horizon_s, horizon_s > 0),
        ("step_s", step_s, step_s > 0),
        ("headroom", headroom, headroom > 0),
    ):
        if not ok or not math.isfinite(value):
            raise ServecapError(f"autoscaler.predictive.{name}", value, "must be a positive number")
    starts = np.arange(0.0, horizon_s, step_s)
    fine = step_s / 8
    out: list[tuple[float, int]] = []
    last = -1
    for t in starts.tolist():
        u = np.arange(t, t + lead_s + step_s + fine / 2, fine)  # the window, to the step's end
        peak = float(np.max(rate(u)))
        floor = math.ceil(headroom * peak / req_s_per_replica - 1e-9)
        if floor != last:
            out.append((t, floor))
            last = floor
    return tuple(out)
