"""The steps of :func:`servecap.app.fleet_plan.fleet_plan` (see :mod:`servecap.planning.model`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from servecap.errors import ServecapError
from servecap.fleet.class_slo import class_groups, class_targets, group_name
from servecap.fleet.file_schema import fleet_from_dict
from servecap.fleet.plan_search import SearchResult
from servecap.fleet.plan_window import (
    DAY_S,
    Window,
    check_open_loop,
    grid,
    is_trace,
    peak_of,
    peak_window,
    ramp_window,
    rate_fn,
    scaled,
    trace_window,
    window_arrays,
)
from servecap.json_object import JsonObject
from servecap.planning.doc import AutoscalerDoc, FleetDoc, Section
from servecap.planning.model import (
    DEFAULT_WORKLOAD,
    HOURS_PER_MONTH,
    AutoscalerOut,
    CandidateModel,
    CandidateOut,
    Context,
    FleetEval,
    FleetPlanRequest,
    FleetPlanResponse,
    LeverOut,
    Scored,
    Stage,
    fixed_fleet,
    search_counts,
)
from servecap.policy.routers import ROUTERS
from servecap.results.slo_report import Target
from servecap.workload import WorkloadSpec, workload_from_dict
from servecap.workload.mix_spec import SloSpec

LeverRows = tuple[list[LeverOut], list[str]]  # the levers re-simulated, and those skipped (why)
DEFAULT_SLO = SloSpec(ttft_s={"p99": 2.0}, tpot_s={"p99": 0.1})


@dataclass(frozen=True, slots=True)
class Closed:
    """A candidate's closed form at the traffic's mean request."""

    gpus_per_replica: int
    price_per_gpu_hour: float
    req_s_per_replica: float
    e2e_s: float
    cold_start_s: float
    engine: str = "vllm"  # the engine and GPU family the corpus residuals are grouped by
    gpu_family: str = ""


@dataclass(frozen=True, slots=True)
class Searched:
    candidate: CandidateModel
    closed: Closed
    guess: int
    result: SearchResult[FleetEval]
    pruned_at: int | None = None  # it failed at the most replicas that would cost less than the best


@dataclass(frozen=True, slots=True)
class Winner:
    """What the levers start from: the winner's search and every candidate's, the peak window
    scored, the chosen replica count, the peak rate, the autoscaler sized for a daily curve
    (``None``: a fixed fleet), the traffic, its horizon and the SLO targets per group."""

    best: Searched
    searched: list[Searched]
    scored: Scored
    replicas: int
    peak_req_s: float
    autoscaler: AutoscalerOut | None
    spec: WorkloadSpec
    horizon_s: float
    targets: dict[tuple[str, str], tuple[Target, ...]]


# ---- inputs ------------------------------------------------------------------------------------


def traffic_workload(request: FleetPlanRequest) -> tuple[WorkloadSpec, float, float, bool]:
    """The workload scaled to the requested peak; ``(workload, peak_rps, horizon_s, daily)``."""
    t = request.traffic
    if t.peak_rps is not None and t.peak_users is not None:
        raise ServecapError("traffic.peak_users", t.peak_users, "give peak_users or peak_rps, not both")
    base = t.workload
    if base is None:
        if t.peak_rps is None and t.peak_users is None:
            raise ServecapError("traffic", None, "give peak_rps, peak_users or a workload with a rate curve")
        base = workload_from_dict(
            {**DEFAULT_WORKLOAD, "arrival": {"kind": "poisson", "rate_per_s": 1.0}, "duration_s": 600}
        )
    check_open_loop(base)
    if is_trace(base):  # the trace's own arrivals, at its time scale (fleet/plan_window.py)
        for key, given in (("peak_rps", t.peak_rps), ("peak_users", t.peak_users)):
            if given is not None:
                raise ServecapError(
                    f"traffic.{key}", given, "a replayed trace sets its own rate: scale it with its time_scale"
                )
        w = trace_window(base)
        return base, w.peak_rate_req_s, w.duration_s, False
    horizon = base.duration_s or DAY_S
    _, peak = peak_of(base, horizon)
    if not peak > 0:
        raise ServecapError("traffic.workload.arrival", peak, "the peak rate must be > 0 requests/s")
    want = t.peak_rps if t.peak_rps is not None else (t.peak_users / t.request_interval_s if t.peak_users else peak)
    spec = scaled(base, want / peak)
    r = rate_fn(spec)(grid(horizon, 60.0))
    daily = bool(float(np.min(r)) < 0.95 * float(np.max(r)))
    return spec, float(want), horizon, daily


def group_targets(spec: WorkloadSpec, default: SloSpec) -> dict[tuple[str, str], tuple[Target, ...]]:
    """Each (tenant, class) pair's targets: its class's SLO, else ``default``."""
    out = class_targets(spec, default.targets())
    for pair, targets in out.items():
        for metric, _, _ in targets:
            if metric == "itl_s":
                where = f"{pair[0]}/{pair[1]}" if pair[0] else "slo"
                raise ServecapError(
                    f"{where}.itl_s", metric, "the fleet planner checks ttft_s, tpot_s, e2e_s and queue_s targets"
                )
    return out


def scored_window(window: Window, targets: dict[tuple[str, str], tuple[Target, ...]], seed: int) -> Scored:
    arrays = window_arrays(window.workload, np.random.default_rng(seed))
    keep = arrays.arrival_s >= window.warmup_s
    groups = class_groups(arrays, list(targets), keep)
    return Scored(window, arrays, groups, {group_name(p): t for p, t in targets.items()}, np.flatnonzero(keep))


def closed_form(
    request: FleetPlanRequest, c: CandidateModel, spec: WorkloadSpec, arrays_mean: tuple[float, float], slo: SloSpec
) -> Closed:
    """The candidate's closed form at the mean request (SLOs read as steady-state means)."""
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.capacity import busy_fraction
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan
    from servecap.core.spec_decode import spec_config_from_flags
    from servecap.fleet.file_schema import ColdStartModel
    from servecap.specs.perf import RequestShape, Slo

    gpu = lookup_gpu(c.gpu)
    model = resolve_model(c.model or request.model)
    dep = build_deployment(
        model,
        gpu,
        tp=c.tp or 1,
        weights_dtype=c.weights_dtype or "auto",
        kv_cache_dtype=c.kv_cache_dtype,
        max_model_len=c.max_model_len,
        gpu_memory_utilization=c.gpu_memory_utilization,
        max_num_seqs=c.max_num_seqs,
        dp=c.dp,
        ep=c.ep,
        gpus_per_node=8,
        redundant_experts=c.redundant_experts,
        two_batch_overlap=c.two_batch_overlap,
        speculative=spec_config_from_flags(model, c.speculative, None, None, None) if c.speculative else None,
    )
    ttft = dict(slo.ttft_s or {})
    tpot = dict(slo.tpot_s or {})
    shape = RequestShape(max(1, round(arrays_mean[0])), max(1, round(arrays_mean[1])))
    p = plan(dep, request=shape, slo=Slo(min(ttft.values(), default=None), min(tpot.values(), default=None)))
    e2e_full = p.ttft_s + max(0.0, arrays_mean[1] - 1) * p.tpot_s
    # the batch at plan's busy fraction (core.capacity.busy_users: the 99th percentile of requests
    # in flight fits it), so the closed form's users per replica are plan's users
    busy = busy_fraction(p.batch, e2e_full / request.traffic.request_interval_s) if e2e_full > 0 else 1.0
    rate = p.output_tokens_per_s_total / max(1.0, arrays_mean[1]) * busy
    price = c.price_per_gpu_hour if c.price_per_gpu_hour is not None else (gpu.rent_usd_per_hour or 0.0)
    cs = request.cold_start
    cold = 0.0
    if cs != "instant":
        cm = cs if isinstance(cs, ColdStartModel) else ColdStartModel()
        spec_cs = cm.to_spec()
        weights = float(p.stage.weights_bytes_per_gpu * dep.num_gpus)
        cold = weights / spec_cs.load_bandwidth_bytes_s + sum(ph.mean_s for _, ph in spec_cs.phases())
    e2e = p.ttft_s + max(0.0, arrays_mean[1] - 1) * p.tpot_s
    return Closed(dep.num_gpus, price, rate, e2e, cold, dep.engine.engine, dep.gpu.family)


