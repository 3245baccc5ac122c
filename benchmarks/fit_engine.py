"""Fit one engine profile's bandwidth efficiency per GPU family on that engine's training rows.

With the engine's scheduler and KV budget in the simulation (``specs/engines.py``), the
per-family bandwidth efficiencies fitted before on a mix of engines absorb the engine's
differences; this refits them on the rows of ``--engine`` only (training half): for each GPU
family whose rows of this engine carry at least ``MIN_FAMILY_VALUES`` throughput/TPOT/E2E
values, golden section on the log of its bandwidth efficiency over [0.3, 1.0], the compute
efficiencies at their global defaults, minimising the *median* absolute log error (the
recorded accuracy figure is a median: a few sources servecap cannot model, such as
TensorRT-LLM 0.6.1's static batches at +100-170%, would otherwise set the value). The adopted
values live in ``specs/perf.py`` (``BANDWIDTH_EFFICIENCY_BY_ENGINE``; docs/validation.md,
"Engine profiles", lists the variants tried).

    PYTHONPATH=src .venv/bin/python benchmarks/fit_engine.py --engine trtllm
"""

from __future__ import annotations

import argparse
import math
import statistics

from servecap.specs.gpu import gpu_family
from servecap.specs.perf import Efficiency
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import Comparison, compare_rows
from servecap.validation.fit import MIN_FAMILY_VALUES, golden_section
from servecap.validation.predict import Adjustments


def median_abs_log_error(comps: list[Comparison]) -> float:
    terms = [abs(math.log(c.predicted / c.measured)) for c in comps if c.family != "ttft" and c.predicted]
    return statistics.median(terms) if terms else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--engine", default="trtllm")
    ap.add_argument("--evaluations", type=int, default=14)
    args = ap.parse_args()
    rows = [r for r in load_corpus() if r.split == "train" and r.engine == args.engine]
    print(f"{len(rows)} training rows of {args.engine}", flush=True)
    for fam in sorted({gpu_family(r.row.gpu) for r in rows}):
        mine = [r for r in rows if gpu_family(r.row.gpu) == fam]

        def at(log_bw: float, mine: list = mine) -> list[Comparison]:  # type: ignore[type-arg]
            return compare_rows(mine, Adjustments(efficiency=Efficiency(bandwidth_efficiency=math.exp(log_bw))))

        n = sum(1 for c in at(0.0) if c.family != "ttft" and c.predicted is not None)
        if n < MIN_FAMILY_VALUES:
            print(f"{fam}: {n} values, keeps the family default", flush=True)
            continue
        x, value = golden_section(
            lambda lx: median_abs_log_error(at(lx)), math.log(0.3), 0.0, evaluations=args.evaluations
        )
        print(f"{fam}: bandwidth efficiency {math.exp(x):.3f} ({n} values, median |log error| {value:.4f})")


if __name__ == "__main__":
    main()
