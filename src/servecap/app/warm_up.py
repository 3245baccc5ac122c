"""An autoscaled run's steady window, reported beside the whole run.

A run that starts at its pools' minimum under a load they cannot carry queues until the replicas
the autoscaler asked for are ready: HPA's default scale-up already adds the larger of 100% or 4
pods every 15 s (Kubernetes, "Horizontal Pod Autoscaling", default behavior: ``scaleUp``
policies ``Percent 100 / 15 s`` and ``Pods 4 / 15 s``, ``selectPolicy: Max``, no stabilization
window), so what the queue waits for is the cold start, not the controller. That backlog is
real and the whole run keeps it; the steady window is the requests arriving after the ramp
(the first :data:`~servecap.app.flapping.SETTLE_S`, the flapping detector's boundary), so that
the fleet the autoscaler settles on is judged on its own, with the fix for the start named: a
minimum at the count it settles on.
"""

from __future__ import annotations

import math
import statistics
from typing import Protocol, Self, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from servecap.app.flapping import SETTLE_S
from servecap.fleet import FleetResult, FleetSpec
from servecap.results.summary import summarize_columns
from servecap.results.summary_json import RunSummaryJson

MIN_STEADY_S = SETTLE_S
"""The steady window must be at least this long (after the ramp) to be reported."""
WORSE = 1.5
"""Whole-run p99 TTFT over the steady window's by more than this: the note says why."""


class SteadyWindow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start_s: float  # requests arriving from here on
    requests: int
    summary: RunSummaryJson
    settled_replicas: int  # the median ready replicas over the window
    min_replicas: int  # the autoscaled pools' minimum, summed


def steady_window(res: FleetResult, spec: FleetSpec) -> SteadyWindow | None:
    """The summary of the requests arriving after the ramp, for a run with autoscaled pools, kept
    per request (the exact path), and long enough; None otherwise."""
    scaled = [p for p in spec.pools if p.autoscaler is not None]
    cols = res.columns
    if not scaled or len(cols) == 0 or res.horizon_s < SETTLE_S + MIN_STEADY_S:
        return None
    idx = np.flatnonzero(cols.arrival_s >= SETTLE_S)
    if len(idx) == 0:
        return None
    part = cols.take(idx)
    duration_s = float(part.arrival_s.max()) - SETTLE_S
    summary = summarize_columns(part, duration_s=duration_s, slo=res.summary.slo)
    ts = res.timeseries
    ready = [r for t, r in zip(ts.time_s, ts.ready, strict=True) if t >= SETTLE_S]
    settled = round(statistics.median(ready)) if ready else 0
    low = sum(p.autoscaler.min_replicas for p in scaled if p.autoscaler is not None)
    return SteadyWindow(
        start_s=SETTLE_S,
        requests=len(part),
        summary=RunSummaryJson.of(summary),
        settled_replicas=settled,
        min_replicas=low,
    )


def warm_up_note(window: SteadyWindow, whole_p99_ttft_s: float | None) -> str | None:
    """One line when the ramp dominates the whole run's tail: both p99s, the cause, the fix."""
    steady = window.summary.ttft_s.p99
    if whole_p99_ttft_s is None or steady is None or not math.isfinite(whole_p99_ttft_s):
        return None
    if whole_p99_ttft_s <= WORSE * steady:
        return None
    attain = window.summary.slo_attainment
    slo_part = f", SLO attainment {attain:.1%}" if attain is not None else ""
    fix = (
        f"; to start at that size, --min-replicas {window.settled_replicas}"
        if window.settled_replicas > window.min_replicas
        else ""
    )
    return (
        f"warm-up: the whole run's p99 TTFT {whole_p99_ttft_s:,.2f} s is the start's backlog: "
        f"{window.min_replicas} replica(s) queue until the scale-up's cold starts are ready; "
        f"over the {window.requests:,} requests arriving after {window.start_s:,.0f} s "
        f"(the fleet settled at {window.settled_replicas} ready) p99 TTFT {steady:,.2f} s, "
        f"p99 TPOT {window.summary.tpot_s.p99 or 0.0:,.3f} s{slo_part}{fix}"
    )


class _HasSteady(Protocol):
    notes: list[str]
    summary: RunSummaryJson

    def model_copy(self, *, update: dict[str, object] | None = None, deep: bool = False) -> Self: ...


R = TypeVar("R", bound=_HasSteady)


def with_warm_up(response: R, res: FleetResult, spec: FleetSpec) -> R:
    """The response with its steady window (``steady`` in --json) and the warm-up note."""
    window = steady_window(res, spec)
    if window is None:
        return response
    note = warm_up_note(window, response.summary.ttft_s.p99)
    notes = [*response.notes, note] if note else response.notes
    return response.model_copy(update={"steady": window, "notes": notes})
