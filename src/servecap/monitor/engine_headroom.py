"""Headroom from the engine model at the observed mix, calibrated to the observed TPOT.

Little's law at an unchanged time in the server (the rule this replaces) overstates the room to
grow several-fold: TPOT grows with the batch, so each request stays longer as traffic grows and
the SLOs break long before the batch the plan allows is full. Instead:

1. the mix one replica serves (:mod:`servecap.monitor.observed`): rate ``lambda``, mean prompt
   ``P`` and output ``O`` tokens, prefix-cache hit rate ``h``, mean TPOT ``t_obs``;
2. the engine model at that mix: the simulator (``servecap.sim``, the engine of ``simulate`` and
   ``capacity``) under Poisson arrivals at ``lambda``, prompts of ``P`` tokens whose first
   ``round(h x P)`` are a prefix every request shares (so ``h`` of them hit the cache), outputs of
   ``O`` tokens;
3. calibration: one factor ``k`` on the step time (every term: HBM bandwidth, peak FLOP/s and
   link bandwidth divided by ``k``, the fixed step costs multiplied by ``k``) such that the
   simulated token-weighted mean TPOT at ``lambda`` equals ``t_obs``. A longer step raises the
   batch at a given rate, so TPOT grows faster than ``k``: ``k`` is bracketed then bisected
   (:func:`calibrate`) to 1%;
4. the SLO break rate ``lambda*``: the largest rate whose simulated p99 TTFT and p99 TPOT meet the
   SLOs on the calibrated engine — :func:`servecap.sim.capacity_search.find_capacity`, the search of
   ``servecap capacity --rate`` (same request count and seed, so at ``k = 1`` the two agree);
   headroom ``lambda* / lambda - 1``;
5. the interval of ``lambda*``: (a) the rate's Poisson interval ``[lambda_lo, lambda_hi]``
   calibrates to ``[k_lo, k_hi]`` (a higher true rate means the model's TPOT at it is longer, so
   a smaller ``k``); (b) the calibration residual ``r = |ttft_obs / ttft_sim(k) - 1|`` (capped at
   :data:`MAX_RESIDUAL`), what one factor on the step time does not reproduce; the bounds of
   ``lambda*`` are the searches at ``k_hi x (1 + r)`` and ``k_lo x (1 - r)``; (c) the
   simulation's own noise: the searches on :data:`NOISE_SEEDS` other seeds, whose relative spread
   around ``lambda*`` widens both bounds.

Without a TPOT observation (no token in the window) the model is used as it is (``k = 1``),
with a note.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from servecap.core.plan import Plan, plan
from servecap.errors import ServecapError
from servecap.monitor.observed import ObservedMix
from servecap.results import Slo
from servecap.sim.capacity_search import CapacityResult, find_capacity
from servecap.sim.setup import EngineSetup, engine_setup_from_plan
from servecap.sim.simulate import simulate
from servecap.specs import Deployment, RequestShape
from servecap.specs.perf import Efficiency
from servecap.workload import WorkloadSpec, workload_from_flags
from servecap.workload.spec import PrefixSpec

MAX_ITERATIONS = 16  # simulated runs to bracket k (then as many again to bisect)
CALIBRATION_TOL = 0.01
MAX_RESIDUAL = 0.5
CALIBRATION_REQUESTS = 800
SEARCH_REQUESTS = 2000  # `servecap capacity --rate`'s default request count
NOISE_SEEDS = 2  # more searches on other seeds: the simulation's own noise in the interval


@dataclass(frozen=True, slots=True)
class EngineModel:
    """The deployment the servers run, its step-time coefficients and the SLOs to hold."""

    deployment: Deployment
    efficiency: Efficiency
    slo: Slo
    enable_prefix_caching: bool = True
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Calibration:
    scale: float  # k: the model's step time is multiplied by this
    tpot_model_s: float | None  # the calibrated model's mean TPOT at the observed rate
    ttft_model_s: float | None
    ttft_residual: float  # |ttft_obs / ttft_model - 1|, capped at MAX_RESIDUAL
    iterations: int


@dataclass(frozen=True, slots=True)
class EngineHeadroom:
    replicas_up: int
    mix: ObservedMix
    calibration: Calibration
    scale_interval: tuple[float, float]
    break_rate_per_s: float
    break_interval: tuple[float, float]
    limited_by: str  # "p99 TTFT", "p99 TPOT" or "the KV pool" (what fails just past lambda*)
    queueing: bool
    notes: tuple[str, ...] = ()

    @property
    def utilization(self) -> float:
        return self.mix.rate_per_s / self.break_rate_per_s if self.break_rate_per_s > 0 else math.inf

    @property
    def traffic_headroom(self) -> float:
        return self.break_rate_per_s / self.mix.rate_per_s - 1.0

    @property
    def headroom_interval(self) -> tuple[float, float]:
        lo, hi = self.break_interval
        return (lo / self.mix.rate_per_s - 1.0, hi / self.mix.rate_per_s - 1.0)

    def summary(self) -> str:
        m, c = self.mix, self.calibration
        r_lo, r_hi = m.rate_interval()
        b_lo, b_hi = self.break_interval
        tpot = f", observed TPOT {m.tpot_mean_s * 1e3:.1f} ms" if m.tpot_mean_s is not None else ""
        at = (
            f"at {self.utilization:.0%} of the SLO rate: {m.rate_per_s:.2f} req/s per replica "
            f"(95% {r_lo:.2f}-{r_hi:.2f}) of {self.break_rate_per_s:.2f} ({b_lo:.2f}-{b_hi:.2f}); "
            f"engine model at {m.prompt_tokens:,.0f}/{m.output_tokens:,.0f} tokens, "
            f"{m.prefix_hit_rate:.0%} prefix hits, step time x{c.scale:.2f}{tpot}"
        )
        if self.queueing or self.traffic_headroom <= 0:
            return at + f"; past the SLO rate ({self.limited_by}): requests queue, latency grows"
        h_lo, h_hi = self.headroom_interval
        return (
            at + f"; the SLOs break ({self.limited_by} first) at about {self.traffic_headroom:+.0%} traffic "
            f"({h_lo:+.0%} to {h_hi:+.0%})"
        )


def scaled_setup(setup: EngineSetup, k: float) -> EngineSetup:
    """The engine with every step ``k`` times as long (module docstring, step 3)."""
    if not k > 0:
        raise ServecapError("step_scale", k, "must be positive")
    s, e = setup.step, setup.efficiency
    step = replace(s, peak_flops=s.peak_flops / k, hbm_bytes_s=s.hbm_bytes_s / k, link_bytes_s=s.link_bytes_s / k)
    eff = replace(
        e,
        step_overhead_s=e.step_overhead_on(s.gpu_family, s.engine) * k,
        allreduce_latency_s=e.allreduce_latency_s * k,
        prefill_s_per_token=e.prefill_s_per_token * k,
    )
    return replace(setup, step=step, efficiency=eff)


def mix_workload(mix: ObservedMix, rate_per_s: float, num_requests: int) -> WorkloadSpec:
    """Poisson arrivals at ``rate_per_s`` with the mix's mean lengths and its prefix hits."""
    prompt = max(1, round(mix.prompt_tokens))
    output = max(1, round(mix.output_tokens))
    prefix = min(prompt - 1, round(mix.prefix_hit_rate * prompt))
    w = workload_from_flags(
        rate=rate_per_s, prompt_tokens=prompt - max(0, prefix), output_tokens=output, num_requests=num_requests
    )
    if prefix > 0:
        w = w.model_copy(update={"prefix": PrefixSpec(groups=1, tokens=prefix, share=1.0)})
    return w


