"""Fit the step-time model's efficiencies to the training half of the corpus (no edit to core).

Fitted, in this order:

1. ``bandwidth_efficiency``, ``compute_efficiency`` (BF16/FP16 weights),
   ``compute_efficiency`` for 8- and 4-bit weights, and ``step_overhead_s``: least squares on
   the log errors of every throughput, TPOT/ITL and E2E value of the training rows,
   ``min Σ ln(predicted / measured)²``, by Nelder–Mead (Nelder and Mead, The Computer Journal
   7(4), 1965) over the logarithms of the four parameters, each prediction a full simulation;
2. ``ttft_overhead_s``, a fixed per-request server cost added to TTFT (and E2E): with the
   efficiencies fixed, the closed-form weighted least squares of the relative TTFT residuals,
   ``o = Σ (m - p) / m² / Σ 1 / m²`` (minimises ``Σ ((p + o - m) / m)²``);
3. per GPU family (:func:`fit_bandwidth_by_family`), with everything else at its default: one
   ``bandwidth_efficiency`` for each family whose training rows carry at least
   :data:`MIN_FAMILY_VALUES` non-TTFT values, by golden section on its logarithm (Kiefer 1953),
   simulating only that family's rows.

The adopted defaults (``specs/perf.py``) are the results of stages 1 and 3, and of stage 2 on the
low-load training rows only (:func:`fit_request_overhead`: one request in flight, where no queue
can stand in for a fixed cost): ``Efficiency.request_overhead_s`` (docs/validation.md). Over every
training TTFT, stage 2 is held near 0 by the lockstep closed-loop rows.

The result is applied through :class:`~servecap.validation.predict.Adjustments`, i.e. through
the same :class:`~servecap.specs.perf.Efficiency` a calibration file supplies; the fit itself
writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from servecap.specs.gpu import gpu_family
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
    x0 = np.log(
        [
            e.bandwidth_efficiency_on(""),
            e.compute_efficiency_at("bf16"),
            e.compute_efficiency_at("fp8"),
            max(e.step_overhead_on(""), 1e-4),
        ]
    )

    def objective(x: np.ndarray) -> float:
        value = squared_log_error(compare_rows(rows, _adjustments(x), max_requests=max_requests))
        if log is not None:
            a = _adjustments(x)
            log(
                f"bw {a.efficiency.bandwidth_efficiency:.3f} c16 {a.efficiency.compute_efficiency:.3f} "
                f"c8 {a.compute_efficiency_low_precision:.3f} ovh {a.efficiency.step_overhead_on('') * 1e3:.2f} ms "
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


MIN_FAMILY_VALUES = 8
"""The fixed rule for a per-GPU-family bandwidth efficiency: the family's training rows carry at
least this many throughput, TPOT/ITL and E2E values; other families keep the global value."""


@dataclass(frozen=True, slots=True)
class FamilyFit:
    gpu_family: str
    bandwidth_efficiency: float
    num_values: int
    objective_global: float  # mean squared log error of the family's values at the global value
    objective: float  # ... at the fitted value


def golden_section(f: Callable[[float], float], lo: float, hi: float, *, evaluations: int = 14) -> tuple[float, float]:
    """Minimise a unimodal ``f`` on ``[lo, hi]`` (Kiefer, Proc. AMS 4(3), 1953): each step keeps
    the golden fraction 0.618 of the bracket; returns the best point evaluated and its value."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    best = (c, fc) if fc <= fd else (d, fd)
    for _ in range(max(0, evaluations - 2)):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
            if fc < best[1]:
                best = (c, fc)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
            if fd < best[1]:
                best = (d, fd)
    return best


def fit_bandwidth_by_family(
    rows: list[CorpusRow],
    base: Adjustments,
    *,
    min_values: int = MIN_FAMILY_VALUES,
    evaluations: int = 14,
    max_requests: int = MAX_SIM_REQUESTS,
    log: Callable[[str], None] | None = None,
) -> list[FamilyFit]:
    """With every other parameter at ``base``, one bandwidth efficiency per GPU family whose
    training rows carry at least ``min_values`` non-TTFT values (golden section on its log over
    [0.3, 1.0], each evaluation simulating only that family's rows)."""
    fams = sorted({gpu_family(r.row.gpu) for r in rows})
    out: list[FamilyFit] = []
    for fam in fams:
        mine = [r for r in rows if gpu_family(r.row.gpu) == fam]

        def at(bw: float, mine: list[CorpusRow] = mine) -> list[Comparison]:
            eff = replace(base.efficiency, bandwidth_efficiency=bw)
            return compare_rows(mine, replace(base, efficiency=eff), max_requests=max_requests)

        comps0 = at(base.efficiency.bandwidth_efficiency_on(fam))
        n = sum(1 for c in comps0 if c.family != "ttft" and c.predicted is not None)
        if n < min_values:
            continue
        x, value = golden_section(
            lambda lx: squared_log_error(at(math.exp(lx))), math.log(0.3), 0.0, evaluations=evaluations
        )
        fitted = FamilyFit(fam, math.exp(x), n, squared_log_error(comps0), value)
        if log is not None:
            log(
                f"{fam}: bandwidth_efficiency {fitted.bandwidth_efficiency:.3f} ({n} values, "
                f"objective {fitted.objective_global:.4f} -> {fitted.objective:.4f})"
            )
        out.append(fitted)
    return out


def is_low_load(row: CorpusRow) -> bool:
    """One request in flight: a closed loop of one user or a static batch of one."""
    wl = row.row.workload
    return wl.mode in ("closed", "static_batch") and wl.concurrency == 1


def fit_request_overhead(rows: list[CorpusRow], max_requests: int = MAX_SIM_REQUESTS) -> float:
    """Stage 2 on the low-load training rows: the per-request server cost
    (``Efficiency.request_overhead_s``) minimising their squared relative TTFT error, every other
    efficiency at its default and the cost itself at 0 while predicting."""
    mine = [r for r in rows if r.split == "train" and is_low_load(r)]
    base = Adjustments(efficiency=replace(Efficiency(), request_overhead_s=0.0))
    return ttft_overhead(compare_rows(mine, base, max_requests=max_requests))
