"""What a job's result may hold: time series downsampled for the web, a size estimated before the
job runs and a cap on the size it sends (``servecap serve --max-result-mb``).

The server keeps every finished job's result in memory until it is forgotten and sends it whole
on each ``GET /api/v1/jobs/{id}``, so a result must be small whatever the body asked for. Time
series are the part that grows with a body's numbers (a day at 50 ms is 1.7 million samples per
gauge): the web gets at most :data:`WEB_MAX_POINTS` samples per series, evenly strided over the
run (every k-th sample, k the smallest integer that fits: a plot 2,000 points wide shows no
more), with a ``downsampled`` note of the resolution; the full data goes to the store (a
simulation's run) or to the CLI (``--json``, ``--records``).
"""

from __future__ import annotations

import math
from typing import Any

from servecap.errors import ServecapError

WEB_MAX_POINTS = 2_000
"""Samples per time series a job's result holds (a plot's width in pixels, with margin)."""

BYTES_PER_SAMPLE = 24
"""A time-series sample in the result's JSON: a number of up to ~20 characters and a comma."""

BYTES_PER_REPLICA = 600
"""A replica's row in a fleet result (its name, pool, phases, times, load and capacity)."""

BASE_RESULT_BYTES = 64 * 1024
"""A result's fixed part (summaries, percentiles, notes)."""


def downsample(result: Any, max_points: int = WEB_MAX_POINTS) -> Any:
    """``result`` with every time series (a mapping with a ``time_s`` list and lists of the same
    length) cut to at most ``max_points`` samples, in place; each such mapping gets
    ``downsampled: {"samples", "kept", "every", "step_s"}``."""
    if isinstance(result, list):
        for item in result:
            downsample(item, max_points)
        return result
    if not isinstance(result, dict):
        return result
    times = result.get("time_s")
    if isinstance(times, list) and len(times) > max_points:
        n = len(times)
        every = math.ceil(n / max_points)
        for key, value in list(result.items()):
            if isinstance(value, list) and len(value) == n:
                result[key] = value[::every]
        kept = len(result["time_s"])
        step = (times[-1] - times[0]) / (n - 1) * every if n > 1 and _numbers(times) else None
        result["downsampled"] = {"samples": n, "kept": kept, "every": every, "step_s": step}
    for value in result.values():
        if isinstance(value, dict | list):
            downsample(value, max_points)
    return result


def _numbers(xs: list[Any]) -> bool:
    return isinstance(xs[0], int | float) and isinstance(xs[-1], int | float)


def estimate_fleet_result_bytes(replicas: int, series: int) -> int:
    """A fleet job's result size before it runs: its replicas' rows and ``series`` time series
    of at most :data:`WEB_MAX_POINTS` samples each (a few gauges per series)."""
    gauges_per_series = 8
    return (
        BASE_RESULT_BYTES
        + replicas * BYTES_PER_REPLICA
        + series * gauges_per_series * WEB_MAX_POINTS * BYTES_PER_SAMPLE
    )


def check_result_bytes(estimate: int, limit: int | None, field: str, value: object) -> None:
    """Refuse a job whose estimated result passes the server's cap, before it is queued."""
    if limit is not None and estimate > limit:
        raise ServecapError(
            field,
            value,
            f"the result would be about {estimate / 1e6:,.1f} MB, over the server's limit of "
            f"{limit / 1e6:,.1f} MB; raise it with servecap serve --max-result-mb",
        )
