"""Fit one engine profile's kernel efficiencies on that engine's training rows of the corpus.

With the engine's scheduler and memory rules (``specs/engines.py``) in the simulation, the
efficiencies fitted before on a mix of engines absorb the engine's differences; this refits,
on the rows of ``--engine`` only (training half), by the rule of ``validation/fit.py``:

1. the compute efficiency of 8- and 4-bit GEMMs (golden section on its log over [0.2, 1.0]),
   bandwidth at the per-GPU-family defaults;
2. with it fixed, one bandwidth efficiency per GPU family whose rows of this engine carry at
   least ``MIN_FAMILY_VALUES`` throughput/TPOT/E2E values (``fit_bandwidth_by_family``).

    PYTHONPATH=src .venv/bin/python benchmarks/fit_engine.py --engine trtllm
"""

from __future__ import annotations

import argparse
import math
import time

from servecap.specs.perf import DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import compare_rows
from servecap.validation.fit import fit_bandwidth_by_family, golden_section, squared_log_error
from servecap.validation.predict import Adjustments


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="trtllm")
    ap.add_argument("--evaluations", type=int, default=12)
    ap.add_argument(
        "--bandwidth-only", action="store_true", help="stage 2 only, compute at the global default (0.42)"
    )
    args = ap.parse_args()
    rows = [r for r in load_corpus() if r.split == "train" and r.engine == args.engine]
    print(f"{len(rows)} training rows of {args.engine}", flush=True)
    t0 = time.time()

    def objective(log_c: float) -> float:
        adj = Adjustments(compute_efficiency_low_precision=math.exp(log_c))
        value = squared_log_error(compare_rows(rows, adj))
        print(f"  fp8/fp4 compute {math.exp(log_c):.3f} -> {value:.4f} ({time.time() - t0:.0f} s)", flush=True)
        return value

    base_value = squared_log_error(compare_rows(rows, Adjustments()))
    print(f"objective at the defaults: {base_value:.4f}", flush=True)
    if args.bandwidth_only:
        c8 = DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY
    else:
        x, value = golden_section(objective, math.log(0.2), 0.0, evaluations=args.evaluations)
        c8 = math.exp(x)
        print(f"stage 1: fp8/fp4 compute efficiency {c8:.3f} (objective {value:.4f})", flush=True)
    fams = fit_bandwidth_by_family(
        rows, Adjustments(compute_efficiency_low_precision=c8), evaluations=args.evaluations, log=print
    )
    for f in fams:
        print(f"stage 2: {f.gpu_family} bandwidth {f.bandwidth_efficiency:.3f} ({f.num_values} values)", flush=True)


if __name__ == "__main__":
    main()
