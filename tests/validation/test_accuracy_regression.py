"""The recorded accuracy: the whole corpus must not get worse than baseline.json (slow: ~1 minute)."""

from __future__ import annotations

import time

import pytest

from servecap.validation.baseline import load_baseline, make_baseline, regressions
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import compare_rows


@pytest.mark.slow
def test_median_errors_not_worse_than_recorded() -> None:
    rows = load_corpus()
    recorded = load_baseline()
    t0 = time.perf_counter()
    comps = compare_rows(rows)
    wall_s = time.perf_counter() - t0
    assert recorded.rows == len(rows), (
        "the corpus changed: re-record with benchmarks/validate_speed.py --write-baseline"
    )
    current = make_baseline(comps, rows=len(rows), tolerance=recorded.tolerance)
    assert regressions(current, recorded) == []
    assert wall_s < 240  # the budget is 2 minutes on one core; leave room for a loaded CI machine


def test_regressions_rule() -> None:
    recorded = load_baseline()
    worse = recorded.model_copy(
        update={
            "median_abs_error": {s: {f: v + 0.05 for f, v in t.items()} for s, t in recorded.median_abs_error.items()}
        }
    )
    assert regressions(recorded, recorded) == []
    assert regressions(worse, recorded) and all("median |error|" in line for line in regressions(worse, recorded))
