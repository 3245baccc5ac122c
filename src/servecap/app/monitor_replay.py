"""`monitor replay`: a shadow autoscaler over a recorded history.

What would the autoscaler of a fleet file's pool have done with the traffic that really came?
The recorded request rate (:mod:`servecap.monitor.history`: the monitor's store, or a Prometheus
range-query export) becomes the workload's arrival curve — a Poisson process whose rate is the
recorded one, piecewise constant between samples (equal neighbours merged) — at the recorded
mean lengths, and the pool (its autoscaler, cold starts and router, as the file gives them) is
run by the fleet simulator, exactly as ``fleet simulate --fleet FILE`` runs it under that
workload: the same scale events for the same seed. The signal the autoscaler reads
(waiting requests, p99 TTFT ...) depends on the replicas it runs, so it comes from the simulated
replicas, not from the recorded ones.

Minute by minute: the recorded rate, the replicas that ran, the shadow's ready and starting
replicas, and the SLO risk from the engine model: the rate per ready replica against the pool's
SLO break rate ``lambda*`` (``servecap.sim.capacity_search.find_capacity`` at the history's mix, the
search of ``capacity --rate``); a minute is at risk when it is above ``lambda*`` (or has traffic
and no ready replica), and a cold-start gap when it is at risk while replicas are starting.
Totals: GPU-hours and $ of the shadow (the fleet simulator's billing) against what ran
(replicas up x GPUs per replica x time, at the pool's price).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from servecap.app.scale_event import ScaleEvent
from servecap.errors import ServecapError
from servecap.monitor.history import History
from servecap.progress import ProgressFn


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReplayMinute(_Model):
    minute: int
    rate_req_s: float
    actual_replicas: float | None
    shadow_ready: float
    shadow_starting: float
    rate_per_ready_replica: float | None
    actual_at_risk: bool | None
    shadow_at_risk: bool
    cold_start_gap: bool
    shadow_p99_ttft_s: float | None


class ReplayResponse(_Model):
    history: str
    fleet_file: str
    pool: str
    duration_s: float
    prompt_tokens: float
    output_tokens: float
    # cached / prompt tokens the replay runs with: the recording's (local and external caches), 0 unrecorded
    prefix_hit_rate: float = 0.0
    break_rate_req_s: float  # per replica: the engine model's SLO break rate at this mix
    slo: dict[str, float | None]
    minutes: list[ReplayMinute]
    scale_events: list[ScaleEvent]
    shadow_gpu_hours: float
    shadow_cost_usd: float
    actual_gpu_hours: float | None
    actual_cost_usd: float | None
    usd_per_gpu_hour: float
    shadow_minutes_at_risk: int
    actual_minutes_at_risk: int | None
    cold_start_gap_minutes: int
    seed: int
    notes: list[str]

    def summary(self) -> str:
        actual = (
            f"what ran {self.actual_gpu_hours:,.2f} GPU-hours (${self.actual_cost_usd:,.2f})"
            if self.actual_gpu_hours is not None and self.actual_cost_usd is not None
            else "what ran: unknown (the history has no replica count)"
        )
        risk = (
            f"; minutes above the SLO rate: shadow {self.shadow_minutes_at_risk}"
            + (f", actual {self.actual_minutes_at_risk}" if self.actual_minutes_at_risk is not None else "")
            + f", cold-start gaps {self.cold_start_gap_minutes}"
        )
        return (
            f"shadow autoscaler of pool {self.pool!r} over {self.duration_s / 60:,.1f} min: "
            f"{len(self.scale_events)} scale events, {self.shadow_gpu_hours:,.2f} GPU-hours "
            f"(${self.shadow_cost_usd:,.2f}) vs {actual}" + risk
        )


def history_workload(h: History, *, prompt_tokens: float | None = None, output_tokens: float | None = None) -> Any:
    """The workload of the recorded traffic (module docstring): a piecewise-constant Poisson rate,
    fixed lengths at the history's means (or the defaults of app/defaults.py)."""
    from servecap.app import defaults
    from servecap.workload import WorkloadSpec

    if len(h.time_s) < 2:
        raise ServecapError(
            "history",
            h.source,
            f"needs at least two samples, it holds {len(h.time_s)} (`monitor --once` stores one): record a session "
            "first with `servecap monitor URL --interval-s 10 --duration-s 600` (every tick is stored), then replay it",
        )
    steps: list[dict[str, float]] = []
    for t, r in zip(h.time_s, h.rate_req_s, strict=True):
        rate = round(max(0.0, r), 6)
        if not steps or steps[-1]["rate_per_s"] != rate:
            steps.append({"start_s": round(t, 6), "rate_per_s": rate})
    steps[0]["start_s"] = 0.0
    prompt = max(1, round(prompt_tokens or h.prompt_tokens or defaults.PROMPT_TOKENS))
    output = output_tokens or h.output_tokens or defaults.OUTPUT_TOKENS
    # the recorded hit rate as one shared prefix of that share of the prompt (as `monitor`'s
    # engine model runs it, servecap.monitor.engine_headroom.mix_workload)
    prefix = min(prompt - 1, round((h.prefix_hit_rate or 0.0) * prompt))
    body: dict[str, Any] = {
        "arrival": {"kind": "schedule", "rate": {"kind": "piecewise", "steps": steps}},
        "prompt_tokens": prompt - max(0, prefix),
        "output_tokens": max(1, round(output)),
        "duration_s": h.time_s[-1] + h.step_s,
    }
    if prefix > 0:
        body["prefix"] = {"groups": 1, "tokens": prefix, "share": 1.0}
    return WorkloadSpec.model_validate(body)


