"""Time-varying arrival rates in the workload file: a base curve times spikes (pydantic).

``arrival: {kind: schedule, rate: <curve>, spikes: [...], scale: 1}`` is a non-homogeneous
Poisson process with rate ``scale x curve(t) x Π multiplier of the spikes active at t``; the curve
is a constant, piecewise-constant steps, or a diurnal (cosine) day. Drawn exactly (see
:mod:`servecap.workload.schedule`).
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class ConstantRate(_Model):
    """``rate_per_s`` at all times."""

    kind: Literal["constant"] = "constant"
    rate_per_s: float = Field(ge=0, le=1e7)


class RateStep(_Model):
    """From ``start_s`` on (until the next step), ``rate_per_s``."""

    start_s: float = Field(ge=0)
    rate_per_s: float = Field(ge=0, le=1e7)


class PiecewiseRate(_Model):
    """Steps sorted by ``start_s``, the first at 0; the last holds forever, or, with
    ``period_s``, the whole schedule repeats every ``period_s`` (a week of days, a day of hours)."""

    kind: Literal["piecewise"] = "piecewise"
    steps: list[RateStep] = Field(min_length=1)
    period_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _sorted(self) -> PiecewiseRate:
        starts = [s.start_s for s in self.steps]
        if starts[0] != 0:
            raise ValueError(f"the first step must start at 0 (got start_s={starts[0]:g})")
        if any(b <= a for a, b in itertools.pairwise(starts)):
            raise ValueError("steps must have strictly increasing start_s")
        if self.period_s is not None and starts[-1] >= self.period_s:
            raise ValueError(f"every step must start before period_s ({self.period_s:g})")
        return self


class DiurnalRate(_Model):
    """``trough + (peak - trough) x (1 + cos(2π (t - peak_at_s) / period_s)) / 2``: the
    peak at ``peak_at_s`` (and every period after), the trough half a period away; the mean
    is ``(peak + trough) / 2``."""

    kind: Literal["diurnal"] = "diurnal"
    peak_per_s: float = Field(gt=0, le=1e7)
    trough_per_s: float = Field(ge=0, le=1e7)
    period_s: float = Field(default=86_400.0, gt=0)
    peak_at_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> DiurnalRate:
        if self.trough_per_s > self.peak_per_s:
            raise ValueError(f"trough_per_s ({self.trough_per_s:g}) must be <= peak_per_s ({self.peak_per_s:g})")
        return self


RateCurve = Annotated[ConstantRate | PiecewiseRate | DiurnalRate, Field(discriminator="kind")]


class Spike(_Model):
    """During ``[start_s, start_s + duration_s)`` the rate is multiplied by ``multiplier``
    (a launch, a retry storm; < 1 for a dip)."""

    start_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    multiplier: float = Field(ge=0, le=1e6)


class ScheduleArrival(_Model):
    """A Poisson process with a time-varying rate: ``scale x rate(t) x spikes(t)``.
    A bare number for ``rate`` is a constant rate."""

    kind: Literal["schedule"] = "schedule"
    rate: RateCurve
    spikes: list[Spike] = Field(default_factory=list)
    scale: float = Field(default=1.0, gt=0, le=1e6)

    @field_validator("rate", mode="before")
    @classmethod
    def _number_is_constant(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return {"kind": "constant", "rate_per_s": v}
        return v
