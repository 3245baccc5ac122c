"""Fit one engine profile's bandwidth efficiency, or its per-step overhead, per GPU family on that
engine's training rows.

With the engine's scheduler and KV budget in the simulation (``specs/engines.py``), the
per-family values fitted before on a mix of engines absorb the engine's differences; this refits
one of them on the rows of ``--engine`` only (training half): for each GPU family (or the one
``--family``) whose rows of this engine carry at least ``MIN_FAMILY_VALUES``
throughput/TPOT/E2E values, golden section on the log of the value, everything else at its
default, minimising the *median* absolute log error (the recorded accuracy figure is a median:
a few sources servecap cannot model, such as TensorRT-LLM 0.6.1's static batches at +100-170%,
would otherwise set the value).

- ``--parameter bandwidth`` over [0.3, 1.0] (``BANDWIDTH_EFFICIENCY_BY_ENGINE``; none adopted:
  docs/validation.md, "Engine profiles", lists the variants tried);
- ``--parameter step_overhead`` over [0.2, 5] ms (``STEP_OVERHEAD_S_BY_ENGINE``; adopted for vLLM
  on H100, the one family whose bandwidth was fitted on another engine's rows:
  docs/validation.md, "Step overhead per engine").

    PYTHONPATH=src .venv/bin/python benchmarks/fit_engine.py --engine trtllm
    PYTHONPATH=src .venv/bin/python benchmarks/fit_engine.py --engine vllm --family H100 --parameter step_overhead
    ... --chosen-rows-only   # only the rows the default step model (auto) runs on --step-model
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

BOUNDS = {"bandwidth": (0.3, 1.0), "step_overhead": (0.0002, 0.005)}


def median_abs_log_error(comps: list[Comparison]) -> float:
    terms = [abs(math.log(c.predicted / c.measured)) for c in comps if c.family != "ttft" and c.predicted]
    return statistics.median(terms) if terms else 0.0


def _efficiency(parameter: str, value: float, step_model: str = "roofline") -> Efficiency:
    if parameter == "bandwidth":
        return Efficiency(bandwidth_efficiency=value, step_model=step_model)
    return Efficiency(step_overhead_s=value, step_model=step_model)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--engine", default="trtllm")
    ap.add_argument("--family", default=None, help="one GPU family only (default: every family)")
    ap.add_argument("--parameter", choices=sorted(BOUNDS), default="bandwidth")
    ap.add_argument("--evaluations", type=int, default=14)
    ap.add_argument(
        "--step-model", choices=("roofline", "operations"), default="roofline", help="the step model fitted"
    )
    ap.add_argument(
        "--chosen-rows-only",
        action="store_true",
        help="only the rows the default step model (auto, specs.step_choice) runs on --step-model",
    )
    args = ap.parse_args()
    rows = [r for r in load_corpus() if r.split == "train" and r.engine == args.engine]
    if args.chosen_rows_only:
        from servecap.catalog.gpus import lookup_gpu
        from servecap.specs.step_choice import choose_step_model
        from servecap.validation.evaluate import model_class

        rows = [
            r
            for r in rows
            if choose_step_model(
                model_class(r.row.model), lookup_gpu(r.row.gpu).vendor, r.engine, gpu_family(r.row.gpu)
            ).model
            == args.step_model
        ]
    print(f"{len(rows)} training rows of {args.engine}", flush=True)
    lo, hi = BOUNDS[args.parameter]
    for fam in sorted({gpu_family(r.row.gpu) for r in rows}):
        if args.family is not None and fam != args.family:
            continue
        mine = [r for r in rows if gpu_family(r.row.gpu) == fam]

        def at(log_v: float, mine: list = mine) -> list[Comparison]:  # type: ignore[type-arg]
            return compare_rows(
                mine, Adjustments(efficiency=_efficiency(args.parameter, math.exp(log_v), args.step_model))
            )

        n = sum(1 for c in at(math.log(hi)) if c.family != "ttft" and c.predicted is not None)
        if n < MIN_FAMILY_VALUES:
            print(f"{fam}: {n} values, keeps the family default", flush=True)
            continue
        x, value = golden_section(
            lambda lx: median_abs_log_error(at(lx)), math.log(lo), math.log(hi), evaluations=args.evaluations
        )
        print(f"{fam}: {args.parameter} {math.exp(x):.5g} ({n} values, median |log error| {value:.4f})", flush=True)


if __name__ == "__main__":
    main()