# ---- the plan ----------------------------------------------------------------------------------


def run_plan(
    request: FleetPlanRequest, ctx: Context, run_levers: Callable[[FleetPlanRequest, Context, Winner], LeverRows]
) -> FleetPlanResponse:
    """The plan; ``run_levers`` (:func:`servecap.planning.levers.run_levers`, passed in by
    the entry point: the levers build on this module) re-simulates the levers on the winner."""
    if not request.candidates:
        raise ServecapError("candidates", [], "give at least one candidate pool (e.g. -g H100)")
    if request.router not in ROUTERS:
        from servecap.errors import did_you_mean

        raise ServecapError(
            "router", request.router, f"one of {', '.join(ROUTERS)}" + did_you_mean(request.router, ROUTERS)
        )
    spec, peak, horizon, daily = traffic_workload(request)
    default_slo = request.slo or DEFAULT_SLO
    targets = group_targets(spec, default_slo)
    strictest = {pair: max((q for _, q, _ in t), default=50.0) for pair, t in targets.items()}
    probe = window_arrays(
        workload_from_dict(
            {**spec.model_dump(mode="json", by_alias=True, exclude_none=True), "num_requests": 2000, "duration_s": None}
        ),
        np.random.default_rng(request.seed),
    )
    mean_req = (float(np.mean(probe.prompt_tokens)), float(np.mean(probe.output_tokens)))
    closed, ruled_out = [], []
    for c in request.candidates:
        try:
            closed.append(closed_form(request, c, spec, mean_req, default_slo))
        except ServecapError as err:  # a candidate that cannot start is ruled out, with its reason
            if len(request.candidates) == 1:
                raise
            ruled_out.append(ruled_out_row(request, c, err))
    if not closed:
        raise ServecapError(
            "candidates",
            [c.label() for c in request.candidates],
            "none can start: " + "; ".join(f"{o.name}: {o.note.removeprefix('ruled out: ')}" for o in ruled_out),
        )
    if ruled_out:
        names = {o.name for o in ruled_out}
        request = request.model_copy(update={"candidates": [c for c in request.candidates if c.label() not in names]})
    e2e = max(c.e2e_s for c in closed)
    window = (
        trace_window(spec)
        if is_trace(spec)
        else peak_window(
            spec,
            horizon_s=horizon,
            e2e_s=e2e,
            percentile_by_pair=strictest,
            tail=request.tail_samples,
            max_requests=request.max_window_requests,
        )
    )
    scored = scored_window(window, targets, request.seed)
    if is_trace(spec):
        if len(scored.scored) > request.max_window_requests:  # each simulation replays all of it
            raise ServecapError(
                "traffic.workload.arrival",
                f"{len(scored.scored):,} requests",
                f"more than max_window_requests ({request.max_window_requests:,}) to replay in every simulation: "
                "window the trace (--trace-start-s/--trace-end-s) or raise max_window_requests",
            )
        ctx.notes.append(
            f"replayed trace: all {len(scored.scored):,} of its requests scored at its time scale (busiest minute "
            f"{peak:,.2f} req/s); a percentile rests on the requests beyond it: window or scale the trace for more"
        )
    searched = search_all(request, ctx, closed, scored, peak)
    outs = [candidate_out(request, s, peak) for s in searched]
    passing = [(o.usd_per_month, i) for i, o in enumerate(outs) if o.usd_per_month is not None]
    if not passing:
        raise no_candidate_error(outs, request.max_replicas)
    _, best_i = min(passing)
    outs = [*outs, *ruled_out]  # after the searched ones: best_i indexes those
    best = searched[best_i]
    assert best.result.answer is not None
    n = best.result.answer
    fleet_ev, below = best.result.evidence()
    assert fleet_ev is not None
    ctx.enter(Stage("second-seed checks", 0, 1))
    verify, n = verify_winner(request, ctx, best, scored, n)
    if n != best.result.answer:
        ctx.notes.append(f"the second seed needed {n} replicas: the plan takes {n}")
        fleet_ev = verify
        below = best.result.evaluations.get(n - 1, (False, None))[1] or below
    chosen = outs[best_i].model_copy(
        update={"replicas": n, "usd_per_month": fleet_ev.usd_per_month, "req_s_per_replica": peak / n}
    )
    autoscaler = None
    if daily:
        ctx.enter(Stage("daily-curve sizings", 0, 1))
        autoscaler = size_autoscaler(request, ctx, best, spec, horizon, n, peak, targets)
    winner = Winner(best, searched, scored, n, peak, autoscaler, spec, horizon, targets)
    levers, skipped = run_levers(request, ctx, winner)
    ff = fixed_fleet(request, best.candidate, n)
    ff["pools"][0].pop("cold_start", None)
    if autoscaler is not None:
        # the autoscaler takes over from the peak count the plan simulated: a file that started at
        # min_replicas re-ran its peak window as a cold-start backlog (p99 TTFT 252 s, not 0.39)
        ff["pools"][0]["replicas"] = n
        ff["pools"][0]["autoscaler"] = autoscaler_dict(request, autoscaler)
    return FleetPlanResponse(
        model=request.model,
        router=request.router,
        peak_rps=peak,
        peak_users=request.traffic.peak_users,
        request_interval_s=request.traffic.request_interval_s,
        daily_curve=daily,
        slo=list(dict.fromkeys(f"{group_name(p)}: {lbl}" for p, t in targets.items() for lbl in _labels(t))),
        window={
            "peak_at_s": window.start_s,
            "duration_s": window.duration_s,
            "warmup_s": window.warmup_s,
            "scored_requests": float(len(scored.scored)),
            "tail_samples": float(request.tail_samples) if not is_trace(spec) else _trace_tail(scored, strictest),
        },
        chosen=chosen,
        fleet=fleet_ev,
        next_cheaper=below,
        verify=verify,
        candidates=outs,
        autoscaler=autoscaler,
        levers=levers,
        levers_skipped=skipped,
        simulations=ctx.simulations,
        story=story_lines(request, chosen, peak),
        fleet_file=ff,
        notes=ctx.notes,
        peak_workload=window.workload.model_dump(mode="json", by_alias=True, exclude_none=True),
        interval={
            **fleet_intervals(n, fleet_ev.usd_per_month, best.closed),
            **p99_intervals(fleet_ev.ttft_p99_s, fleet_ev.tpot_p99_s, best.closed),
        },
    )


