"""The training evidence behind ``--step-model auto``, computed from the corpus.

``specs.step_choice.TRAINING_EVIDENCE`` is a recorded copy of what this module computes, so that
``plan`` never runs the corpus; ``benchmarks/step_model_choice.py`` prints it and
``tests/validation/test_step_evidence.py`` (slow) fails when the recorded copy no longer matches the
corpus and the defaults of the day — the evidence cannot go stale silently.

The rule (``specs.step_choice``, rule 1): every **training** row (``split_of = "train"``) is
predicted under the roofline and under the step as operations with the shipped defaults; per class
— (model class, GPU vendor, engine family, GPU chip), (model class, vendor, engine family), (model
class, vendor), (vendor), (model class) — the evidence is the number of the class's throughput,
TPOT/ITL, TTFT and E2E values and the median ``|log(predicted / measured)|`` of each step model over
them. A chip-level class is kept only where the chip has at least ``MIN_VALUES`` training values
(rule 4).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from servecap.specs.perf import Efficiency
from servecap.specs.step_choice import MIN_VALUES, candidate_cells
from servecap.validation.corpus import CorpusRow, load_corpus
from servecap.validation.evaluate import Comparison, compare_rows
from servecap.validation.predict import Adjustments

Evidence = dict[tuple[str, ...], tuple[int, float, float]]


def cells_of(c: Comparison) -> tuple[tuple[str, ...], ...]:
    """The classes a compared value counts in, most specific first."""
    return candidate_cells(c.model_class, c.vendor, c.engine, c.gpu_family)


def median_abs_log_error(comps: Iterable[Comparison]) -> tuple[int, float]:
    """The number of predicted values and their median ``|log(predicted / measured)|`` (NaN for none)."""
    errs = [abs(math.log(c.predicted / c.measured)) for c in comps if c.predicted]
    return len(errs), (statistics.median(errs) if errs else math.nan)


def evidence_from(roofline: list[Comparison], operations: list[Comparison]) -> Evidence:
    """Per class, (values, roofline's median |log error|, the operations'), from the same training
    values predicted under each step model, rounded as recorded (three decimals)."""
    cells = sorted({cell for c in roofline for cell in cells_of(c)}, key=lambda k: (-len(k), k))
    out: Evidence = {}
    for cell in cells:
        n, roof = median_abs_log_error(c for c in roofline if cell in cells_of(c))
        if len(cell) == 4 and n < MIN_VALUES:
            continue  # a chip with fewer values does not decide (step_choice rule 4)
        _, ops = median_abs_log_error(c for c in operations if cell in cells_of(c))
        out[cell] = (n, round(roof, 3), round(ops, 3))
    return out


def training_evidence(rows: list[CorpusRow] | None = None) -> Evidence:
    """The evidence of today's corpus (or ``rows``) and defaults: its training rows under both step
    models (about a minute on two cores)."""
    train = [r for r in (load_corpus() if rows is None else rows) if r.split == "train"]
    runs = {
        name: compare_rows(train, Adjustments(efficiency=Efficiency(step_model=name)))
        for name in ("roofline", "operations")
    }
    return evidence_from(runs["roofline"], runs["operations"])