def _pool(fleet: Any, pool: str | None, path: str) -> Any:
    from servecap.errors import did_you_mean

    names = [p.name for p in fleet.pools]
    if pool is None:
        scaled = [p for p in fleet.pools if p.autoscaler is not None]
        if len(fleet.pools) == 1:
            return fleet.pools[0]
        if len(scaled) == 1:
            return scaled[0]
        raise ServecapError("pool", None, f"{path} has pools {', '.join(names)}: name one with --pool")
    match = [p for p in fleet.pools if p.name == pool]
    if not match:
        raise ServecapError(
            "pool", pool, f"not a pool of {path} (pools: {', '.join(names)})" + did_you_mean(pool, names)
        )
    return match[0]


def break_rate(
    pool: Any, fleet: Any, prompt: int, output: int, seed: int, prefix_hit_rate: float = 0.0
) -> tuple[float, dict[str, float | None]]:
    """The pool's SLO break rate per replica at this mix, ``prefix_hit_rate`` of the prompt
    tokens cached (the search of ``capacity --rate``)."""
    from servecap.fleet.file_schema import plan_pool
    from servecap.monitor.engine_headroom import SEARCH_REQUESTS, EngineModel, engine_for, mix_workload
    from servecap.monitor.observed import ObservedMix
    from servecap.sim.capacity_search import find_capacity
    from servecap.specs.perf import INTERACTIVE_SLO, Slo

    the_plan, _ = plan_pool(pool)
    slo = INTERACTIVE_SLO
    if fleet.slo is not None and (fleet.slo.ttft_ms is not None or fleet.slo.tpot_ms is not None):
        slo = Slo(
            fleet.slo.ttft_ms / 1e3 if fleet.slo.ttft_ms is not None else None,
            fleet.slo.tpot_ms / 1e3 if fleet.slo.tpot_ms is not None else None,
        )
    model = EngineModel(the_plan.deployment, the_plan.efficiency, slo, pool.enable_prefix_caching, seed)
    mix = ObservedMix(1.0, 0.0, float(prompt), float(output), prefix_hit_rate, None, None, 60.0)
    p, setup = engine_for(model, mix)
    res = find_capacity(setup, p, mix_workload(mix, 1.0, SEARCH_REQUESTS), slo, seed=seed, table_fractions=(1.0,))
    return res.max_load, {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s}