def _trace_tail(scored: Scored, strictest: dict[tuple[str, str], float]) -> float:
    """The requests a replayed trace puts beyond its strictest percentile (by hand: 40 requests
    at p99 leave 40 x 0.01 = 0.4, so 0 whole samples)."""
    q = max(strictest.values(), default=50.0)
    return float(math.floor(len(scored.scored) * (1 - q / 100) + 1e-9))


def fleet_intervals(n: int, usd_per_month: float, cf: Closed) -> dict[str, JsonObject]:
    """The 80% intervals of the winner's replica count and rent, carried from the corpus's
    throughput residuals of its engine and GPU family (:func:`servecap.validation.interval.replica_interval`:
    replicas needed scale inversely with what one replica serves)."""
    from servecap.validation.interval import replica_interval

    count, cost = replica_interval(n, usd_per_month, engine=cf.engine, gpu_family=cf.gpu_family)
    return {"replicas": count.to_dict(), "usd_per_month": cost.to_dict()}


def p99_intervals(ttft_p99_s: float | None, tpot_p99_s: float | None, cf: Closed) -> dict[str, JsonObject]:
    """The 80% intervals of the chosen fleet's p99 TTFT and TPOT at the peak (the corpus's ttft
    and tpot residuals of its engine and GPU family): what `fleet simulate` of the written
    fleet file on its peak window re-runs to (docs/fleet.md, "Plan -> file -> deploy")."""
    from servecap.validation.interval import intervals_for

    values = {
        name: (v, metric)
        for name, v, metric in (("ttft_p99_s", ttft_p99_s, "ttft"), ("tpot_p99_s", tpot_p99_s, "tpot"))
        if v is not None
    }
    return {k: iv.to_dict() for k, iv in intervals_for(values, engine=cf.engine, gpu_family=cf.gpu_family).items()}


