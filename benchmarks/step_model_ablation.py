"""The ablation of the step model: every corpus row predicted under the roofline and under the step
as operations (``--step-model operations``), and the held-out median |error| per metric family,
overall, on the original 76 rows, per engine, per GPU vendor, per model class and per engine and
GPU family, printed as the Markdown table of docs/validation.md ("The step as operations, second
round"); then, per step model, how many held-out values the 80% interval built from that model's
own training residuals holds (``validation.interval.coverage``).

    PYTHONPATH=src python benchmarks/step_model_ablation.py [--split test]

About a minute and a half on two cores (each step model simulates all rows once).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

from servecap.specs.perf import Efficiency
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import Comparison, compare_rows
from servecap.validation.interval import Residual, coverage
from servecap.validation.predict import Adjustments

FAMILIES = ("throughput", "tpot", "ttft", "e2e")
LATER_SOURCES = frozenset(
    {"gpustack-deepseek-r1-h200", "rocm-vllm-devdocker-mi300x", "servecap-vllm-h200-sweep", "trtllm-tuning-guide-h100"}
)
"""Sources added after the 76-row baseline of issue 29 (its "original rows" exclude them)."""


def _median(comps: list[Comparison], family: str) -> str:
    errs = [abs(c.predicted / c.measured - 1.0) for c in comps if c.family == family and c.predicted is not None]
    return f"{statistics.median(errs):.1%} ({len(errs)})" if errs else "–"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="test", choices=("train", "test", "all"))
    args = ap.parse_args()
    rows = load_corpus()
    every = {
        name: compare_rows(rows, Adjustments(efficiency=Efficiency(step_model=name)))
        for name in ("roofline", "operations", "auto")
    }
    runs = {name: [c for c in comps if args.split in ("all", c.split)] for name, comps in every.items()}
    groups: list[tuple[str, Callable[[Comparison], bool]]] = [
        ("all rows", lambda c: True),
        ("original 76 rows", lambda c: c.source not in LATER_SOURCES),
    ]
    sample = runs["roofline"]
    for key, label in (("engine", "engine"), ("vendor", "vendor"), ("model_class", "class")):
        for value in sorted({getattr(c, key) for c in sample}):
            groups.append((f"{label} {value}", lambda c, k=key, v=value: getattr(c, k) == v))
    for engine, family in sorted({(c.engine, c.gpu_family) for c in sample}):
        groups.append((f"{engine} {family}", lambda c, e=engine, f=family: c.engine == e and c.gpu_family == f))
    print(f"| rows ({args.split}) | step model | " + " | ".join(FAMILIES) + " |")
    print("|---|---|" + "---:|" * len(FAMILIES))
    for label, keep in groups:
        for name, comps in runs.items():
            sel = [c for c in comps if keep(c)]
            print(f"| {label} | {name} | " + " | ".join(_median(sel, f) for f in FAMILIES) + " |")
    print()
    for name, comps in every.items():
        residuals = tuple(
            Residual(c.engine, c.gpu_family, c.family, c.split, c.predicted / c.measured - 1.0, c.full_id)
            for c in comps
            if c.predicted is not None
        )
        inside, total = coverage(residuals)
        print(
            f"{name}: 80% intervals from its own training residuals hold {inside} of {total} held-out values "
            f"({inside / total:.0%})"
        )


if __name__ == "__main__":
    main()
