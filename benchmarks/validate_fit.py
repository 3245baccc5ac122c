"""Fit the step-time efficiencies to the training half of the corpus and print the held-out errors.

    PYTHONPATH=src python benchmarks/validate_fit.py [--max-evaluations 36]
    PYTHONPATH=src python benchmarks/validate_fit.py --by-family

``--by-family`` keeps the global defaults and fits one bandwidth efficiency per GPU family whose
training rows carry enough values (``fit.MIN_FAMILY_VALUES``; a few minutes).

Each evaluation simulates every training row (about 20-40 s); the fit prints each step, then the
fitted values and the train / test / per-GPU tables with the defaults and with the fitted values.
Nothing is written: the adopted defaults live in src/servecap/specs/perf.py (docs/validation.md
gives the rule and the rows each came from).
"""

from __future__ import annotations

import argparse
import time

from servecap.validation.corpus import load_corpus, select
from servecap.validation.evaluate import Comparison, by_family, by_gpu_family, compare_rows
from servecap.validation.fit import fit, fit_bandwidth_by_family
from servecap.validation.predict import Adjustments


def _line(label: str, comps: list[Comparison]) -> str:
    return f"{label:16s} " + "  ".join(
        f"{f}: n={s.count} median|e| {s.median_abs:.1%} MAPE {s.mape:.1%}"
        for f, s in by_family(comps).items()
        if s.median_abs is not None and s.mape is not None
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-evaluations", type=int, default=36)
    ap.add_argument("--by-family", action="store_true")
    args = ap.parse_args()
    rows = load_corpus()
    t0 = time.perf_counter()
    if args.by_family:
        fits = fit_bandwidth_by_family(
            select(rows, split="train"),
            Adjustments(),
            log=lambda s: print(f"{time.perf_counter() - t0:6.0f} s  {s}", flush=True),
        )
        print(
            "bandwidth_efficiency_by_gpu_family="
            + repr(tuple((f.gpu_family, round(f.bandwidth_efficiency, 3)) for f in fits))
        )
        return
    result = fit(
        select(rows, split="train"),
        max_evaluations=args.max_evaluations,
        log=lambda s: print(f"{time.perf_counter() - t0:6.0f} s  {s}", flush=True),
    )
    a = result.adjustments
    print(
        f"fitted: bandwidth_efficiency {a.efficiency.bandwidth_efficiency:.3f}  compute_efficiency (bf16) "
        f"{a.efficiency.compute_efficiency:.3f}  compute_efficiency (fp8/fp4) {a.compute_efficiency_low_precision:.3f}  "
        f"step_overhead {a.efficiency.step_overhead_on('') * 1e3:.2f} ms  ttft_overhead {a.ttft_overhead_s * 1e3:.1f} ms  "
        f"(objective {result.objective:.4f}, {result.evaluations} evaluations, {result.num_values} values)"
    )
    for name, adj in (("default", Adjustments()), ("fitted", a)):
        comps = compare_rows(rows, adj)
        for split in ("train", "test"):
            print(_line(f"{name} {split}", [c for c in comps if c.split == split]))
        for gpu in by_gpu_family(comps):
            print(_line(f"{name} {gpu}", [c for c in comps if c.gpu_family == gpu]))


if __name__ == "__main__":
    main()
