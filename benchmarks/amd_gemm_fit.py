"""Fit ``specs.amd_kernels.GEMM_SHARE_OF_MAF``: the share of AMD's published Max-Achievable FLOPs
an LLM step's FP8 GEMMs reach on an MI300X, under the step as operations, on the corpus's AMD
training rows only (FP8 weights), and print the held-out errors at the fitted value.

    PYTHONPATH=src python benchmarks/amd_gemm_fit.py [--grid 0.25,0.3,0.35,0.4,0.45]

The objective is the mean |log(predicted / measured)| of the throughput, TPOT and E2E values
(TTFT is set by the per-request cost, not the GEMMs); the grid's best value is printed with the
training and held-out medians; nothing is written.
"""

from __future__ import annotations

import argparse
import math
import statistics

from servecap.core.plan import _deployment_pieces
from servecap.specs import amd_kernels
from servecap.specs.perf import Efficiency
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import Comparison, compare_rows
from servecap.validation.predict import Adjustments

FAMILIES = ("throughput", "tpot", "e2e")


def _errors(comps: list[Comparison], split: str) -> list[float]:
    return [
        math.log(c.predicted / c.measured)
        for c in comps
        if c.split == split and c.family in FAMILIES and c.predicted is not None and c.predicted > 0
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default="0.25,0.3,0.35,0.4,0.45")
    args = ap.parse_args()
    rows = [r for r in load_corpus() if r.row.weights_dtype == "fp8" and r.row.gpu.upper().startswith("MI")]
    adj = Adjustments(efficiency=Efficiency(step_model="operations"))
    best: tuple[float, float] | None = None
    for share in (float(x) for x in args.grid.split(",")):
        amd_kernels.GEMM_SHARE_OF_MAF = share
        _deployment_pieces.cache_clear()  # each deployment's operations (and their timers) anew
        comps = compare_rows(rows, adj)
        train, test = _errors(comps, "train"), _errors(comps, "test")
        objective = statistics.fmean(abs(e) for e in train)
        print(
            f"share {share:.2f}: train mean|log e| {objective:.4f} (n={len(train)}), median |e| "
            f"train {statistics.median(abs(math.expm1(e)) for e in train):.1%} "
            f"test {statistics.median(abs(math.expm1(e)) for e in test):.1%} (n={len(test)})",
            flush=True,
        )
        if best is None or objective < best[1]:
            best = (share, objective)
    assert best is not None
    print(f"fitted GEMM_SHARE_OF_MAF = {best[0]:.2f} (objective {best[1]:.4f})")


if __name__ == "__main__":
    main()
