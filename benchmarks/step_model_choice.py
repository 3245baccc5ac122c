"""The evidence behind ``--step-model auto`` (``specs.step_choice``): every corpus row predicted
under the roofline and under the step as operations; per class — (model class, GPU vendor,
engine family, GPU chip), (model class, vendor, engine family), (model class, vendor), (vendor),
(model class) — the **training** rows' median
|log(predicted / measured)| over their throughput, TPOT/ITL, TTFT and E2E values under each, and
the decision the fixed rule (``step_choice.clear_win``) takes on it; whether that matches
``TRAINING_EVIDENCE``; then the held-out medians of the three step models per class, reported
(never used to choose), as the table of docs/validation.md ("The default step model").

    PYTHONPATH=src python benchmarks/step_model_choice.py

About a minute on two cores (three step models, every row once each).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from servecap.specs.perf import Efficiency
from servecap.specs.step_choice import TRAINING_EVIDENCE, choose_step_model, clear_win
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import Comparison, compare_rows
from servecap.validation.predict import Adjustments
from servecap.validation.step_evidence import evidence_from

FAMILIES = ("throughput", "tpot", "ttft", "e2e")
LATER_SOURCES = frozenset(
    {"gpustack-deepseek-r1-h200", "rocm-vllm-devdocker-mi300x", "servecap-vllm-h200-sweep", "trtllm-tuning-guide-h100"}
)
"""Sources added after the 76-row baseline of issue 29 (its "original rows" exclude them)."""


def _median(comps: list[Comparison], family: str) -> str:
    errs = [abs(c.predicted / c.measured - 1.0) for c in comps if c.family == family and c.predicted is not None]
    return f"{statistics.median(errs):.1%} ({len(errs)})" if errs else "–"


def _having(key: str, value: str) -> Callable[[Comparison], bool]:
    return lambda c: bool(getattr(c, key) == value)


def main() -> None:
    rows = load_corpus()
    runs = {
        name: compare_rows(rows, Adjustments(efficiency=Efficiency(step_model=name)))
        for name in ("roofline", "operations", "auto")
    }
    train = {n: [c for c in comps if c.split == "train"] for n, comps in runs.items()}
    evidence = evidence_from(train["roofline"], train["operations"])
    print("| class (training rows) | values | roofline | operations | decision | in TRAINING_EVIDENCE |")
    print("|---|---:|---:|---:|---|---|")
    stale = sum(1 for cell in TRAINING_EVIDENCE if cell not in evidence)
    for cell, (n, roof, ops) in evidence.items():
        decision = "operations" if clear_win(n, roof, ops) else "roofline"
        shipped = TRAINING_EVIDENCE.get(cell)
        same = shipped == (n, roof, ops)
        stale += not same
        print(
            f"| {'/'.join(cell)} | {n} | {roof:.1%} | {ops:.1%} | {decision} | "
            f"{'yes' if same else f'NO (shipped {shipped})'} |"
        )
    print()
    for c in sorted({(c.model_class, c.vendor, c.engine, c.gpu_family) for c in runs["roofline"]}):
        print(f"{'/'.join(c)}: {choose_step_model(*c).reason}")
    print()
    groups: list[tuple[str, Callable[[Comparison], bool]]] = [
        ("all rows", lambda c: True),
        ("original 76 rows", lambda c: c.source not in LATER_SOURCES),
    ]
    sample = runs["roofline"]
    for key, label in (("engine", "engine"), ("vendor", "vendor"), ("model_class", "class")):
        for value in sorted({getattr(c, key) for c in sample}):
            groups.append((f"{label} {value}", _having(key, value)))
    for split in ("test", "train"):
        print(f"| rows ({split}) | step model | " + " | ".join(FAMILIES) + " |")
        print("|---|---|" + "---:|" * len(FAMILIES))
        for label, keep in groups:
            for name, comps in runs.items():
                sel = [c for c in comps if c.split == split and keep(c)]
                print(f"| {label} | {name} | " + " | ".join(_median(sel, f) for f in FAMILIES) + " |")
        print()
    if stale:
        print(f"{stale} classes differ from specs.step_choice.TRAINING_EVIDENCE: re-record it")
        print("recomputed (paste into TRAINING_EVIDENCE):")
        for cell, ev in evidence.items():
            print(f"    {cell!r}: {ev!r},")


if __name__ == "__main__":
    main()
