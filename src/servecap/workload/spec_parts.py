"""The pieces a workload file is built from (pydantic, ``extra="forbid"``): length and time
distributions, arrival processes and shared-prefix groups.

:mod:`servecap.workload.spec` (the whole workload) and :mod:`servecap.workload.mix_spec` (its
tenants and classes) both build on these, so neither imports the other's way back (no circle).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.schedule_spec import ScheduleArrival


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


# ---- length / time distributions ------------------------------------------------------------


class FixedDist(_Model):
    kind: Literal["fixed"] = "fixed"
    value: float = Field(ge=0)


class ExponentialDist(_Model):
    """Exponential with the given ``mean`` (memoryless think times: the classic closed-loop
    user of queueing theory)."""

    kind: Literal["exponential"] = "exponential"
    mean: float = Field(gt=0)


class UniformDist(_Model):
    """Uniform on ``[low, high]`` (integers inclusive after rounding)."""

    kind: Literal["uniform"] = "uniform"
    low: float = Field(ge=0)
    high: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> UniformDist:
        if self.high < self.low:
            raise ValueError(f"high ({self.high:g}) must be >= low ({self.low:g})")
        return self


class NormalDist(_Model):
    """Normal, clipped to ``[min, max]``."""

    kind: Literal["normal"] = "normal"
    mean: float = Field(ge=0)
    std: float = Field(ge=0)
    min: float = Field(default=1, ge=0)
    max: float | None = Field(default=None, gt=0)


class LogNormalDist(_Model):
    """Log-normal with the given ``median`` and log-space ``sigma`` (mean = median x e^{σ²/2}),
    clipped to ``[min, max]``."""

    kind: Literal["lognormal"] = "lognormal"
    median: float = Field(gt=0)
    sigma: float = Field(ge=0, le=10)
    min: float = Field(default=1, ge=0)
    max: float | None = Field(default=None, gt=0)


class EmpiricalDist(_Model):
    """Draw uniformly from observed ``values`` (or from ``path``: one number per line, a JSON
    list, or a CSV column; the loader reads the file and fills ``values``)."""

    kind: Literal["empirical"] = "empirical"
    values: list[float] | None = None
    path: str | None = None
    column: str | None = None  # CSV column name (default: the first column)

    @model_validator(mode="after")
    def _has_values(self) -> EmpiricalDist:
        if self.values is None and self.path is None:
            raise ValueError("give 'values' (a list) or 'path' (a file of numbers)")
        if self.values is not None and len(self.values) == 0:
            raise ValueError("'values' is empty")
        if self.values is not None and any(v < 0 for v in self.values):
            raise ValueError("'values' must be non-negative")
        return self


class MixtureComponent(_Model):
    weight: float = Field(gt=0)
    dist: Dist

    @field_validator("dist", mode="before")
    @classmethod
    def _number_is_fixed(cls, v: Any) -> Any:
        return coerce_dist(v)


class MixtureDist(_Model):
    """Pick a component with probability ``weight / Σ weights``, then draw from it
    (e.g. 90% short chats and 10% long documents)."""

    kind: Literal["mixture"] = "mixture"
    components: list[MixtureComponent] = Field(min_length=1)


Dist = Annotated[
    FixedDist | ExponentialDist | UniformDist | NormalDist | LogNormalDist | EmpiricalDist | MixtureDist,
    Field(discriminator="kind"),
]
MixtureComponent.model_rebuild()


def coerce_dist(v: Any) -> Any:
    """A bare number means a fixed value (``prompt_tokens: 1024``)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return {"kind": "fixed", "value": v}
    return v


# ---- arrival processes ----------------------------------------------------------------------


class ConstantArrival(_Model):
    """One request every ``1 / rate_per_s`` seconds, the first at t = 0."""

    kind: Literal["constant"] = "constant"
    rate_per_s: float = Field(gt=0, le=1e7)


class PoissonArrival(_Model):
    """Exponential inter-arrival times with mean ``1 / rate_per_s``."""

    kind: Literal["poisson"] = "poisson"
    rate_per_s: float = Field(gt=0, le=1e7)