def engine_for(model: EngineModel, mix: ObservedMix) -> tuple[Plan, EngineSetup]:
    """The plan and engine of the deployment at the mix's typical request."""
    shape = RequestShape(max(1, round(mix.prompt_tokens)), max(1, round(mix.output_tokens)))
    p = plan(model.deployment, request=shape, slo=model.slo, efficiency=model.efficiency)
    return p, engine_setup_from_plan(p, enable_prefix_caching=model.enable_prefix_caching)


def simulated_means(setup: EngineSetup, workload: WorkloadSpec, seed: int) -> tuple[float | None, float | None]:
    """(token-weighted mean TPOT, mean TTFT) of a simulated run."""
    c = simulate(setup, workload, np.random.default_rng(seed)).columns
    ok = ~np.isnan(c.first_token_s) & ~np.isnan(c.end_s)
    ttft = float(np.mean(c.first_token_s[ok] - c.arrival_s[ok])) if ok.any() else None
    gaps = c.output_tokens[ok] - 1
    tokens = float(gaps[gaps > 0].sum())
    span = float((c.end_s[ok] - c.first_token_s[ok])[gaps > 0].sum())
    return (span / tokens if tokens > 0 else None), ttft


def calibrate(setup: EngineSetup, mix: ObservedMix, rate_per_s: float, seed: int) -> Calibration:
    """The step-time factor that reproduces the observed mean TPOT at ``rate_per_s`` (step 3).

    The simulated TPOT grows with ``k`` faster than ``k`` itself (a longer step holds a larger
    batch at the same rate, up to the queue's blow-up), so ``k`` is found by bracketing (steps of
    x1.3) then bisecting ``log k`` until the TPOT is within :data:`CALIBRATION_TOL`."""
    w = mix_workload(mix, rate_per_s, CALIBRATION_REQUESTS)
    runs = 0

    def at(k: float) -> tuple[float | None, float | None]:
        nonlocal runs
        runs += 1
        return simulated_means(scaled_setup(setup, k) if k != 1.0 else setup, w, seed)

    target = mix.tpot_mean_s
    k, (tpot, ttft) = 1.0, at(1.0)
    if target is not None and tpot is not None and abs(target / tpot - 1.0) > CALIBRATION_TOL:
        lo, hi = (1.0, 1.0)
        step = 1.3
        if tpot < target:
            while runs < MAX_ITERATIONS and (at_hi := at(hi * step))[0] is not None and (at_hi[0] or 0.0) < target:
                lo = hi = hi * step
            hi *= step
        else:
            while runs < MAX_ITERATIONS and (at_lo := at(lo / step))[0] is not None and (at_lo[0] or 0.0) > target:
                lo = hi = lo / step
            lo /= step
        k = math.sqrt(lo * hi)
        tpot, ttft = at(k)
        while runs < 2 * MAX_ITERATIONS and tpot is not None and abs(target / tpot - 1.0) > CALIBRATION_TOL:
            if tpot < target:
                lo = k
            else:
                hi = k
            if hi / lo < 1.001:
                break
            k = math.sqrt(lo * hi)
            tpot, ttft = at(k)
    residual = 0.0
    if mix.ttft_mean_s is not None and ttft is not None and ttft > 0:
        residual = min(MAX_RESIDUAL, abs(mix.ttft_mean_s / ttft - 1.0))
    return Calibration(k, tpot, ttft, residual, runs)


