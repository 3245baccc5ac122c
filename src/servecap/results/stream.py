"""A run's summary accumulated in bounded memory: counters plus quantile sketches, mergeable.

:class:`StreamingSummary` takes finished requests in batches of columns (the one outcome
column type, :class:`~servecap.results.summary.RecordColumns`)
and keeps only counters (requests, completed, errors by kind, SLO met, token sums) and one
:class:`~servecap.results.sketch.QuantileSketch` per latency (TTFT, TPOT, E2E, queue time, and
ITL fed by the engines' weighted step gaps). Its memory does not grow with the number of
requests; two of them merge (windows, seeds, pools, sweep points) into the summary of the pooled
requests. :meth:`StreamingSummary.summary` gives the same :class:`RunSummary` as
:func:`~servecap.results.summary.summarize_columns` would on the same requests: the counters,
token rates, goodput and SLO attainment exactly (the SLO test runs per request as it is
added), the percentiles within the sketch's relative error (the summary says so in
``percentile_method`` and ``relative_error``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY, QuantileSketch
from servecap.results.summary import RecordColumns, RunSummary, latencies, meets_slo
from servecap.specs.perf import Slo

_SKETCHES = ("ttft_s", "tpot_s", "e2e_s", "queue_time_s", "itl_s")


class StreamingSummary:
    """Counters and latency sketches of a stream of finished requests (see the module doc)."""

    def __init__(self, slo: Slo | None = None, relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY) -> None:
        self.slo = slo
        self.relative_accuracy = relative_accuracy
        self.num_requests = 0
        self.completed = 0
        self.slo_met = 0
        self.errors: Counter[str] = Counter()
        self.prompt_tokens = 0  # every request's
        self.cached_prompt_tokens = 0
        self.preemptions = 0
        self.prompt_tokens_completed = 0
        self.output_tokens_completed = 0
        self.sketches: dict[str, QuantileSketch] = {k: QuantileSketch(relative_accuracy) for k in _SKETCHES}

    def add(self, b: RecordColumns) -> None:
        """Count and sketch a batch of finished requests."""
        n = len(b)
        if n == 0:
            return
        ok = b.ok()
        ttft, tpot, e2e = latencies(b)
        self.num_requests += n
        self.completed += int(ok.sum())
        meets = meets_slo(ok, ttft, tpot, self.slo)
        if meets is not None:
            self.slo_met += int(meets.sum())
        self.errors.update(b.error_counts())
        self.prompt_tokens += int(b.prompt_tokens.sum())
        self.cached_prompt_tokens += int(b.cached_prompt_tokens.sum())
        self.preemptions += int(b.preemptions.sum())
        self.prompt_tokens_completed += int(b.prompt_tokens[ok].sum())
        self.output_tokens_completed += int(b.output_tokens[ok].sum())
        s = self.sketches
        s["ttft_s"].add_array(ttft[ok])
        s["tpot_s"].add_array(tpot[ok])
        s["e2e_s"].add_array(e2e[ok])
        s["queue_time_s"].add_array(b.queue_time_s[ok])

    def add_itl(self, durations_s: NDArray[np.float64] | list[float], weights: NDArray[np.int64] | list[int]) -> None:
        """Token gaps: each duration counted ``weights`` times (an engine step's batch)."""
        self.sketches["itl_s"].add_array(durations_s, weights)

    def merge(self, other: StreamingSummary) -> None:
        """Add ``other``'s requests (same SLO and relative accuracy)."""
        self.num_requests += other.num_requests
        self.completed += other.completed
        self.slo_met += other.slo_met
        self.errors.update(other.errors)
        self.prompt_tokens += other.prompt_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens
        self.preemptions += other.preemptions
        self.prompt_tokens_completed += other.prompt_tokens_completed
        self.output_tokens_completed += other.output_tokens_completed
        for k, sk in other.sketches.items():
            self.sketches[k].merge(sk)

    def summary(self, duration_s: float) -> RunSummary:
        """The run summary over ``duration_s`` (summarize_columns' definitions)."""
        dur = float(duration_s) if duration_s > 0 else float("nan")
        slo = self.slo
        has_slo = slo is not None and (slo.ttft_s is not None or slo.tpot_s is not None)
        s = self.sketches
        return RunSummary(
            num_requests=self.num_requests,
            completed=self.completed,
            duration_s=float(duration_s),
            ttft_s=s["ttft_s"].percentiles(),
            tpot_s=s["tpot_s"].percentiles(),
            itl_s=s["itl_s"].percentiles(),
            e2e_s=s["e2e_s"].percentiles(),
            queue_time_s=s["queue_time_s"].percentiles(),
            throughput_req_s=self.completed / dur if duration_s > 0 else 0.0,
            input_tokens_per_s=self.prompt_tokens_completed / dur if duration_s > 0 else 0.0,
            output_tokens_per_s=self.output_tokens_completed / dur if duration_s > 0 else 0.0,
            goodput_req_s=(self.slo_met / dur if duration_s > 0 else 0.0) if has_slo else None,
            slo_attainment=(self.slo_met / self.num_requests if self.num_requests else None) if has_slo else None,
            slo=slo,
            preemptions=self.preemptions,
            rejected=int(self.errors.get("rejected", 0)),
            errors=dict(sorted(self.errors.items())),
            cached_prompt_tokens=self.cached_prompt_tokens,
            prompt_tokens=self.prompt_tokens,
            percentile_method="sketch",
            relative_error=self.relative_accuracy,
        )

    # -- storing --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "relative_accuracy": self.relative_accuracy,
            "slo": None if self.slo is None else {"ttft_s": self.slo.ttft_s, "tpot_s": self.slo.tpot_s},
            "num_requests": self.num_requests,
            "completed": self.completed,
            "slo_met": self.slo_met,
            "errors": dict(self.errors),
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "preemptions": self.preemptions,
            "prompt_tokens_completed": self.prompt_tokens_completed,
            "output_tokens_completed": self.output_tokens_completed,
            "sketches": {k: v.to_dict() for k, v in self.sketches.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamingSummary:
        slo_d = d.get("slo")
        slo = Slo(slo_d.get("ttft_s"), slo_d.get("tpot_s")) if isinstance(slo_d, dict) else None
        out = cls(slo, float(d["relative_accuracy"]))
        for key in (
            "num_requests",
            "completed",
            "slo_met",
            "prompt_tokens",
            "cached_prompt_tokens",
            "preemptions",
            "prompt_tokens_completed",
            "output_tokens_completed",
        ):
            setattr(out, key, int(d.get(key) or 0))
        out.errors = Counter({str(k): int(v) for k, v in (d.get("errors") or {}).items()})
        for k, v in (d.get("sketches") or {}).items():
            out.sketches[k] = QuantileSketch.from_dict(v)
        return out
