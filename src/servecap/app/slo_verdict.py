"""``simulate``'s SLO verdict, and the one rule that decides it.

The rule is ``capacity``'s: a load meets the SLOs when the **simulated** p99 TTFT and p99 TPOT
are within them and nothing was rejected or failed (:func:`servecap.sim.capacity_search.meets`,
the test capacity's search applies to every load it tries). ``plan`` and ``capacity`` treat their
80% intervals the same way: the search decides on servecap's model, and the corpus's median error
corrects the *answer* shown beside it (validation/interval.py). So ``simulate --users N`` at
capacity's simulated answer meets the SLOs, as capacity said.

The corrected p99 (the interval's estimate) does not decide the verdict; it is reported beside
it as the risk a measured run carries: where the corrected figure, or the interval's upper end,
lies over an SLO the verdict says so in words ("met on the simulation; the corrected p99 TTFT
2.32 s is over 2 s"). The same verdict goes to the terminal, ``--json`` (``slo_verdict``), the
HTML report and the web page.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from servecap.results import RunSummary
from servecap.specs.perf import INTERACTIVE_SLO, Slo
from servecap.validation.interval import Interval

RULE = (
    "simulated p99 TTFT and p99 TPOT within the SLOs and nothing rejected or failed (capacity's test); "
    "the corrected p99s (80% interval estimates) are the risk beside it, not the verdict"
)


class SloCheck(BaseModel):
    """One p99 target: the simulated value that decides, and the interval beside it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str  # "ttft_s.p99" or "tpot_s.p99" (the interval's key)
    max_s: float
    simulated_s: float | None  # None: no request gave one
    met: bool  # simulated_s <= max_s (a missing value fails)
    corrected_s: float | None = None  # the interval's bias-corrected estimate
    low_s: float | None = None
    high_s: float | None = None
    corrected_met: bool | None = None  # corrected_s <= max_s (None: no interval)


class SloVerdict(BaseModel):
    """The SLO verdict of one simulated run (see the module's rule)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    met: bool
    slo_source: str  # "request" or "default" (the interactive SLO capacity also defaults to)
    rule: str
    checks: list[SloCheck]
    failed_requests: int
    text: str  # the verdict in one line


def _s(x: float) -> str:
    return f"{x * 1e3:,.0f} ms" if x < 10 else f"{x:,.1f} s"


def slo_verdict(summary: RunSummary, intervals: Mapping[str, Interval], slo: Slo | None) -> SloVerdict:
    """The verdict of ``summary`` against ``slo`` (None or empty: the default interactive SLO)."""
    source = "request"
    if slo is None or (slo.ttft_s is None and slo.tpot_s is None):
        slo, source = INTERACTIVE_SLO, "default"
    checks = []
    for metric, target, pct in (
        ("ttft_s.p99", slo.ttft_s, summary.ttft_s),
        ("tpot_s.p99", slo.tpot_s, summary.tpot_s),
    ):
        if target is None:
            continue
        sim = pct.p99
        iv = intervals.get(metric)
        # a run whose answers are all one token has no TPOT: it passes that test (capacity's rule)
        met = (sim is not None and sim <= target) if metric == "ttft_s.p99" else (sim is None or sim <= target)
        checks.append(
            SloCheck(
                metric=metric,
                max_s=target,
                simulated_s=sim,
                met=met,
                corrected_s=None if iv is None else iv.estimate,
                low_s=None if iv is None else iv.low,
                high_s=None if iv is None else iv.high,
                corrected_met=None if iv is None else iv.estimate <= target,
            )
        )
    failed = summary.num_requests - summary.completed
    met = failed == 0 and all(c.met for c in checks)
    labels = {"ttft_s.p99": "p99 TTFT", "tpot_s.p99": "p99 TPOT"}
    shown = ", ".join(
        f"{labels[c.metric]} {'-' if c.simulated_s is None else _s(c.simulated_s)} "
        f"{'<=' if c.met else '>'} {_s(c.max_s)}"
        for c in checks
    )
    text = f"SLOs {'MET' if met else 'MISSED'} on the simulation ({shown}"
    text += f"; {failed:,} requests rejected or failed)" if failed else ")"
    if source == "default":
        text += ", against the default interactive SLOs"
    risks = [c for c in checks if c.corrected_s is not None and c.high_s is not None]
    over = [c for c in risks if c.corrected_met is False]
    reach = [c for c in risks if c.corrected_met and c.high_s is not None and c.high_s > c.max_s]
    if over:
        text += "; corrected by the corpus's median error " + ", ".join(
            f"{labels[c.metric]} {_s(c.corrected_s or 0.0)} (80% {_s(c.low_s or 0.0)}-{_s(c.high_s or 0.0)})"
            for c in over
        )
        text += " is over it: a measured run may miss" if met else ""
    elif reach:
        text += "; the 80% interval of " + ", ".join(f"{labels[c.metric]} reaches {_s(c.high_s or 0.0)}" for c in reach)
        text += ", over the SLO"
    return SloVerdict(met=met, slo_source=source, rule=RULE, checks=checks, failed_requests=failed, text=text)