def _labels(targets: tuple[Target, ...]) -> list[str]:
    return [f"p{q:g} {m.removesuffix('_s').upper()} <= {x * 1e3:,.0f} ms" for m, q, x in targets]


def _guess(cf: Closed, peak: float) -> int:
    return max(1, math.ceil(peak / cf.req_s_per_replica - 1e-9)) if cf.req_s_per_replica > 0 else 1


def search_all(
    request: FleetPlanRequest, ctx: Context, closed: list[Closed], scored: Scored, peak: float
) -> list[Searched]:
    """Search the candidates in order of their closed-form $/month; once one has an answer, a
    later one is first tried at the most replicas that would still cost less (``break_even``):
    if that fails, it cannot win, and its search stops there (one simulation)."""
    order = sorted(range(len(closed)), key=lambda i: _guess(closed[i], peak) * _replica_usd_h(closed[i]))
    found: dict[int, Searched] = {}
    best_usd_h: float | None = None
    ctx.enter(Stage("candidates searched", 0, len(order)))
    for j, i in enumerate(order):
        c, cf = request.candidates[i], closed[i]
        break_even = None
        if best_usd_h is not None and request.prune_candidates:
            per = _replica_usd_h(cf)
            break_even = min(request.max_replicas, math.ceil(best_usd_h / per - 1e-9) - 1) if per > 0 else None
        s = search_candidate(request, ctx, c, cf, scored, peak, limit=break_even)
        found[i] = s
        ctx.enter(Stage("candidates searched", j + 1, len(order)))
        if s.result.answer is not None:
            usd = s.result.answer * _replica_usd_h(cf)
            best_usd_h = usd if best_usd_h is None else min(best_usd_h, usd)
    return [found[i] for i in range(len(closed))]


