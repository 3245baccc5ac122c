"""The flapping detector: an autoscaler that swings between its bounds under steady load.

From a run's scale events (``fleet simulate``, ``monitor replay``) and each pool's bounds, per
pool: the scale events, their rate per hour after the first ``SETTLE_S`` (the ramp from the
minimum to the load is not flapping), and the min <-> max cycles (the count reached the maximum
and came back to the minimum). A pool flaps when it makes :data:`MAX_CYCLES` such cycles or more,
or more than :data:`MAX_EVENTS_PER_HOUR` events an hour after settling: one per five minutes,
the scale-down window HPA applies by default, so a controller honouring its own window cannot
scale down more often than that on a steady signal. The warning goes into the answer's notes
(text, HTML, web) and ``flapping`` in ``--json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from servecap.app.scale_event import ScaleEvent

SETTLE_S = 600.0
"""The start of a run whose scale events are the ramp to the load, not counted in the hourly rate."""
MAX_EVENTS_PER_HOUR = 12.0
MAX_CYCLES = 2


class PoolFlapping(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pool: str
    scale_events: int
    events_after_settle: int  # after the first SETTLE_S
    events_per_hour: float  # after the first SETTLE_S (0 when the run is no longer)
    min_max_cycles: int
    flapping: bool
    warning: str | None = None


def detect_flapping(
    events: Sequence[ScaleEvent], horizon_s: float, bounds: Mapping[str, tuple[int, int]]
) -> list[PoolFlapping]:
    """One verdict per autoscaled pool (``bounds``: pool -> (min, max) replicas)."""
    out = []
    for pool, (lo, hi) in bounds.items():
        mine = sorted((e for e in events if e["pool"] == pool), key=lambda e: e["time_s"])
        after = [e for e in mine if e["time_s"] >= SETTLE_S]
        span_h = max(0.0, horizon_s - SETTLE_S) / 3600.0
        per_hour = len(after) / span_h if span_h > 0 else 0.0
        cycles, been_max = 0, False
        for e in mine:
            if e["to"] >= hi > lo:
                been_max = True
            elif e["to"] <= lo and been_max:
                cycles, been_max = cycles + 1, False
        # an hourly rate over less than ten minutes says little: judge it on the cycles alone
        busy = span_h >= 1.0 / 6.0 and per_hour > MAX_EVENTS_PER_HOUR
        flaps = cycles >= MAX_CYCLES or busy
        warning = None
        if flaps:
            warning = (
                f"warning: pool {pool}'s autoscaler flaps: {len(mine)} scale events, {per_hour:,.1f} an hour after "
                f"the first {SETTLE_S / 60:.0f} min, {cycles} cycles between its min {lo} and max {hi} under this "
                "load; its signal has no steady state at the target (a waiting-queue signal is 0 whenever capacity "
                "suffices): scale on running + waiting per replica (--autoscaler keda-vllm) or KV usage, or widen "
                "the scale-down window"
            )
        out.append(
            PoolFlapping(
                pool=pool,
                scale_events=len(mine),
                events_after_settle=len(after),
                events_per_hour=per_hour,
                min_max_cycles=cycles,
                flapping=flaps,
                warning=warning,
            )
        )
    return out
