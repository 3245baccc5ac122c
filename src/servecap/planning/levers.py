"""The lever table of a fleet plan: each lever applied to the chosen fleet and re-simulated.

Fleet-size levers (routing, FP8 KV, a response cache, overflow to a small model) search the
fewest replicas again from the chosen count (a pass steps down, a fail steps up); the cheaper
GPU is that candidate's own search; the daily-curve levers (scheduled scale-ahead, a warm pool)
run the steepest-ramp window without scale-ahead, with and without a warm pool.

- ``router``: prefix-affinity if the plan routes by least-outstanding, else least-outstanding;
- ``fp8-kv``: ``kv_cache_dtype: fp8`` (twice the KV blocks of BF16);
- ``cheaper-gpu``: the candidate with the lowest $/GPU-hour below the chosen one's, else the
  request's ``cheaper_gpu`` pool (searched from the chosen count);
- ``scale-ahead``: the ramp without the scheduled scale-ahead floors (reactive only);
- ``warm-pool``: reactive only, but new replicas come from pre-provisioned standby nodes: the
  cold start skips node provisioning and image pull (weight load, compile and warm-up remain).
  The standby nodes are billed all month; there are as many as the steepest ramp adds within
  one cold start. (The simulator's cold start is per pool, so every new replica is taken warm:
  a pool replenished faster than the ramp draws on it.);
- ``cache``: ``gateway: {cache: {kind: semantic, hit_rate: X}}`` — hits cost no GPU work;
- ``overflow``: a one-replica small-model pool and ``gateway: {overflow: [...]}`` from the main
  pool when its p99 TTFT passes half the TTFT target (answers from a smaller model);
- ``cpu-tier`` (asked for only): a CPU DRAM KV tier of ``cpu_tier_gib`` per replica
  (``--cpu-tier-gib``, 512 by default), searched from the chosen count; its rent is the DRAM's
  (:data:`servecap.core.kv_tiers.DRAM_USD_PER_GIB_HOUR`, cited there) on every replica;
- ``shared-store`` (asked for only): a shared remote KV store of ``shared_store_tib``
  (``--shared-store-tib``, 1 TiB by default) read by every replica, priced as DRAM;
  both report the per-tier hit rates before (the chosen fleet) and with the lever;
- ``split``: the chosen GPUs as prefill and decode pools (:mod:`servecap.planning.pd`):
  whether splitting pays, by how much, at which P:D ratio (``split-tp``, asked for only: the
  decode side at twice the TP).

The two gateway levers need a fleet file with a ``gateway:`` section; where the fleet file does
not accept one, they are listed in ``levers_skipped`` with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from servecap.errors import ServecapError, did_you_mean
from servecap.fleet.file_schema import fleet_from_dict
from servecap.fleet.plan_window import ramp_window, rate_fn
from servecap.planning.doc import FleetDoc, Section
from servecap.planning.model import (
    HOURS_PER_MONTH,
    Context,
    FleetEval,
    FleetPlanRequest,
    LeverOut,
    Stage,
    fixed_fleet,
    search_counts,
)
from servecap.planning.run import Winner, fleet_intervals, p99_intervals, ramp_fleet, scored_window

if TYPE_CHECKING:
    from servecap.planning.model import AutoscalerOut, CandidateModel, Scored
    from servecap.planning.run import Closed

LEVERS = (
    "router",
    "fp8-kv",
    "cheaper-gpu",
    "scale-ahead",
    "warm-pool",
    "cache",
    "overflow",
    "split",
    "split-tp",
    "cpu-tier",
    "shared-store",
)
# "split-tp" (the decode side at twice the TP, servecap.planning.pd) and the KV-tier levers
# ("cpu-tier", "shared-store": worth asking for where prompts repeat, agents and multi-turn chat)
# run only when asked for; "split" (split or not) is part of the default answer
DEFAULT_LEVERS = tuple(x for x in LEVERS if x not in ("split-tp", "cpu-tier", "shared-store"))


def gateway_accepted(request: FleetPlanRequest, gateway: Section) -> str | None:
    """None when the fleet file takes this ``gateway:`` section, else why not (one line)."""
    raw: FleetDoc = {**fixed_fleet(request, request.candidates[0], 1), "gateway": gateway}
    try:
        fleet_from_dict(raw)
    except ServecapError as err:
        if err.field == "fleet" and "gateway" in str(err):
            return "the fleet file has no gateway: section in this build"
        return str(err)
    return None


def cache_gateway(request: FleetPlanRequest) -> Section:
    return {"cache": {"kind": "semantic", "hit_rate": request.cache_hit_rate}}


def overflow_pointless(model: str, small_model: str) -> str | None:
    """Why overflowing to ``small_model`` says nothing (None: it is smaller): the same model, or
    one at least as large (total parameters, ``core.params``)."""
    from servecap.catalog import resolve_model
    from servecap.core.params import param_counts

    big, small = resolve_model(model), resolve_model(small_model)
    hint = "name a smaller model with small_model (--small-model)"
    if big.id == small.id:
        return f"the chosen fleet already runs {big.id}, the overflow model: {hint}"
    if param_counts(small).total >= param_counts(big).total:
        return f"{small.id} is not smaller than the chosen fleet's {big.id}: {hint}"
    return None


def overflow_gateway(ttft_s: float) -> Section:
    return {
        "routing": {"kind": "class", "pools": {}, "default": "main"},
        "overflow": [{"from_pool": "main", "to_pool": "small", "max_ttft_s": ttft_s}],
    }


def with_own_interval(row: LeverOut, cf: Closed) -> LeverOut:
    """A lever row that met the SLOs with its own 80% intervals: its replica count and rent (the
    corpus's throughput interval carried to the count) and its p99s, as the chosen fleet's
    (:func:`~servecap.planning.run.fleet_intervals`, :func:`~servecap.planning.run.p99_intervals`);
    a P/D split's count is its own, not the co-located fleet's."""
    if not row.slo_met or row.replicas is None or row.usd_per_month is None:
        return row
    iv = {**fleet_intervals(row.replicas, row.usd_per_month, cf), **p99_intervals(row.ttft_p99_s, row.tpot_p99_s, cf)}
    return row.model_copy(update={"interval": iv})


def _row(name: str, change: str, ev: FleetEval | None, sims: int, note: str = "", usd: float | None = None) -> LeverOut:
    return LeverOut(
        name=name,
        change=change,
        replicas=ev.replicas if ev is not None else None,
        usd_per_month=usd if usd is not None else (ev.usd_per_month if ev is not None else None),
        ttft_p99_s=ev.ttft_p99_s if ev is not None else None,
        tpot_p99_s=ev.tpot_p99_s if ev is not None else None,
        slo_met=ev.slo_met if ev is not None else False,
        simulations=sims,
        note=note or ("" if ev is not None else f"no count up to the search's bound meets the SLOs ({sims} simulated)"),
    )


def _fixed(
    request: FleetPlanRequest, c: CandidateModel, router: str | None = None, *, gateway: Section | None = None
) -> Callable[[int], FleetDoc]:
    """The fleet of ``m`` replicas of candidate ``c`` (with that router, or that ``gateway:``)."""

    def build(m: int) -> FleetDoc:
        doc = fixed_fleet(request, c, m, router)
        if gateway is not None:
            doc["gateway"] = gateway
        return doc

    return build


def _search(
    ctx: Context, request: FleetPlanRequest, build: Callable[[int], FleetDoc], scored: Scored, n: int, label: str
) -> tuple[FleetEval | None, int]:
    """The fewest replicas passing with the lever, searched from the chosen ``n``."""

    res = search_counts(ctx, scored, label, build, n, limit=request.max_replicas)
    if res.answer is None:
        return None, res.count
    return res.evaluations[res.answer][1], res.count


def run_levers(request: FleetPlanRequest, ctx: Context, winner: Winner) -> tuple[list[LeverOut], list[str]]:
    """Each lever of ``request.levers`` (default :data:`DEFAULT_LEVERS`) re-simulated on the
    winner: its rows, and the levers skipped with why."""
    best, searched, scored, n = winner.best, winner.searched, winner.scored, winner.replicas
    autoscaler, targets = winner.autoscaler, winner.targets
    names = list(DEFAULT_LEVERS) if request.levers is None else request.levers
    for name in names:
        if name not in LEVERS:
            raise ServecapError("levers", name, f"one of {', '.join(LEVERS)}" + did_you_mean(name, LEVERS))
    c = best.candidate
    rows: list[LeverOut] = []
    skipped: list[str] = []
    gw_cache = cache_gateway(request)
    ttft_targets = [x for t in targets.values() for m, _, x in t if m == "ttft_s"]
    gw_overflow = overflow_gateway(min(ttft_targets, default=2.0) / 2)
    for j, name in enumerate(names):
        ctx.enter(Stage("levers re-simulated", j, len(names)))
        if name == "router":
            alt = "least-outstanding" if request.router == "prefix-affinity" else "prefix-affinity"
            ev, k = _search(ctx, request, _fixed(request, c, alt), scored, n, c.label())
            rows.append(_row(name, f"{alt} routing instead of {request.router}", ev, k))
        elif name == "fp8-kv":
            if c.kv_cache_dtype == "fp8":
                skipped.append("fp8-kv: the chosen fleet already stores its KV cache in FP8")
                continue
            c8 = c.model_copy(update={"kv_cache_dtype": "fp8"})
            ev, k = _search(ctx, request, _fixed(request, c8), scored, n, c8.label())
            rows.append(_row(name, "KV cache in FP8", ev, k))
        elif name == "cheaper-gpu":
            cheaper = [s for s in searched if s.closed.price_per_gpu_hour < best.closed.price_per_gpu_hour]
            if not cheaper:
                alt_gpu = request.cheaper_gpu
                if alt_gpu is None:
                    skipped.append(
                        "cheaper-gpu: no candidate has a lower $/GPU-hour than the chosen one (set cheaper_gpu)"
                    )
                    continue
                ev, k = _search(ctx, request, _fixed(request, alt_gpu), scored, n, alt_gpu.label())
                price = ev.usd_per_month / HOURS_PER_MONTH / max(1, ev.replicas) if ev is not None else None
                rows.append(
                    _row(
                        name,
                        f"{alt_gpu.label()}" + (f" ({price:.2f} $/replica-hour)" if price is not None else ""),
                        ev,
                        k,
                        "" if ev is not None else "no count meets the SLOs",
                    )
                )
                continue
            s = min(cheaper, key=lambda s: s.closed.price_per_gpu_hour)
            a = s.result.answer
            ev = s.result.evaluations[a][1] if a is not None else None
            rows.append(
                _row(
                    name,
                    f"{s.candidate.label()} ({s.closed.price_per_gpu_hour:.2f} $/GPU-hour, {s.closed.gpus_per_replica} per replica)",
                    ev,
                    s.result.count,
                    "from the candidate search"
                    if ev is not None
                    else (
                        f"more than {s.pruned_at} replicas (costs more)"
                        if s.pruned_at is not None
                        else "no count meets the SLOs"
                    ),
                )
            )
        elif name in ("scale-ahead", "warm-pool"):
            if autoscaler is None:
                skipped.append(f"{name}: the traffic has no daily curve (a fixed fleet)")
                continue
            rows.append(_ramp_lever(request, ctx, name, winner, autoscaler))
        elif name in ("cache", "overflow"):
            if name == "overflow":
                why_not = overflow_pointless(c.model or request.model, request.small_model)
                if why_not is not None:
                    skipped.append(f"overflow: {why_not}")
                    continue
            gw = gw_cache if name == "cache" else gw_overflow
            why = gateway_accepted(request, gw)
            if why is not None:
                skipped.append(f"{name}: the fleet file does not take this gateway: section here ({why})")
                continue
            try:
                rows.append(_gateway_lever(request, ctx, name, c, gw, scored, n))
            except ServecapError as err:  # a gateway setting the fleet file takes but cannot run here
                skipped.append(f"{name}: {err}")
        elif name in ("cpu-tier", "shared-store"):
            a = best.result.answer
            chosen = best.result.evaluations[a][1] if a is not None else None
            rows.append(_tier_lever(request, ctx, name, c, scored, n, chosen))
        elif name in ("split", "split-tp"):
            from servecap.planning.pd import split_lever

            a = best.result.answer
            chosen = best.result.evaluations[a][1] if a is not None else None
            try:
                row = split_lever(ctx, request, c, scored, n, 1 if name == "split" else 2, chosen=chosen)
                rows.append(with_own_interval(row, best.closed))
            except ServecapError as err:  # a layout the P/D fleet cannot run for this candidate
                skipped.append(f"{name}: {err}")
    ctx.enter(Stage("levers re-simulated", len(names), len(names)))
    return rows, skipped


def _tier_lever(
    request: FleetPlanRequest,
    ctx: Context,
    name: str,
    c: CandidateModel,
    scored: Scored,
    n: int,
    chosen: FleetEval | None,
) -> LeverOut:
    """A KV-tier lever: the fewest replicas with a CPU tier on each (``cpu-tier``) or a shared
    store (``shared-store``), the tier's rent added, and the hit rates per tier before and with it."""
    from servecap.core.kv_tiers import DRAM_USD_PER_GIB_HOUR, tier_usd_per_month

    if name == "cpu-tier":
        gib = request.cpu_tier_gib
        change = f"CPU DRAM KV tier of {gib:,.0f} GiB per replica"
    else:
        gib = request.shared_store_tib * 1024
        change = f"shared remote KV store of {request.shared_store_tib:,.3g} TiB (every replica reads it)"

    def build(m: int) -> FleetDoc:
        doc = fixed_fleet(request, c, m)
        for pool in doc["pools"]:
            if name == "cpu-tier":
                pool["cpu_kv_gib"] = gib
            else:
                pool["remote_kv_tib"] = request.shared_store_tib
        return doc

    ev, k = _search(ctx, request, build, scored, n, c.label())
    if ev is None:
        return _row(name, change, None, k, "no count meets the SLOs")
    unit = tier_usd_per_month("cpu" if name == "cpu-tier" else "remote", gib, HOURS_PER_MONTH)
    tier_usd = unit * (ev.replicas if name == "cpu-tier" else 1)
    before = None
    if chosen is not None and chosen.prefix_cache_hit_rate is not None:
        before = {"gpu": chosen.prefix_cache_hit_rate}
    row = _row(name, change, ev, k, usd=ev.usd_per_month + tier_usd)
    hits = ev.kv_tier_hits
    fmt = ", ".join(f"{t} {x:.0%}" for t, x in (hits or {}).items())
    row = row.model_copy(
        update={
            "hit_rates_before": before,
            "hit_rates": hits,
            "note": f"tier rent ${tier_usd:,.0f}/month (DRAM at ${DRAM_USD_PER_GIB_HOUR}/GiB-hour) in the total; "
            f"prompt tokens found: before gpu {before['gpu']:.0%}"
            if before
            else "",
        }
    )
    if fmt:
        row = row.model_copy(update={"note": (row.note + "; " if row.note else "") + f"with the tier {fmt}"})
    return row


def _ramp_lever(request: FleetPlanRequest, ctx: Context, name: str, winner: Winner, a: AutoscalerOut) -> LeverOut:
    """A daily-curve lever (``scale-ahead`` or ``warm-pool``) checked on the steepest ramp."""
    best, spec, horizon, peak, targets = winner.best, winner.spec, winner.horizon_s, winner.peak_req_s, winner.targets
    ramp_s = a.ramp_end_s - a.ramp_start_s
    window = ramp_window(spec, horizon_s=horizon, window_s=ramp_s, warmup_s=60.0)
    scored = scored_window(window, targets, request.seed)
    start = math.ceil(a.scale_ahead_headroom * window.rate_start_req_s / a.scale_ahead_req_s_per_replica - 1e-9)
    usd_replica_h = best.closed.gpus_per_replica * best.closed.price_per_gpu_hour
    if name == "scale-ahead":
        ff = ramp_fleet(request, best, a, window, start, predictive=False)
        ev = ctx.simulate(fleet_from_dict(ff), scored, label=best.candidate.label(), replicas=a.max_replicas)
        return _row(
            name,
            "without the scheduled scale-ahead (reactive autoscaler only)",
            ev,
            1,
            "the reactive autoscaler alone scales on what it observes, so each rise waits out a cold start; "
            "rent about the same",
            usd=a.usd_per_month,
        )
    cs = request.cold_start
    cold: Section | str
    if cs == "instant":
        cold = "instant"
    else:
        cold = cs.model_dump()
        cold["provisioning"] = 0.0
        cold["image_pull"] = 0.0
    ff = ramp_fleet(request, best, a, window, start, predictive=False, cold=cold if isinstance(cold, dict) else None)
    ev = ctx.simulate(fleet_from_dict(ff), scored, label=best.candidate.label(), replicas=a.max_replicas)
    rate = rate_fn(spec)
    import numpy as np

    from servecap.fleet.plan_window import grid

    t = grid(horizon, 60.0)
    rise = float(np.max(rate(t + a.scale_ahead_lead_s) - rate(t)))
    standby = max(1, math.ceil(rise / a.scale_ahead_req_s_per_replica - 1e-9))
    usd = a.usd_per_month + standby * usd_replica_h * HOURS_PER_MONTH
    return _row(
        name,
        f"reactive autoscaler with {standby} warm standby node(s): no provisioning or image pull",
        ev,
        1,
        f"standby nodes billed all month; {peak:,.0f} req/s peak",
        usd=usd,
    )


def _gateway_lever(
    request: FleetPlanRequest,
    ctx: Context,
    name: str,
    c: CandidateModel,
    gw: Section,
    scored: Scored,
    n: int,
) -> LeverOut:
    """A gateway lever (``cache`` or ``overflow``): the fewest replicas with that ``gateway:``."""
    if name == "cache":
        ev, k = _search(ctx, request, _fixed(request, c, gateway=gw), scored, n, c.label())
        given = "cache_hit_rate" in request.model_fields_set
        source = "given" if given else "assumed: set cache_hit_rate (--cache-hit-rate) from your repeats"
        return _row(name, f"semantic response cache at a {request.cache_hit_rate:.0%} hit rate ({source})", ev, k)
    cheapest = min(request.candidates, key=lambda x: x.price_per_gpu_hour or 0.0)
    small = cheapest.model_copy(update={"model": request.small_model, "tp": None, "weights_dtype": None, "name": None})

    def build(m: int, small: CandidateModel = small, gw: Section = gw) -> FleetDoc:
        from servecap.planning.model import pool_dict

        return {
            "pools": [pool_dict(request, c, m), pool_dict(request, small, 1, name="small")],
            "router": request.router,
            "gateway": gw,
        }

    ev, k = _search(ctx, request, build, scored, n, c.label())
    return _row(
        name,
        f"overflow to one {request.small_model} replica past half the TTFT target",
        ev,
        k,
        "overflowed requests get the small model's answers",
    )