def _replica_usd_h(cf: Closed) -> float:
    return cf.gpus_per_replica * cf.price_per_gpu_hour


def search_candidate(
    request: FleetPlanRequest,
    ctx: Context,
    c: CandidateModel,
    cf: Closed,
    scored: Scored,
    peak: float,
    router: str | None = None,
    limit: int | None = None,
) -> Searched:
    """The fewest replicas of ``c`` whose peak window meets the targets; with ``limit`` (the
    break-even count), ``limit`` is tried first and a failure there ends the search."""
    guess = _guess(cf, peak)
    cache: dict[int, tuple[bool, FleetEval]] = {}

    def build(k: int) -> FleetDoc:
        return fixed_fleet(request, c, k, router)

    if limit is not None:
        if limit < 1:
            return Searched(c, cf, guess, SearchResult(None, {}), pruned_at=limit)
        ev = ctx.simulate(fleet_from_dict(build(limit)), scored, label=c.label(), replicas=limit)
        cache[limit] = (ev.slo_met, ev)
        if not ev.slo_met:
            return Searched(c, cf, guess, SearchResult(None, dict(cache)), pruned_at=limit)
        guess = min(guess, limit)
    res = search_counts(ctx, scored, c.label(), build, guess, limit=limit or request.max_replicas, cache=cache)
    return Searched(c, cf, guess, res)


