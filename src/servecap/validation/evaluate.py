"""Predicted vs measured for every row of the corpus, and the error tables.

The signed error of one measured value is ``predicted / measured - 1`` (+10% = servecap
predicts 10% more than was measured). Per metric family (throughput, TPOT/ITL, TTFT, E2E) and
per GPU family the tables give the MAPE (mean of |error|) and the median of |error|; the
median is the recorded accuracy figure (robust to the few sources servecap cannot model).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from servecap.specs.gpu import gpu_family
from servecap.validation.corpus import CorpusRow
from servecap.validation.predict import MAX_SIM_REQUESTS, Adjustments, predict_row
from servecap.validation.schema import FAMILIES

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Comparison:
    full_id: str
    source: str
    gpu: str
    gpu_family: str
    split: str
    metric: str  # "metric.statistic"
    family: str
    measured: float  # SI units
    predicted: float | None
    where: str
    engine: str = "vllm"  # the engine profile the row ran on
    vendor: str = ""  # the GPU's maker (NVIDIA, AMD, ...)
    model_class: str = ""  # dense, moe<=100B or moe>100B (model_class)
    engine_version: str = ""  # the source's engine version, as printed

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured - 1.0


@dataclass(frozen=True, slots=True)
class ErrorStats:
    count: int
    mape: float | None
    median_abs: float | None
    median_signed: float | None


def model_class(model_id: str) -> str:
    """``dense``, ``moe<=100B`` or ``moe>100B`` (total parameters) — the classes whose errors
    ``servecap validate`` reports apart: big MoE models spend a small-batch step on what a dense
    model's does not (expert reads, routing, all-reduces across many GPUs)."""
    from servecap.catalog.models import resolve_model
    from servecap.core.params import param_counts
    from servecap.validation.interval import model_class_of

    model = resolve_model(model_id)
    return model_class_of(model.moe is not None, param_counts(model).total)


def compare_rows(
    rows: list[CorpusRow],
    adj: Adjustments | None = None,
    *,
    max_requests: int = MAX_SIM_REQUESTS,
    progress: ProgressFn | None = None,
    per_row: Mapping[str, Adjustments] | None = None,
) -> list[Comparison]:
    """Predict every row (fixed seed 0) and pair each measured value with its prediction;
    ``per_row`` replaces ``adj`` for the rows it names (``validation.step_source``)."""
    from servecap.catalog.gpus import lookup_gpu

    out: list[Comparison] = []
    for i, crow in enumerate(rows):
        vendor = lookup_gpu(crow.row.gpu).vendor
        klass = model_class(crow.row.model)
        row_adj = per_row.get(crow.full_id, adj) if per_row else adj
        pred = predict_row(crow, row_adj, max_requests=max_requests)
        for m in crow.row.measured:
            out.append(
                Comparison(
                    full_id=crow.full_id,
                    source=crow.source.name,
                    engine=crow.engine,
                    gpu=crow.row.gpu,
                    gpu_family=gpu_family(crow.row.gpu),
                    split=crow.split,
                    metric=m.key,
                    family=m.family,
                    measured=m.value_si,
                    predicted=pred.values.get(m.key),
                    where=crow.row.where,
                    vendor=vendor,
                    model_class=klass,
                    engine_version=crow.source.engine_version,
                )
            )
        if progress is not None:
            progress(i + 1, len(rows))
    return out


def error_stats(comparisons: Iterable[Comparison]) -> ErrorStats:
    errs = [c.error for c in comparisons if c.error is not None]
    if not errs:
        return ErrorStats(0, None, None, None)
    absolute = [abs(e) for e in errs]
    return ErrorStats(len(errs), sum(absolute) / len(absolute), statistics.median(absolute), statistics.median(errs))


def by_family(comparisons: list[Comparison]) -> dict[str, ErrorStats]:
    """Error statistics per metric family (families with no values are left out)."""
    out = {f: error_stats(c for c in comparisons if c.family == f) for f in FAMILIES}
    return {f: s for f, s in out.items() if s.count}


def by_gpu_family(comparisons: list[Comparison]) -> dict[str, dict[str, ErrorStats]]:
    """GPU family -> metric family -> error statistics."""
    fams = sorted({c.gpu_family for c in comparisons})
    return {g: by_family([c for c in comparisons if c.gpu_family == g]) for g in fams}


def by_vendor(comparisons: list[Comparison]) -> dict[str, dict[str, ErrorStats]]:
    """GPU vendor -> metric family -> error statistics."""
    return {v: by_family([c for c in comparisons if c.vendor == v]) for v in sorted({c.vendor for c in comparisons})}


def by_model_class(comparisons: list[Comparison]) -> dict[str, dict[str, ErrorStats]]:
    """Model class (dense, moe<=100B, moe>100B) -> metric family -> error statistics."""
    classes = [k for k in ("dense", "moe<=100B", "moe>100B") if any(c.model_class == k for c in comparisons)]
    return {k: by_family([c for c in comparisons if c.model_class == k]) for k in classes}


def by_engine(comparisons: list[Comparison]) -> dict[str, dict[str, ErrorStats]]:
    """Engine profile -> metric family -> error statistics."""
    engines = sorted({c.engine for c in comparisons})
    return {e: by_family([c for c in comparisons if c.engine == e]) for e in engines}