class GammaArrival(_Model):
    """Bursty: gamma inter-arrival times with mean ``1 / rate_per_s`` and coefficient of
    variation ``cv`` (shape ``1/cv²``); ``cv = 1`` is Poisson, ``cv > 1`` burstier."""

    kind: Literal["gamma"] = "gamma"
    rate_per_s: float = Field(gt=0, le=1e7)
    cv: float = Field(default=2.0, ge=0.001, le=100)


class DiurnalArrival(_Model):
    """A Poisson process whose rate follows the day:
    ``rate(t) = rate_per_s x (1 + a cos(2π (t - peak_at_s) / period_s))`` with
    ``a = (peak_to_trough - 1) / (peak_to_trough + 1)``, so ``rate_per_s`` is the mean and the
    peak is ``peak_to_trough`` times the trough. Drawn by thinning (Lewis and Shedler 1979)."""

    kind: Literal["diurnal"] = "diurnal"
    rate_per_s: float = Field(gt=0, le=1e7)
    peak_to_trough: float = Field(default=3.0, ge=1, le=1e6)
    period_s: float = Field(default=86_400.0, gt=0)
    peak_at_s: float = Field(default=0.0, ge=0)


class TraceArrival(_Model):
    """Replay a trace file: servecap's own CSV/JSONL (arrival_s, prompt_tokens, output_tokens,
    optionally prefix_group, prefix_tokens, hash_ids), a Mooncake/Bailian block-hash JSONL, an
    Azure LLM inference CSV or a BurstGPT CSV (``format``; ``auto`` tells them apart; see
    :mod:`servecap.workload.trace`). ``start_s``/``end_s`` keep the window
    ``start_s <= t < end_s`` of the trace's own clock, shifted to start at 0; ``time_scale`` then
    stretches (>1) or compresses (<1) the time axis. ``trace_block_tokens`` is the tokens per
    ``hash_ids`` entry (Mooncake: 512). The trace supplies the lengths:
    ``prompt_tokens``/``output_tokens`` must not be given."""

    kind: Literal["trace"] = "trace"
    path: str = Field(min_length=1, max_length=4096)
    format: Literal["auto", "servecap", "mooncake", "azure", "burstgpt", "sessions", "copilot"] = "auto"
    time_scale: float = Field(default=1.0, ge=1e-6, le=1e6, allow_inf_nan=False)
    start_s: float = Field(default=0.0, ge=0, le=1e9, allow_inf_nan=False)
    end_s: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)
    trace_block_tokens: int = Field(default=512, ge=1, le=1_048_576)

    @model_validator(mode="after")
    def _window(self) -> TraceArrival:
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"end_s {self.end_s:g} must be after start_s {self.start_s:g}")
        return self


Arrival = Annotated[
    ConstantArrival | PoissonArrival | GammaArrival | DiurnalArrival | ScheduleArrival | TraceArrival | AgenticArrival,
    Field(discriminator="kind"),
]


def mean_rate_per_s(arrival: Arrival | None) -> float | None:
    """The arrival process's mean rate where one number gives it (``rate_per_s`` of a constant,
    Poisson, gamma or diurnal arrival); None for a schedule, a trace or no arrival."""
    if isinstance(arrival, ConstantArrival | PoissonArrival | GammaArrival | DiurnalArrival):
        return arrival.rate_per_s
    return None


# ---- prefixes ------------------------------------------------------------------------------


class PrefixSpec(_Model):
    """Shared-prefix groups: a request belongs to one of ``groups`` groups with probability
    ``share``, and then starts with that group's ``tokens``-token prefix (a system prompt).
    ``prompt_tokens`` counts the tokens after the prefix. Groups are picked uniformly, or with
    Zipf popularity of exponent ``zipf_s`` (> 0: a few hot groups; see workload/popularity.py)."""

    groups: int = Field(ge=1, le=1_000_000)
    tokens: int = Field(ge=1, le=10_000_000)
    share: float = Field(default=1.0, ge=0, le=1)
    zipf_s: float = Field(default=0.0, ge=0, le=10)