def candidate_out(request: FleetPlanRequest, s: Searched, peak: float) -> CandidateOut:
    c, cf, r = s.candidate, s.closed, s.result
    n = r.answer
    evals = [e for _, e in r.evaluations.values()]
    best = r.evaluations[n][1] if n is not None else (max(evals, key=lambda e: e.attainment) if evals else None)
    interval = request.traffic.request_interval_s
    return CandidateOut(
        name=c.label(),
        model=c.model or request.model,
        gpu=c.gpu,
        gpus_per_replica=cf.gpus_per_replica,
        price_per_gpu_hour=cf.price_per_gpu_hour,
        closed_form_req_s_per_replica=cf.req_s_per_replica,
        closed_form_replicas=s.guess,
        replicas=n,
        usd_per_month=n * cf.gpus_per_replica * cf.price_per_gpu_hour * HOURS_PER_MONTH if n is not None else None,
        req_s_per_replica=peak / n if n else None,
        users_per_gpu=peak * interval / (n * cf.gpus_per_replica) if n else None,
        closed_form_users_per_gpu=cf.req_s_per_replica * interval / cf.gpus_per_replica,
        simulations=r.count,
        best=best,
        note=(
            ""
            if s.pruned_at is None
            else "one replica already costs more than the cheapest fleet (not simulated)"
            if s.pruned_at < 1
            else f"more than {s.pruned_at} replicas: it costs more than the cheapest (its break-even count fails)"
        ),
    )


def ruled_out_row(request: FleetPlanRequest, c: CandidateModel, err: ServecapError) -> CandidateOut:
    """A candidate that cannot start (its weights do not fit, no KV budget, ...): a row of the
    candidates table with no count and the reason, instead of an error that sinks the plan."""
    return CandidateOut(
        name=c.label(),
        model=c.model or request.model,
        gpu=c.gpu,
        gpus_per_replica=c.tp or 1,
        price_per_gpu_hour=c.price_per_gpu_hour or 0.0,
        closed_form_req_s_per_replica=0.0,
        closed_form_replicas=0,
        replicas=None,
        usd_per_month=None,
        req_s_per_replica=None,
        users_per_gpu=None,
        closed_form_users_per_gpu=0.0,
        simulations=0,
        best=None,
        note=f"ruled out: {err}",
    )


def no_candidate_error(outs: list[CandidateOut], limit: int) -> ServecapError:
    """One line: which SLO no candidate meets, and the best attainment seen."""
    best = max(
        (o for o in outs if o.best is not None),
        key=lambda o: (o.best.attainment, -o.best.replicas) if o.best else (0.0, 0),
    )
    ev = best.best
    assert ev is not None
    failed = ev.failed_targets[0] if ev.failed_targets else "the SLOs"
    observed = next((t for t in ev.targets if not t.met), None)
    seen = ""
    if observed is not None and observed.observed_s is not None:
        seen = f" (observed {observed.observed_s * 1e3:,.0f} ms)" if observed.observed_s < 1e9 else " (requests failed)"
    return ServecapError(
        "slo",
        failed,
        f"no candidate meets it with up to {limit} replicas; the best, {best.name} x {ev.replicas}, has "
        f"{ev.attainment:.1%} of requests within their SLOs{seen}",
    )


def verify_winner(
    request: FleetPlanRequest, ctx: Context, best: Searched, scored: Scored, n: int
) -> tuple[FleetEval, int]:
    """Re-run the winner on a second seed (a new draw of the window); one more replica while it fails (at most 3)."""
    again = scored_window(scored.window, {_pair(g): t for g, t in scored.targets.items()}, request.seed + 1)
    ev = None
    for _ in range(3):
        ev = ctx.simulate(
            fleet_from_dict(fixed_fleet(request, best.candidate, n)),
            again,
            label=best.candidate.label(),
            replicas=n,
            seed=request.seed + 1,
        )
        if ev.slo_met:
            break
        n += 1
    assert ev is not None
    return ev, ev.replicas


def _pair(group: str) -> tuple[str, str]:
    if group == "all":
        return ("", "")
    tenant, _, cls = group.partition("/")
    return (tenant, cls)


# ---- the autoscaler on the daily curve --------------------------------------------------------


