""" "How many users": the largest load that meets the SLOs, found by simulation.

- open loop: the largest request rate whose simulated p99 TTFT and p99 TPOT meet the SLOs
  (bisection on the rate; latency grows with load, so the set of passing rates is an interval);
- closed loop: the largest number of chat users (each thinking between turns) that meets them
  (bisection on the count);
- a load-latency table: the workload at fractions of that capacity, showing where queueing takes
  over (p50/p99 latencies, queue depth, batch size).

A closed loop is scored after its warm-up (:func:`closed_loop_warmup_s`): every user's first turn
arrives within one think time of the start, at ``N / Z`` requests/s instead of the steady
``N / (Z + G)``, and that burst alone set the p99 TPOT (70B on 4x H100 at 222 users: 75 ms over
the whole run, 45 ms from 30 s on, the same from 120 s on). The fleet planner discards its
window's first 30 s the same way; an open loop starts below its steady load and is scored whole.

Every evaluation uses the same seed, so the search is deterministic. The planner's closed-form
figures come alongside: rate = ``output_tokens_per_s_total / mean output tokens`` and, by
Little's law for a user who is generating for ``G = TTFT + (O - 1) x TPOT`` then thinking ``Z``,
users = ``batch x (G + Z) / G``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from servecap.core.capacity import closed_loop_users
from servecap.core.plan import Plan
from servecap.errors import ServecapError
from servecap.progress import Progress, ProgressFn
from servecap.results import RecordColumns, RunSummary, Slo, summarize_columns
from servecap.sim.setup import EngineSetup
from servecap.sim.simulate import SimResult, simulate
from servecap.workload import WorkloadSpec, dist_mean


@dataclass(frozen=True, slots=True)
class LoadPoint:
    load: float  # requests/s (open loop) or users (closed loop)
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    mean_queue_depth: float
    mean_batch_size: float
    throughput_req_s: float
    meets_slo: bool


@dataclass(frozen=True, slots=True)
class CapacityResult:
    closed_loop: bool
    slo: Slo
    max_load: float  # the largest passing rate (req/s) or number of users
    planner_load: float
    table: tuple[LoadPoint, ...]
    evaluations: int
    min_failing_load: float | None = None  # the smallest load searched that missed: max_load's bracket
    warmup_s: float = 0.0  # requests arriving before this are not scored (closed loop)


# at least this much of a closed loop's start is not scored, as the fleet planner's peak window
MIN_WARMUP_S = 30.0


def closed_loop_warmup_s(plan: Plan, workload: WorkloadSpec) -> float:
    """The start of a closed loop left unscored: one user cycle, the users' start spread (their
    first turns, default one mean think time) plus the planner's time generating ``G``, at least
    :data:`MIN_WARMUP_S`; 0 for an open loop."""
    if workload.users is None:
        return 0.0
    spread = workload.users.start_spread_s
    if spread is None:
        spread = dist_mean(workload.users.think_time_s)
    out = dist_mean(workload.output_tokens) if workload.output_tokens is not None else plan.request.output_tokens
    generating = plan.ttft_s + max(0.0, out - 1) * plan.tpot_s
    return max(MIN_WARMUP_S, float(spread) + generating)


def scored_summary(result: SimResult, warmup_s: float) -> RunSummary:
    """The run's summary over the requests arriving at or after ``warmup_s`` (latencies,
    completions, throughput); the whole run's when that leaves none, or ``warmup_s`` is 0."""
    c = result.columns
    keep = c.arrival_s >= warmup_s
    if warmup_s <= 0 or not keep.any():
        return result.summary
    sub = RecordColumns(
        arrival_s=c.arrival_s[keep],
        first_token_s=c.first_token_s[keep],
        end_s=c.end_s[keep],
        prompt_tokens=c.prompt_tokens[keep],
        output_tokens=c.output_tokens[keep],
        cached_prompt_tokens=c.cached_prompt_tokens[keep],
        preemptions=c.preemptions[keep],
        queue_time_s=c.queue_time_s[keep],
        errors=tuple(e for e, k in zip(c.errors, keep, strict=True) if k),
    )
    s = summarize_columns(sub, duration_s=max(1e-9, result.summary.duration_s - warmup_s))
    return replace(
        result.summary,
        num_requests=s.num_requests,
        completed=s.completed,
        ttft_s=s.ttft_s,
        tpot_s=s.tpot_s,
        e2e_s=s.e2e_s,
        queue_time_s=s.queue_time_s,
        throughput_req_s=s.throughput_req_s,
    )


def scored_run(plan: Plan, workload: WorkloadSpec, result: SimResult) -> tuple[RunSummary, float]:
    """The summary a run is scored by, and its unscored warm-up in seconds: a closed loop after
    :func:`closed_loop_warmup_s`, an open loop whole. ``capacity``'s search and ``simulate
    --users`` both score through here, so the same users get the same p99s."""
    warmup_s = closed_loop_warmup_s(plan, workload)
    return scored_summary(result, warmup_s), warmup_s


def meets(summary: RunSummary, slo: Slo) -> bool:
    """p99 TTFT and p99 TPOT within the SLOs, and nothing rejected or failed."""
    if summary.completed < summary.num_requests:
        return False
    if slo.ttft_s is not None and (summary.ttft_s.p99 is None or summary.ttft_s.p99 > slo.ttft_s):
        return False
    return not (slo.tpot_s is not None and summary.tpot_s.p99 is not None and summary.tpot_s.p99 > slo.tpot_s)


