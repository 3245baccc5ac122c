"""The ``validate`` use case's request, apart from the use case so that reading its defaults
(``servecap validate --help``, the HTTP API's schema) loads no simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ValidateRequest(BaseModel):
    """Which corpus rows to run, and how (the defaults of ``servecap validate``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = Field(default=None, description="Only this source's rows (a corpus file's source name).")
    split: Literal["train", "test", "all"] = Field(
        default="all", description="Rows of the fixed train/test split (hash of the row id), or all."
    )
    step_model: Literal["auto", "roofline", "operations", "aiconfigurator", "aiconfigurator-or-roofline"] = Field(
        default="auto",
        description="Step times: auto (servecap's default: per model class, GPU vendor and engine, the model the "
        "training rows favour); the roofline; operations (the step as the sum of its operations, measured kernel "
        "tables where they cover them); AIConfigurator's measured kernels (the rows its cache covers, "
        "validation/aic_steps.json); or aiconfigurator-or-roofline (AIConfigurator where covered, the roofline "
        "elsewhere).",
    )
    calibration: Path | None = Field(default=None, description="Calibration file from `servecap calibrate`.")