def _by_minute(times: Any, values: Any, n_min: int) -> list[list[Any]]:
    """``values`` grouped by the minute of their ``times`` (``[60 m, 60 (m + 1))``), those
    outside ``[0, 60 n_min)`` dropped: one pass."""
    out: list[list[Any]] = [[] for _ in range(n_min)]
    for t, v in zip(times, values, strict=False):
        if t >= 0:
            m = int(t // 60.0)
            if m < n_min:
                out[m].append(v)
    return out


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def replay(history: History, fleet_path: Path, *, pool: str | None = None, seed: int = 0) -> tuple[ReplayResponse, Any]:
    """Run the pool's autoscaler over ``history``; returns the response and the fleet response."""
    from servecap.fleet.file_schema import load_fleet_file

    return replay_fleet(history, load_fleet_file(fleet_path), fleet_path, pool=pool, seed=seed)


def replay_fleet(
    history: History,
    f: Any,
    fleet_path: Path,
    *,
    pool: str | None = None,
    seed: int = 0,
    progress: ProgressFn | None = None,
) -> tuple[ReplayResponse, Any]:
    """:func:`replay` of a fleet file already read (``f``, a ``FleetFile``; the HTTP API's body);
    ``fleet_path`` names it in the answer, and its folder is where relative paths in it start.
    ``progress`` hears the shadow fleet's simulation (requests done, simulated time)."""
    from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate

    if any(p.role != "both" for p in f.pools):
        raise ServecapError(
            "fleet",
            str(fleet_path),
            "monitor replay shadows one co-located pool under its recorded traffic; a P/D fleet's prefill and "
            "decode pools serve every request together (run fleet simulate on it with the recorded rate)",
        )
    chosen = _pool(f, pool, str(fleet_path))
    notes: list[str] = []
    if chosen.autoscaler is None:
        notes.append(f"pool {chosen.name!r} has no autoscaler: the shadow runs its fixed replicas")
    if len(f.pools) > 1:
        notes.append(f"only pool {chosen.name!r} replayed: the history is that pool's traffic")
    step = history.step_s
    interval = min(step, 10.0)
    fleet = f.model_copy(update={"pools": [chosen], "gateway": None, "timeseries_interval_s": interval})
    workload = history_workload(history)
    assert workload.prompt_tokens is not None and workload.output_tokens is not None
    prefix = workload.prefix.tokens if workload.prefix is not None else 0
    prompt, output = int(workload.prompt_tokens.value) + prefix, int(workload.output_tokens.value)
    hit = prefix / prompt
    if history.prompt_tokens is None:
        notes.append(f"the history has no lengths: {prompt:,}/{output:,} tokens assumed (app/defaults.py)")
    if history.prefix_hit_rate is None:
        notes.append("the history has no prefix-cache hit rate: the replay runs with none cached")
    else:
        notes.append(
            f"prefix-cache hit rate {history.prefix_hit_rate:.1%} from the recording (local and external caches), "
            f"run as a shared {prefix:,}-token prefix"
        )
    out, _ = fleet_simulate(
        FleetSimulateRequest(fleet=fleet, workload=workload, seed=seed), base_dir=fleet_path.parent, progress=progress
    )
    notes.extend(out.notes)
    lam, slo = break_rate(chosen, f, prompt, output, seed, hit)
    price = (out.cost_usd / out.gpu_hours) if out.gpu_hours > 0 else (chosen.price_per_gpu_hour or 0.0)
    from servecap.fleet.file_schema import plan_pool

    gpus = plan_pool(chosen, fleet_path.parent)[0].deployment.num_gpus

    ts = out.timeseries
    minutes: list[ReplayMinute] = []
    horizon = history.time_s[-1] + step
    n_min = max(1, math.ceil(horizon / 60.0))
    # one pass over the samples and the shadow's time series each, bucketed by minute (a
    # recording of 20k samples scanned per minute was quadratic: 77 s)
    rate_by = _by_minute(history.time_s, history.rate_req_s, n_min)
    repl_by = _by_minute(history.time_s, history.replicas, n_min)
    ready_by = _by_minute(ts["time_s"], ts["ready"], n_min)
    starting_by = _by_minute(ts["time_s"], ts["starting"], n_min)
    p99_by = _by_minute(ts["time_s"], ts["p99_ttft_s"], n_min)
    for m in range(n_min):
        rates = rate_by[m]
        rate = _mean([float(r) for r in rates if r is not None]) if rates else 0.0
        repl = [float(r) for r in repl_by[m] if r is not None]
        actual = _mean(repl) if repl else None
        ready = _mean([float(x) for x in ready_by[m] if x is not None]) if ready_by[m] else 0.0
        starting = _mean([float(x) for x in starting_by[m] if x is not None]) if starting_by[m] else 0.0
        p99s = [float(x) for x in p99_by[m] if x is not None and x == x]
        per = rate / ready if ready > 0 else None
        shadow_risk = (rate > 0 and ready <= 0) or (per is not None and per > lam)
        actual_risk = None if actual is None else (rate > 0 and actual <= 0) or (actual > 0 and rate / actual > lam)
        minutes.append(
            ReplayMinute(
                minute=m,
                rate_req_s=rate,
                actual_replicas=actual,
                shadow_ready=ready,
                shadow_starting=starting,
                rate_per_ready_replica=per,
                actual_at_risk=actual_risk,
                shadow_at_risk=shadow_risk,
                cold_start_gap=shadow_risk and starting > 0,
                shadow_p99_ttft_s=max(p99s) if p99s else None,
            )
        )
    actual_hours = None
    if all(r is not None for r in history.replicas):
        edges = [*history.time_s[1:], horizon]
        actual_hours = (
            sum(float(r or 0.0) * (b - a) for r, a, b in zip(history.replicas, history.time_s, edges, strict=True))
            * gpus
            / 3600.0
        )
    response = ReplayResponse(
        history=history.source,
        fleet_file=str(fleet_path),
        pool=chosen.name,
        duration_s=horizon,
        prompt_tokens=float(prompt),
        output_tokens=float(output),
        prefix_hit_rate=hit,
        break_rate_req_s=lam,
        slo=slo,
        minutes=minutes,
        scale_events=out.scale_events,
        shadow_gpu_hours=out.gpu_hours,
        shadow_cost_usd=out.cost_usd,
        actual_gpu_hours=actual_hours,
        actual_cost_usd=actual_hours * price if actual_hours is not None else None,
        usd_per_gpu_hour=price,
        shadow_minutes_at_risk=sum(m.shadow_at_risk for m in minutes),
        actual_minutes_at_risk=(
            sum(bool(m.actual_at_risk) for m in minutes) if all(m.actual_at_risk is not None for m in minutes) else None
        ),
        cold_start_gap_minutes=sum(m.cold_start_gap for m in minutes),
        seed=seed,
        notes=notes,
    )
    return response, out