def autoscaler_dict(request: FleetPlanRequest, a: AutoscalerOut, *, predictive: bool = True) -> AutoscalerDoc:
    d: AutoscalerDoc = {
        "preset": a.preset,
        "target": a.target,
        "interval_s": a.interval_s,
        "min_replicas": a.min_replicas,
        "max_replicas": a.max_replicas,
    }
    if predictive:
        d["predictive"] = {
            "req_s_per_replica": a.scale_ahead_req_s_per_replica,
            "lead_s": a.scale_ahead_lead_s,
            "step_s": 60.0,
            "headroom": a.scale_ahead_headroom,
        }
    return d


def floors(
    rate: Any, per_replica: float, lead_s: float, horizon_s: float, headroom: float, lo: int, hi: int
) -> list[tuple[float, int]]:
    from servecap.fleet.predictive import scale_ahead_schedule

    out = scale_ahead_schedule(
        rate, req_s_per_replica=per_replica, lead_s=lead_s, horizon_s=horizon_s, step_s=60.0, headroom=headroom
    )
    return [(t, min(hi, max(lo, k))) for t, k in out]


def floor_usd_per_month(fl: list[tuple[float, int]], horizon_s: float, usd_per_replica_hour: float) -> float:
    """Rent of the floor over the day, times the days in a month: Σ replicas x duration."""
    total = 0.0
    for (t, k), nxt in zip(fl, [*fl[1:], (horizon_s, 0)], strict=True):
        total += k * (nxt[0] - t)
    return total / 3600.0 * usd_per_replica_hour * (HOURS_PER_MONTH * 3600.0 / horizon_s)


def ramp_fleet(
    request: FleetPlanRequest,
    best: Searched,
    a: AutoscalerOut,
    window: Window,
    start_replicas: int,
    *,
    predictive: bool,
    cold: Section | None = None,
) -> FleetDoc:
    """A fleet file for the ramp window: the autoscaled pool, with scale-ahead floors of the
    window's own curve as its schedule."""
    pool = fixed_fleet(request, best.candidate, start_replicas)["pools"][0]
    cs = request.cold_start
    pool["cold_start"] = cold if cold is not None else (cs if cs == "instant" else cs.model_dump())
    auto = autoscaler_dict(request, a, predictive=False)
    if predictive:
        fl = floors(
            rate_fn(window.workload),
            a.scale_ahead_req_s_per_replica,
            a.scale_ahead_lead_s,
            window.duration_s,
            a.scale_ahead_headroom,
            a.min_replicas,
            a.max_replicas,
        )
        auto["schedule"] = [{"at_s": t, "min_replicas": k} for t, k in fl]
    pool["replicas"] = max(a.min_replicas, min(a.max_replicas, start_replicas))
    pool["autoscaler"] = auto
    return {"pools": [pool], "router": request.router}


def _planned_target(request: FleetPlanRequest, best: Searched, n: int) -> float | None:
    """The preset's target from the winner's own plan where the preset reads one (``keda-vllm``:
    requests in flight per replica at 60% of its planned service rate, as ``fleet simulate``
    resolves it), so the fleet file states the target the plan simulated."""
    from servecap.fleet.file_schema import plan_pool, planned_target

    pool = fleet_from_dict(fixed_fleet(request, best.candidate, n)).pools[0]
    return planned_target(request.autoscaler.preset, plan_pool(pool)[0])