def planner_rate(plan: Plan, workload: WorkloadSpec) -> float:
    assert workload.output_tokens is not None
    return plan.output_tokens_per_s_total / max(1.0, dist_mean(workload.output_tokens))


def planner_users(plan: Plan, workload: WorkloadSpec) -> float:
    assert workload.users is not None and workload.output_tokens is not None
    think = dist_mean(workload.users.think_time_s)
    return closed_loop_users(plan.batch, plan.ttft_s, plan.tpot_s, dist_mean(workload.output_tokens), think)


def with_load(workload: WorkloadSpec, load: float) -> WorkloadSpec:
    """The workload at another rate (open loop) or number of users (closed loop)."""
    if workload.users is not None:
        return workload.model_copy(update={"users": workload.users.model_copy(update={"count": max(1, int(load))})})
    arrival = workload.arrival
    if arrival is None or not hasattr(arrival, "rate_per_s"):
        raise ServecapError(
            "workload.arrival",
            getattr(arrival, "kind", None),
            "capacity search needs a synthetic arrival process with a rate (not a trace)",
        )
    return workload.model_copy(update={"arrival": arrival.model_copy(update={"rate_per_s": load})})


def _point(load: float, s: RunSummary, slo: Slo) -> LoadPoint:
    return LoadPoint(
        load=load,
        ttft_p50_s=s.ttft_s.p50,
        ttft_p99_s=s.ttft_s.p99,
        tpot_p50_s=s.tpot_s.p50,
        tpot_p99_s=s.tpot_s.p99,
        e2e_p50_s=s.e2e_s.p50,
        e2e_p99_s=s.e2e_s.p99,
        mean_queue_depth=s.mean_queue_depth or 0.0,
        mean_batch_size=s.mean_batch_size or 0.0,
        throughput_req_s=s.throughput_req_s,
        meets_slo=meets(s, slo),
    )


def find_capacity(
    setup: EngineSetup,
    plan: Plan,
    workload: WorkloadSpec,
    slo: Slo,
    *,
    seed: int = 0,
    rel_tol: float = 0.02,
    table_fractions: tuple[float, ...] = (0.25, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25),
    progress: ProgressFn | None = None,
) -> CapacityResult:
    """Search the largest load meeting ``slo``; then tabulate latency against load."""
    if slo.ttft_s is None and slo.tpot_s is None:
        raise ServecapError("slo", None, "give a TTFT and/or TPOT SLO (e.g. --ttft-slo-ms 2000 --tpot-slo-ms 100)")
    closed = workload.users is not None
    warmup = closed_loop_warmup_s(plan, workload)
    cache: dict[float, LoadPoint] = {}

    def evaluate(load: float) -> LoadPoint:
        key = float(int(load)) if closed else load
        if key not in cache:
            loaded = with_load(workload, key)
            res = simulate(setup, loaded, np.random.default_rng(seed))
            cache[key] = _point(key, scored_run(plan, loaded, res)[0], slo)
            if progress is not None:
                unit = "users" if closed else "req/s"
                verdict = "meets" if cache[key].meets_slo else "misses"
                progress(
                    Progress(
                        "capacity",
                        len(cache),
                        None,
                        "simulations",
                        f"{key:,.0f} {unit} {verdict} the SLOs"
                        if key >= 100
                        else f"{key:,.3g} {unit} {verdict} the SLOs",
                    )
                )
        return cache[key]

    estimate = planner_users(plan, workload) if closed else planner_rate(plan, workload)
    lo = 0.0
    hi = max(estimate, 1.0 if closed else 1e-3)
    # bracket: grow hi until it fails (or give up far beyond the planner's ceiling)
    for _ in range(12):
        if not evaluate(hi).meets_slo:
            break
        lo = hi
        hi *= 2.0
    else:
        hi = lo
    if lo == 0.0:
        # shrink until something passes
        probe = hi
        for _ in range(20):
            probe /= 2.0
            if closed and probe < 1.0:
                break
            if evaluate(probe).meets_slo:
                lo = probe
                break
            hi = probe
    if lo > 0.0 and hi > lo:
        while (hi - lo) > rel_tol * lo and (not closed or hi - lo > 1.0):
            mid = (lo + hi) / 2.0
            if closed:
                mid = float(int(mid))
                if mid <= lo:
                    break
            if evaluate(mid).meets_slo:
                lo = mid
            else:
                hi = mid
    best = lo
    base = best if best > 0 else estimate
    rows = []
    for f in table_fractions:
        load = base * f
        if closed:
            load = float(max(1, round(load)))
        rows.append(evaluate(load))
    rows.sort(key=lambda p: p.load)
    unique = tuple({p.load: p for p in rows}.values())
    failing = [p.load for p in cache.values() if not p.meets_slo and p.load > best]
    return CapacityResult(
        closed_loop=closed,
        slo=slo,
        max_load=best,
        planner_load=estimate,
        table=unique,
        evaluations=len(cache),
        min_failing_load=min(failing) if failing else None,
        warmup_s=warmup,
    )
