"""``validate()``: servecap's predictions against the corpus of published measurements.

One call plans and simulates every selected row and returns a pydantic value (the ``--json``
output): per-row predicted vs measured with the signed error, and the MAPE and median absolute
error per metric family, per GPU family, per engine and per split.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servecap.app.validate_request import ValidateRequest
from servecap.validation.corpus import load_corpus, select
from servecap.validation.evaluate import (
    Comparison,
    ErrorStats,
    ProgressFn,
    by_engine,
    by_family,
    by_gpu_family,
    by_model_class,
    by_vendor,
    compare_rows,
)
from servecap.validation.predict import Adjustments
from servecap.validation.step_source import select_step_source


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ValueOut(_Out):
    row: str
    source: str
    engine: str
    gpu: str
    gpu_family: str
    split: str
    metric: str
    family: str
    measured: float
    predicted: float | None
    error: float | None
    where: str
    vendor: str = ""
    model_class: str = ""
    engine_version: str = ""


class StatsOut(_Out):
    count: int
    mape: float | None
    median_abs_error: float | None
    median_signed_error: float | None


class ValidateResponse(_Out):
    schema_version: str = "servecap.validate/1"
    rows: int
    sources: list[str]
    split: str
    calibration: str | None
    step_model: str = "auto"
    values: list[ValueOut]
    by_metric: dict[str, StatsOut]
    by_gpu: dict[str, dict[str, StatsOut]]
    by_engine: dict[str, dict[str, StatsOut]]
    by_vendor: dict[str, dict[str, StatsOut]] = {}
    by_model_class: dict[str, dict[str, StatsOut]] = {}
    by_split: dict[str, dict[str, StatsOut]]


def validate_request(req: ValidateRequest, progress: ProgressFn | None = None) -> ValidateResponse:
    """:func:`validate` for a request."""
    return validate(
        source=req.source, split=req.split, calibration=req.calibration, progress=progress, step_model=req.step_model
    )


def _stats(s: ErrorStats) -> StatsOut:
    return StatsOut(count=s.count, mape=s.mape, median_abs_error=s.median_abs, median_signed_error=s.median_signed)


def _table(comps: list[Comparison]) -> dict[str, StatsOut]:
    return {k: _stats(v) for k, v in by_family(comps).items()}


def validate(
    *,
    source: str | None = None,
    split: str = "all",
    adjustments: Adjustments | None = None,
    calibration: Path | None = None,
    progress: ProgressFn | None = None,
    step_model: str = "auto",
) -> ValidateResponse:
    """Run the corpus rows of ``source`` (all when None) in ``split``; ``calibration`` (a
    ``servecap calibrate`` file) replaces the default efficiencies for every row."""
    if calibration is not None:
        from servecap.calibration import load_calibration

        adjustments = Adjustments(efficiency=load_calibration(calibration).efficiency())
    rows = select(load_corpus(), source=source, split=split)
    rows, per_row = select_step_source(step_model, rows, adjustments)
    comps = compare_rows(rows, adjustments, progress=progress, per_row=per_row)
    return ValidateResponse(
        rows=len(rows),
        sources=sorted({r.source.name for r in rows}),
        split=split,
        calibration=None if calibration is None else str(calibration),
        step_model=step_model,
        values=[
            ValueOut(
                row=c.full_id,
                source=c.source,
                engine=c.engine,
                gpu=c.gpu,
                gpu_family=c.gpu_family,
                split=c.split,
                metric=c.metric,
                family=c.family,
                measured=c.measured,
                predicted=c.predicted,
                error=c.error,
                where=c.where,
                vendor=c.vendor,
                model_class=c.model_class,
                engine_version=c.engine_version,
            )
            for c in comps
        ],
        by_metric=_table(comps),
        by_gpu={g: {k: _stats(v) for k, v in t.items()} for g, t in by_gpu_family(comps).items()},
        by_engine={e: {k: _stats(v) for k, v in t.items()} for e, t in by_engine(comps).items()},
        by_vendor={e: {k: _stats(v) for k, v in t.items()} for e, t in by_vendor(comps).items()},
        by_model_class={e: {k: _stats(v) for k, v in t.items()} for e, t in by_model_class(comps).items()},
        by_split={
            s: _table([c for c in comps if c.split == s]) for s in ("train", "test") if any(c.split == s for c in comps)
        },
    )