def size_autoscaler(
    request: FleetPlanRequest,
    ctx: Context,
    best: Searched,
    spec: WorkloadSpec,
    horizon: float,
    n: int,
    peak: float,
    targets: dict[tuple[str, str], tuple[Target, ...]],
) -> AutoscalerOut:
    """Min/max/target and scale-ahead from the peak answer, checked on the steepest ramp."""
    from servecap.policy.autoscalers import PRESETS

    per = peak / n
    rate = rate_fn(spec)
    r = rate(grid(horizon, 60.0))
    lo = max(1, math.ceil(float(np.min(r)) / per - 1e-9))
    hi = n + max(1, math.ceil(0.1 * n))
    lead = best.closed.cold_start_s
    ramp_s = request.autoscaler.ramp_window_s or max(300.0, 3.0 * lead)
    window = ramp_window(spec, horizon_s=horizon, window_s=ramp_s, warmup_s=60.0)
    scored = scored_window(window, targets, request.seed)
    preset = PRESETS[request.autoscaler.preset]
    target = request.autoscaler.target or _planned_target(request, best, n) or preset.target
    interval = request.autoscaler.interval_s or preset.interval_s
    out: AutoscalerOut | None = None
    for used, h in enumerate(request.autoscaler.headroom, start=1):
        a = AutoscalerOut(
            preset=request.autoscaler.preset,
            signal=preset.signal,
            target=target,
            interval_s=interval,
            min_replicas=lo,
            max_replicas=hi,
            scale_ahead_req_s_per_replica=per,
            scale_ahead_lead_s=lead,
            scale_ahead_headroom=h,
            ramp_start_s=window.start_s,
            ramp_end_s=window.start_s + window.duration_s,
            ramp_rate_from_req_s=window.rate_start_req_s,
            ramp_rate_to_req_s=window.rate_end_req_s,
            ramp=FleetEval(
                candidate="",
                replicas=0,
                usd_per_month=0,
                requests=0,
                ttft_p99_s=None,
                tpot_p99_s=None,
                attainment=0,
                slo_met=False,
                failed_targets=[],
                targets=[],
                seed=0,
            ),
            usd_per_month=0.0,
            simulations=0,
        )
        start = math.ceil(h * window.rate_start_req_s / per - 1e-9)
        ev = ctx.simulate(
            fleet_from_dict(ramp_fleet(request, best, a, window, start, predictive=True)),
            scored,
            label=best.candidate.label(),
            replicas=hi,
        )
        fl = floors(rate, per, lead, horizon, h, lo, hi)
        usd = floor_usd_per_month(fl, horizon, best.closed.gpus_per_replica * best.closed.price_per_gpu_hour)
        ev = ev.model_copy(update={"usd_per_month": usd})  # the autoscaled rent, not the ramp's starting count
        out = a.model_copy(update={"ramp": ev, "usd_per_month": usd, "simulations": used})
        if ev.slo_met:
            break
    assert out is not None
    if not out.ramp.slo_met:
        ctx.notes.append(
            f"the steepest ramp misses the SLOs even with {out.scale_ahead_headroom:g}x scale-ahead headroom "
            f"({out.ramp.attainment:.1%} within): raise min_replicas or the headroom"
        )
    return out


def story_lines(request: FleetPlanRequest, chosen: CandidateOut, peak: float) -> list[str]:
    """Where fleet plan's figures differ from plan's and capacity's, and why (one line each)."""
    interval = request.traffic.request_interval_s
    served = chosen.users_per_gpu or 0.0
    n = chosen.replicas or 0
    # the peak's users over the chosen count's GPUs is the load each carries, a lower bound on what
    # a GPU serves; one replica fewer fails, so the simulated capacity is below the load over n - 1
    upper = served * n / (n - 1) if n > 1 else None
    between = f"between {served:,.0f} and {upper:,.0f}" if upper is not None else f"at least {served:,.0f}"
    lines = [
        f"users per GPU: {between} simulated (the peak's users over {n} and {n - 1} replicas' GPUs: {n} meet "
        f"the SLOs, {n - 1} do not) vs {chosen.closed_form_users_per_gpu:,.0f} closed form "
        f"(both at one request per user every {interval:g} s): the closed form checks the SLOs against "
        "steady-state means without queueing; the fleet plan checks the stated percentiles over a simulated "
        "peak window with queueing and the router across replicas",
        f"replicas: {chosen.replicas} simulated vs {chosen.closed_form_replicas} closed form "
        f"({peak:,.2f} req/s / {chosen.closed_form_req_s_per_replica:,.2f} req/s per replica)",
        "`servecap capacity` sizes one replica under the same percentile SLOs; a fleet shares its queue "
        "across replicas through the router, so its per-replica rate can differ from capacity's",
    ]
    return lines
