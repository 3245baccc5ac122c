"""The calibration file: step-time coefficients fitted to a real server (data, not imports).

``servecap calibrate`` writes it from stored bench runs; ``plan``, ``simulate`` and ``emulate``
read it with ``--calibration FILE`` and use its coefficients in place of the default
:class:`~servecap.specs.perf.Efficiency`. JSON, one object::

    {"schema": "servecap.calibration/1", "model": "...", "gpu": "...", "tp": 1, "pp": 1,
     "weights_dtype": "bf16", "kv_cache_dtype": "bf16",
     "coefficients": {"bandwidth_efficiency": 0.82, "compute_efficiency": 0.55,
                      "step_overhead_s": 0.0031, "prefill_s_per_token": 0.0,
                      "allreduce_latency_s": 1e-05},
     "fit": {"runs": ["..."], "num_samples": 1234, "rmse_s": 0.0004, "r2": 0.99},
     "created_at": "2026-11-21T12:00:00Z"}
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from servecap.errors import from_validation_error
from servecap.specs.perf import DEFAULT_REQUEST_OVERHEAD_S, Efficiency

SCHEMA: Literal["servecap.calibration/1"] = "servecap.calibration/1"

MIN_EFFICIENCY = 0.01
"""The least bandwidth or compute efficiency a calibration may hold: the share of the spec
sheet's HBM bandwidth or dense FLOP/s that a step reaches. Fits of real servers give 0.3-0.95
(docs/calibration.md); below 1% the model says the GPU runs 100x slower than its spec sheet,
which is a fit of the wrong deployment, not a GPU. (A value such as 1e-30 made each decode step
last ~1e25 s: the simulated clock then passed the point where adding a step to it changes it,
time stood still, and the observer sampled the same instant until memory ran out -- a
segmentation fault in the compiled simulator.)"""
MAX_EFFICIENCY = 1.5
"""The most: above 1 a fit credits the GPU with more than its spec sheet (caches, a
conservative spec); 1.5 is already 50% over it."""
_WHY_EFFICIENCY = (
    f"an efficiency is the share of the GPU's spec-sheet bandwidth or FLOP/s a step reaches; "
    f"it must be in [{MIN_EFFICIENCY:g}, {MAX_EFFICIENCY:g}] (real servers fit 0.3-0.95)"
)


class Coefficients(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    bandwidth_efficiency: float
    compute_efficiency: float
    step_overhead_s: float = Field(ge=0, le=10)
    prefill_s_per_token: float = Field(default=0.0, ge=0, le=1)
    allreduce_latency_s: float = Field(default=10e-6, ge=0, le=1)
    # the server's per-request cost outside the engine's steps (calibrate fits step times, not
    # this); a file without it takes the default, Efficiency.request_overhead_s
    request_overhead_s: float | None = Field(default=None, ge=0, le=10)

    @field_validator("bandwidth_efficiency", "compute_efficiency")
    @classmethod
    def _plausible_efficiency(cls, value: float) -> float:
        if not MIN_EFFICIENCY <= value <= MAX_EFFICIENCY:
            raise ValueError(_WHY_EFFICIENCY)
        return value


class FitSummary(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    runs: list[str] = []
    num_samples: int = Field(default=0, ge=0)
    rmse_s: float | None = None
    r2: float | None = None


class CalibrationFile(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    schema_: Literal["servecap.calibration/1"] = Field(default=SCHEMA, alias="schema")
    model: str
    gpu: str
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    weights_dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    coefficients: Coefficients
    fit: FitSummary = FitSummary()
    created_at: str = ""

    def efficiency(self) -> Efficiency:
        c = self.coefficients
        return Efficiency(
            bandwidth_efficiency=c.bandwidth_efficiency,
            compute_efficiency=c.compute_efficiency,
            step_overhead_s=c.step_overhead_s,
            allreduce_latency_s=c.allreduce_latency_s,
            prefill_s_per_token=c.prefill_s_per_token,
            request_overhead_s=(
                c.request_overhead_s if c.request_overhead_s is not None else DEFAULT_REQUEST_OVERHEAD_S
            ),
        )

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)


def load_calibration(path: Path) -> CalibrationFile:
    """Read a calibration file; one-line errors name the field and value."""
    from servecap.files import load_document

    raw = load_document(path, "calibration", fmt="json")
    try:
        return CalibrationFile.model_validate(raw)
    except ValidationError as err:
        raise from_validation_error(err, "calibration") from None
