"""The recorded accuracy: median absolute error per metric family, for all rows and each split.

``baseline.json`` (next to this module) holds the figures of the last recording; a test fails
when a change makes any recorded median worse by more than ``tolerance`` (absolute, e.g. 0.02
= two percentage points). ``benchmarks/validate_speed.py --write-baseline`` re-records it.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from servecap.validation.evaluate import Comparison, by_family

SCHEMA: Literal["servecap.validate-baseline/1"] = "servecap.validate-baseline/1"


class Baseline(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: Literal["servecap.validate-baseline/1"] = Field(default=SCHEMA, alias="schema")
    rows: int = Field(ge=1)
    values: int = Field(ge=1)
    tolerance: float = Field(default=0.02, ge=0, le=1)
    median_abs_error: dict[str, dict[str, float]]  # "all" | "train" | "test" -> family -> median |error|
    mape: dict[str, dict[str, float]]


def medians(comparisons: list[Comparison]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """(median |error|, MAPE) per split ('all', 'train', 'test') and metric family."""
    med: dict[str, dict[str, float]] = {}
    mape: dict[str, dict[str, float]] = {}
    for split in ("all", "train", "test"):
        comps = comparisons if split == "all" else [c for c in comparisons if c.split == split]
        table = by_family(comps)
        med[split] = {f: round(s.median_abs, 4) for f, s in table.items() if s.median_abs is not None}
        mape[split] = {f: round(s.mape, 4) for f, s in table.items() if s.mape is not None}
    return med, mape


def make_baseline(comparisons: list[Comparison], rows: int, tolerance: float = 0.02) -> Baseline:
    med, mape = medians(comparisons)
    return Baseline(rows=rows, values=len(comparisons), tolerance=tolerance, median_abs_error=med, mape=mape)


def load_baseline() -> Baseline:
    text = (resources.files("servecap.validation") / "baseline.json").read_text(encoding="utf-8")
    return Baseline.model_validate(json.loads(text))


def regressions(current: Baseline, recorded: Baseline) -> list[str]:
    """One line per (split, family) whose median |error| got worse than recorded + tolerance."""
    out = []
    for split, table in recorded.median_abs_error.items():
        for family, was in table.items():
            now = current.median_abs_error.get(split, {}).get(family)
            if now is None or now > was + recorded.tolerance:
                out.append(f"{split} {family}: median |error| {now} > recorded {was} + {recorded.tolerance}")
    return out
