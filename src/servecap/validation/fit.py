"""Fit the step-time model's efficiencies to the training half of the corpus (no edit to core).

Fitted, in this order:

1. ``bandwidth_efficiency``, ``compute_efficiency`` (BF16/FP16 weights),
   ``compute_efficiency`` for 8- and 4-bit weights, and ``step_overhead_s``: least squares on
   the log errors of every throughput, TPOT/ITL and E2E value of the training rows,
   ``min Σ ln(predicted / measured)²``, by Nelder–Mead (Nelder and Mead, The Computer Journal
   7(4), 1965) over the logarithms of the four parameters, each prediction a full simulation;
2. ``ttft_overhead_s``, a fixed per-request server cost added to TTFT (and E2E): with the
   efficiencies fixed, the closed-form weighted least squares of the relative TTFT residuals,
   ``o = Σ (m - p) / m² / Σ 1 / m²`` (minimises ``Σ ((p + o - m) / m)²``).

The result is applied through :class:`~servecap.validation.predict.Adjustments`, i.e. through
the same :class:`~servecap.specs.perf.Efficiency` a calibration file supplies; nothing in
``core`` changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from servecap.specs.perf import Efficiency
from servecap.validation.corpus import CorpusRow
from servecap.validation.evaluate import Comparison, compare_rows
from servecap.validation.predict import MAX_SIM_REQUESTS, Adjustments

_LOG_LO = np.log([0.05, 0.02, 0.02, 1e-5])
_LOG_HI = np.log([1.0, 1.0, 1.0, 0.05])  # efficiencies above 1 are not physical


@dataclass(frozen=True, slots=True)
class FitResult:
    adjustments: Adjustments
    objective: float  # mean squared log error of the fitted values (throughput, TPOT, E2E)
    evaluations: int
    num_values: int  # measured values the efficiencies were fitted to
    num_ttft_values: int


def _adjustments(x: np.ndarray, ttft_overhead_s: float = 0.0) -> Adjustments:
    bw, c16, c8, ovh = (float(v) for v in np.exp(np.clip(x, _LOG_LO, _LOG_HI)))
    return Adjustments(
        efficiency=Efficiency(bandwidth_efficiency=bw, compute_efficiency=c16, step_overhead_s=ovh),
        compute_efficiency_low_precision=c8,
        ttft_overhead_s=ttft_overhead_s,
    )


def squared_log_error(comparisons: list[Comparison]) -> float:
    terms = [
        math.log(c.predicted / c.measured) ** 2
        for c in comparisons
        if c.family != "ttft" and c.predicted is not None and c.predicted > 0
    ]
    return sum(terms) / len(terms) if terms else 0.0


def ttft_overhead(comparisons: list[Comparison]) -> float:
    """The fixed TTFT cost minimising the squared relative TTFT error (never negative)."""
    pairs = [(c.measured, c.predicted) for c in comparisons if c.family == "ttft" and c.predicted is not None]
    if not pairs:
        return 0.0
    num = sum((m - p) / (m * m) for m, p in pairs)
    den = sum(1.0 / (m * m) for m, _ in pairs)
    return max(0.0, num / den)


def nelder_mead(
    f: Callable[[np.ndarray], float],
    x0: np.ndarray,
    *,
    step: float = 0.25,
    max_evaluations: int = 40,
    tol: float = 1e-4,
) -> tuple[np.ndarray, float, int]:
    """Minimise ``f`` from ``x0`` (reflection 1, expansion 2, contraction 1/2, shrink 1/2)."""
    n = len(x0)
    simplex = [x0.astype(float)] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    evals = len(values)
    while evals < max_evaluations:
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < tol:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        xr = centroid + (centroid - simplex[-1])
        fr = f(xr)
        evals += 1
        if fr < values[0]:
            xe = centroid + 2.0 * (centroid - simplex[-1])
            fe = f(xe)
            evals += 1
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(xc)
            evals += 1
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                for i in range(1, n + 1):
                    simplex[i] = simplex[0] + 0.5 * (simplex[i] - simplex[0])
                    values[i] = f(simplex[i])
                    evals += 1
    best = int(np.argmin(values))
    return simplex[best], values[best], evals


def fit(
    rows: list[CorpusRow],
    *,
    start: Efficiency | None = None,
    max_evaluations: int = 40,
    max_requests: int = MAX_SIM_REQUESTS,
    log: Callable[[str], None] | None = None,
) -> FitResult:
    """Fit the efficiencies and the TTFT overhead to ``rows`` (the training half)."""
    e = start or Efficiency()
    x0 = np.log([e.bandwidth_efficiency, e.compute_efficiency, e.compute_efficiency, max(e.step_overhead_s, 1e-4)])

    def objective(x: np.ndarray) -> float:
        value = squared_log_error(compare_rows(rows, _adjustments(x), max_requests=max_requests))
        if log is not None:
            a = _adjustments(x)
            log(
                f"bw {a.efficiency.bandwidth_efficiency:.3f} c16 {a.efficiency.compute_efficiency:.3f} "
                f"c8 {a.compute_efficiency_low_precision:.3f} ovh {a.efficiency.step_overhead_s * 1e3:.2f} ms "
                f"-> {value:.4f}"
            )
        return value

    x, value, evals = nelder_mead(objective, x0, max_evaluations=max_evaluations)
    comps = compare_rows(rows, _adjustments(x), max_requests=max_requests)
    overhead = ttft_overhead(comps)
    return FitResult(
        adjustments=_adjustments(x, overhead),
        objective=value,
        evaluations=evals + 1,
        num_values=sum(1 for c in comps if c.family != "ttft" and c.predicted is not None),
        num_ttft_values=sum(1 for c in comps if c.family == "ttft" and c.predicted is not None),
    )
