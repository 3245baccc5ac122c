"""Per-class SLO attainment against percentile targets (the workload's ``slo: {ttft_s: {p99: 1}}``).

A target ``(metric, q, max_s)`` — "the q-th percentile of the class's ``metric`` is at most
``max_s``" — is **met** when the observed q-th percentile (numpy's linear method, as
:func:`servecap.results.stats.percentile`) is ``<= max_s``. Alongside, the **share within** is
the share of the class's requests whose own value is ``<= max_s``; a p99 target is met when about
99% are within (exactly so up to the interpolation between order statistics).

Per-request values (the definitions of :mod:`servecap.results.summary`): ``ttft_s`` = first token
- arrival; ``tpot_s`` = (end - first token) / (output tokens - 1), a one-token answer has none
and is left out of the TPOT percentile (it passes, as goodput counts it); ``e2e_s`` = end -
arrival; ``queue_s`` = the queue time. A request that failed (no first token or no end) counts as
infinitely slow on every metric: it is never within, and pushes the percentile up. Inter-token
latency is pooled over requests, not per request, so ``itl_s`` targets are refused here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.results.summary import RecordColumns

METRICS = ("ttft_s", "tpot_s", "e2e_s", "queue_s")
Target = tuple[str, float, float]  # (metric, percentile 0-100, max seconds)


@dataclass(frozen=True, slots=True)
class TargetResult:
    group: str  # "tenant/class", or "all"
    metric: str
    percentile: float
    max_s: float
    observed_s: float  # the observed percentile (inf: the failures reach it; nan: no samples)
    share_within: float  # share of the group's requests with value <= max_s
    count: int
    met: bool

    def label(self) -> str:
        """``p99 TTFT <= 1,000 ms`` (the percentile always stated)."""
        name = self.metric.removesuffix("_s").upper()
        return f"p{self.percentile:g} {name} <= {self.max_s * 1e3:,.0f} ms"


@dataclass(frozen=True, slots=True)
class GroupResult:
    group: str
    requests: int
    attainment: float  # share of the group's requests within every one of its targets
    targets: tuple[TargetResult, ...]

    @property
    def met(self) -> bool:
        return all(t.met for t in self.targets)


def metric_values(c: RecordColumns, metric: str) -> NDArray[np.float64]:
    """One value per request (NaN: the metric does not apply, inf: the request failed)."""
    failed = ~(np.isfinite(c.first_token_s) & np.isfinite(c.end_s))
    with np.errstate(invalid="ignore", divide="ignore"):
        if metric == "ttft_s":
            v = c.first_token_s - c.arrival_s
        elif metric == "e2e_s":
            v = c.end_s - c.arrival_s
        elif metric == "queue_s":
            v = np.array(c.queue_time_s, dtype=np.float64)
        elif metric == "tpot_s":
            steps = c.output_tokens.astype(np.float64) - 1.0
            v = np.where(steps > 0, (c.end_s - c.first_token_s) / np.where(steps > 0, steps, 1.0), np.nan)
        else:
            raise ServecapError(
                "slo", metric, f"the per-class SLO check takes {', '.join(METRICS)} (ITL is pooled, not per request)"
            )
    v = np.array(v, dtype=np.float64)
    v[failed] = np.inf
    return v


def check_target(values: NDArray[np.float64], target: Target, group: str) -> TargetResult:
    metric, q, max_s = target
    v = values[~np.isnan(values)]
    n = int(v.size)
    if n == 0:
        return TargetResult(group, metric, q, max_s, float("nan"), 1.0, 0, True)
    big = 1e300
    observed = float(np.percentile(np.where(np.isinf(v), big, v), q))
    if observed >= big / 2:
        observed = float("inf")
    within = float(np.count_nonzero(v <= max_s)) / n
    return TargetResult(group, metric, q, max_s, observed, within, n, observed <= max_s)


def slo_report(
    columns: RecordColumns,
    groups: Mapping[str, NDArray[np.int64]],
    targets: Mapping[str, Sequence[Target]],
) -> tuple[GroupResult, ...]:
    """For each group (row indices into ``columns``) with targets: each target's result and the
    share of the group's requests within all of them."""
    out: list[GroupResult] = []
    cache: dict[str, NDArray[np.float64]] = {}
    for name, idx in groups.items():
        tg = tuple(targets.get(name, ()))
        if not tg or len(idx) == 0:
            continue
        ok = np.ones(len(idx), dtype=bool)
        results = []
        for t in tg:
            if t[0] not in cache:
                cache[t[0]] = metric_values(columns, t[0])
            vals = cache[t[0]][idx]
            results.append(check_target(vals, t, name))
            ok &= np.isnan(vals) | (vals <= t[2])
        out.append(GroupResult(name, len(idx), float(ok.mean()), tuple(results)))
    return tuple(out)