def _first_failure(result: CapacityResult, slo: Slo) -> str:
    """Which SLO a load just past the break rate misses by the larger ratio."""
    for p in result.table:
        if p.meets_slo:
            continue
        ratios = {
            "p99 TTFT": (p.ttft_p99_s or math.inf) / slo.ttft_s if slo.ttft_s else 0.0,
            "p99 TPOT": (p.tpot_p99_s or 0.0) / slo.tpot_s if slo.tpot_s else 0.0,
        }
        name, worst = max(ratios.items(), key=lambda kv: kv[1])
        return name if worst > 1.0 else "unfinished requests"
    return "beyond the search"


def engine_headroom(
    model: EngineModel,
    mix: ObservedMix,
    replicas_up: int,
    *,
    waiting: float = 0.0,
    search: Callable[..., CapacityResult] = find_capacity,
) -> EngineHeadroom:
    """Headroom per the module docstring; ``waiting`` (requests queued now) marks a server
    already past its rate."""
    if replicas_up < 1:
        raise ServecapError("replicas_up", replicas_up, "no replica answered: nothing to compare")
    the_plan, setup = engine_for(model, mix)
    notes: list[str] = []
    cal = calibrate(setup, mix, mix.rate_per_s, model.seed)
    if mix.tpot_mean_s is None:
        notes.append("no token in the window: the engine model is not calibrated (step time x1)")
    r_lo, r_hi = mix.rate_interval()
    k_hi = calibrate(setup, mix, max(r_lo, 1e-6), model.seed).scale if mix.tpot_mean_s is not None else cal.scale
    k_lo = calibrate(setup, mix, r_hi, model.seed).scale if mix.tpot_mean_s is not None else cal.scale
    k_lo, k_hi = min(k_lo, k_hi, cal.scale), max(k_lo, k_hi, cal.scale)
    k_min, k_max = k_lo * (1.0 - cal.ttft_residual), k_hi * (1.0 + cal.ttft_residual)
    w = mix_workload(mix, mix.rate_per_s, SEARCH_REQUESTS)

    def rate_at(k: float, table: tuple[float, ...]) -> CapacityResult:
        return search(scaled_setup(setup, k), the_plan, w, model.slo, seed=model.seed, table_fractions=table)

    best = rate_at(cal.scale, (1.0, 1.1))
    slow = rate_at(k_max, (1.0,)) if k_max != cal.scale else best
    fast = rate_at(max(k_min, 1e-3), (1.0,)) if k_min != cal.scale else best
    # the simulation's own noise: a p99 over 2,000 requests rests on ~20 of them, so other seeds
    # find other break rates; the spread of NOISE_SEEDS more searches widens the interval
    spread = [
        search(scaled_setup(setup, cal.scale), the_plan, w, model.slo, seed=model.seed + i, table_fractions=(1.0,))
        for i in range(1, NOISE_SEEDS + 1)
    ]
    noise_lo = min([best.max_load, *(r.max_load for r in spread)]) / best.max_load if best.max_load > 0 else 1.0
    noise_hi = max([best.max_load, *(r.max_load for r in spread)]) / best.max_load if best.max_load > 0 else 1.0
    lo = min(slow.max_load, best.max_load) * noise_lo
    hi = max(fast.max_load, best.max_load) * noise_hi
    if best.max_load <= 0:
        raise ServecapError("slo", model.slo, "the engine model meets the SLOs at no rate at this mix")
    return EngineHeadroom(
        replicas_up=replicas_up,
        mix=mix,
        calibration=cal,
        scale_interval=(k_min, k_max),
        break_rate_per_s=best.max_load,
        break_interval=(lo, hi),
        limited_by=_first_failure(best, model.slo),
        queueing=waiting > 0 and mix.rate_per_s >= best.max_load,
        notes=tuple(notes),
    )
