"""The simulate use case: one replica under a workload, by discrete-event simulation.

:func:`simulate_request` takes a :class:`~servecap.app.simulate_request.SimulateRequest` (the
CLI's flags and the HTTP body alike) and returns a :class:`SimulateResponse`: :func:`build`
turns the request into a plan, an engine set-up and a workload (shared with ``capacity``);
:func:`simulate` runs it and checks the load first: when the offered load exceeds what the
replica serves, the response says so (arrival vs service rate, queue growth) before any
percentile, since percentiles of an overloaded run measure the run's length, not the service.
``SimulateResponse.model_dump_json()`` is ``servecap simulate --json``: the typed run summary's
keys (:class:`~servecap.results.summary_json.RunSummaryJson`) at the top level, then the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from servecap.app.flags import LoadFlags, StreamFlags, deployment_from_flags, efficiency_from_file, with_step_model
from servecap.app.limits import WorkLimits, check_workload, cli_limits
from servecap.app.simulate_request import CAPACITY_DURATION_S, SimulateRequest
from servecap.app.slo_verdict import SloVerdict, slo_verdict
from servecap.errors import ServecapError
from servecap.progress import Progress, ProgressFn
from servecap.results.summary_json import RunSummaryJson
from servecap.validation.interval import Interval

if TYPE_CHECKING:
    from servecap.core.plan import Plan
    from servecap.sim import EngineSetup
    from servecap.sim.simulate import SimResult
    from servecap.specs import Slo
    from servecap.workload import WorkloadSpec
    from servecap.workload.spec_parts import TraceArrival

# Overload: the queue wait of late arrivals grows by more than this many seconds per second of
# arrivals (a stable queue's slope is ~0), or the offered rate exceeds the planner's service rate.
QUEUE_GROWTH_LIMIT = 0.02


@dataclass(frozen=True)
class Built:
    plan: Plan
    setup: EngineSetup
    workload: WorkloadSpec
    notes: list[str] = field(default_factory=list)
    calibration: Path | None = None  # the calibration file the efficiencies came from (the intervals read its fit)


def workload_from_options(
    load: LoadFlags,
    stream: StreamFlags,
    *,
    workload: Path | None = None,
    default_num_requests: int = 1000,
    notes: list[str] | None = None,
    trace: TraceArrival | None = None,
) -> WorkloadSpec:
    """The workload a command's flags name: a workload file (``--num-requests``/``--duration-s``
    override its stop), or an open loop at ``load.rate`` / ``load.users`` chat users from the
    stream flags (``default_num_requests`` when no stop is given, with a note). Shared by
    simulate, capacity and fleet simulate."""
    from servecap.errors import ServecapError
    from servecap.workload import load_workload, workload_from_flags

    num_requests = load.num_requests
    if trace is not None:
        if workload is not None:
            raise ServecapError("trace", trace.path, "give --trace or --workload, not both")
        if load.rate is not None or load.users is not None:
            raise ServecapError("trace", trace.path, "a trace brings its own arrivals: drop --rate/--users")
        from servecap.workload import WorkloadSpec

        return WorkloadSpec(arrival=trace, num_requests=num_requests, duration_s=load.duration_s)
    if workload is not None:
        if load.rate is not None or load.users is not None:
            raise ServecapError("workload", str(workload), "give --workload or --rate/--users, not both")
        spec = load_workload(workload)
        update: dict[str, float | int] = {}
        if num_requests is not None:
            update["num_requests"] = num_requests
        if load.duration_s is not None:
            update["duration_s"] = load.duration_s
        return spec.model_copy(update=update) if update else spec
    if num_requests is None and load.duration_s is None:
        num_requests = default_num_requests
        if notes is not None:
            notes.append(f"no --num-requests/--duration-s: {num_requests} requests")
    return workload_from_flags(
        rate=load.rate,
        num_requests=num_requests,
        duration_s=load.duration_s,
        users=load.users,
        think_time_s=load.think_time_s,
        prompt_tokens=stream.prompt_tokens,
        output_tokens=stream.output_tokens,
        prompt_sigma=stream.prompt_sigma,
        output_sigma=stream.output_sigma,
        arrival=stream.arrival,
        cv=stream.cv,
    )


def build(
    request: SimulateRequest,
    *,
    slo: Slo | None = None,
    model_path: str | None = None,
    default_num_requests: int = 1000,
    limits: WorkLimits | None = None,
    steady_closed_loop: bool = False,
) -> Built:
    """Deployment, plan, engine and workload from the request (shared with capacity); ``slo``
    defaults to the request's own, ``model_path`` is an uploaded model resolved to its file. The
    workload is sized against ``limits`` (default: the CLI's) before anything is built.
    ``steady_closed_loop`` (``simulate``): chat users from flags run to a steady state, their
    length scaled to the users' cycle (:func:`closed_loop_length_s`), and a length given too
    short to score one cycle after the warm-up is refused with the length it needs."""
    from servecap.app.inputs import slo_from_ms
    from servecap.core.capacity import chat_prompt_tokens
    from servecap.core.kv_tier_settings import kv_tiers_of
    from servecap.core.plan import plan as make_plan
    from servecap.sim import engine_setup_from_plan
    from servecap.specs import RequestShape
    from servecap.workload import dist_mean

    r = request
    if slo is None:
        slo = slo_from_ms(r.ttft_slo_ms, r.tpot_slo_ms)
    stream, think_time_s, turns = r.stream(), r.think_time_s, r.turns
    dep, notes = deployment_from_flags(r.flags(model_path))
    eff, eff_note = efficiency_from_file(r.calibration, dep)
    if eff_note:
        notes.append(eff_note)
    eff = with_step_model(eff, r.step_model, r.calibration)
    if eff.step_model == "operations":
        notes.append("step times: the step as operations (docs/simulator.md, 'The step as operations')")
    if r.workload is None and r.users is not None:
        # chat users from flags: the default user model (app/defaults.py), one turn, a request every 30 s
        from servecap.app import defaults

        turns = turns if turns is not None else defaults.TURNS
        from servecap.specs.perf import INTERACTIVE_SLO

        bounded = slo if slo.ttft_s is not None or slo.tpot_s is not None else INTERACTIVE_SLO
        probe = make_plan(
            dep, request=RequestShape(stream.prompt_tokens, stream.output_tokens), slo=bounded, efficiency=eff
        )
        generating = probe.ttft_s + max(0, stream.output_tokens - 1) * probe.tpot_s if probe.batch > 0 else 0.0
        if think_time_s is None:
            think_time_s = round(defaults.think_time_s(generating), 2)
            notes.insert(
                0,
                f"users: one request every {defaults.REQUEST_INTERVAL_S:g} s each (the default user model, "
                f"app/defaults.py): {think_time_s:g} s think time between answers, {turns} turn"
                + ("s" if turns != 1 else ""),
            )
    load = replace(r.load(), think_time_s=think_time_s)
    if steady_closed_loop and r.workload is None and r.users is not None and think_time_s is not None:
        length = closed_loop_length_s(think_time_s, generating)
        if r.duration_s is None and r.num_requests is None:
            load = replace(load, duration_s=length.default_s)
            notes.append(
                f"closed loop: {length.default_s:,.0f} s simulated (a {length.warmup_s:,.0f} s warm-up, then "
                f"{(length.default_s - length.warmup_s) / length.cycle_s:,.0f} user cycles of {length.cycle_s:,.1f} s "
                f"scored, at least capacity's {CAPACITY_DURATION_S:,.0f} s); --duration-s sets another length"
            )
        else:
            check_closed_loop_length(r.users, r.duration_s, r.num_requests, length)
    spec = workload_from_options(
        load, stream, workload=r.workload, default_num_requests=default_num_requests, notes=notes, trace=r.trace
    )
    if turns is not None:
        if spec.users is None:
            raise ServecapError("turns", turns, "turns are a closed-loop setting: give --users")
        from servecap.workload.spec import FixedDist

        spec = spec.model_copy(update={"users": spec.users.model_copy(update={"turns": FixedDist(value=turns)})})
    check_workload(spec, limits if limits is not None else cli_limits())
    if spec.prompt_tokens is not None and spec.output_tokens is not None:
        new_tokens, out_tokens = dist_mean(spec.prompt_tokens), dist_mean(spec.output_tokens)
        turns_mean = dist_mean(spec.users.turns) if spec.users is not None else 1.0
        prompt_mean = chat_prompt_tokens(new_tokens, out_tokens, turns_mean, spec.prefix.tokens if spec.prefix else 0)
        out = max(1, round(out_tokens))
        # the plan describes a typical request; a mean beyond the context is the simulator's to refuse
        prompt = min(max(1, round(prompt_mean)), max(1, dep.engine.max_model_len - out))
        shape = RequestShape(prompt, out)
    else:
        shape = RequestShape()
    the_plan = make_plan(dep, request=shape, slo=slo, efficiency=eff)
    setup = engine_setup_from_plan(
        the_plan,
        enable_prefix_caching=not r.no_prefix_caching,
        waiting_queue_limit=r.max_waiting,
        scheduling_policy=r.policy,
        kv_tiers=kv_tiers_of(r.cpu_kv_gib, r.ssd_kv_gib, r.remote_kv_tib),
        kv_load=r.kv_load,
        kv_store=r.kv_store,
    )
    notes.extend(setup.notes)
    return Built(the_plan, setup, spec, notes, r.calibration)


@dataclass(frozen=True, slots=True)
class ClosedLoopLength:
    """How long a closed loop of chat users must run: its warm-up (one user cycle, at least 30 s:
    :func:`servecap.sim.capacity_search.closed_loop_warmup_s`), one cycle ``think + G``, the
    shortest run that scores a cycle after the warm-up, and the default length."""

    warmup_s: float
    cycle_s: float
    needed_s: float
    default_s: float


STEADY_CYCLES = 10
"""User cycles a closed loop scores after its warm-up by default."""


def closed_loop_length_s(think_time_s: float, generating_s: float) -> ClosedLoopLength:
    """A closed loop's length scaled to its users' cycle ``c = Z + G`` (think time plus the
    planner's time generating an answer): the warm-up ``w = max(30, Z + G)`` (every user's first
    turn comes within one think time, then takes ``G``) is left unscored; a run shorter than
    ``w + c`` scores less than one request per user (what ``simulate --users 832`` did at its old
    default of 1,000 requests: 74 scored requests, all from the warm-up's burst). The default is
    ``w + 10 c``, at least capacity's 600 s, so ``simulate --users N`` scores N users as
    ``capacity`` does. The default user model (a request every 30 s): ``c`` = 30 s, ``w`` = 30 s,
    600 s."""
    from servecap.sim.capacity_search import MIN_WARMUP_S

    cycle = max(1e-3, think_time_s + generating_s)
    warmup = max(MIN_WARMUP_S, think_time_s + generating_s)
    needed = warmup + cycle
    return ClosedLoopLength(warmup, cycle, needed, max(CAPACITY_DURATION_S, warmup + STEADY_CYCLES * cycle))


def check_closed_loop_length(
    users: int, duration_s: float | None, num_requests: int | None, length: ClosedLoopLength
) -> None:
    """Refuse a closed loop given too short to reach a steady state, with the length it needs."""
    need_s = math.ceil(length.needed_s - 0.01)  # the think time is rounded to 10 ms
    why = (
        f"a closed loop of {users:,} users needs at least {need_s:,} s to score one user cycle "
        f"({length.cycle_s:,.1f} s) after its {length.warmup_s:,.0f} s warm-up"
    )
    if duration_s is not None and duration_s < need_s:
        raise ServecapError(
            "duration_s",
            duration_s,
            f"{why}: give --duration-s {need_s} or more "
            f"(or leave it out: {length.default_s:,.0f} s, {STEADY_CYCLES} cycles)",
        )
    if duration_s is None and num_requests is not None:
        need = math.ceil(users * need_s / length.cycle_s - 0.01)
        if num_requests < need:
            raise ServecapError(
                "num_requests",
                num_requests,
                f"{why}, about {need:,} requests: give --num-requests {need} or more, or --duration-s "
                f"(or neither: {length.default_s:,.0f} s)",
            )


def load_text(built: Built, default_users: bool) -> str:
    """The load a run used, for its first line: chat users (think time, turns, closed loop) or an
    open loop's arrivals."""
    from servecap.workload import dist_mean

    w = built.workload
    if w.users is not None:
        think, turns = dist_mean(w.users.think_time_s), dist_mean(w.users.turns)
        model = "one request every 30 s each (app/defaults.py): " if default_users else ""
        return (
            f"{w.users.count:,} users, {model}{think:g} s think time between answers, {turns:g} turn"
            + ("s" if turns != 1 else "")
            + ", closed loop"
        )
    rate = getattr(w.arrival, "rate_per_s", None)
    kind = getattr(w.arrival, "kind", "trace")
    return f"open loop, {kind} arrivals" + (f" at {rate:g} req/s" if rate is not None else "")


def expected_requests(spec: WorkloadSpec) -> int:
    if spec.num_requests is not None:
        return spec.num_requests
    rate = getattr(spec.arrival, "rate_per_s", None)
    if rate is not None and spec.duration_s is not None:
        return int(rate * spec.duration_s)
    return 0


class LoadCheck(BaseModel):
    """Offered load against what the replica serves, read before any percentile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    offered_req_s: float | None  # the arrival rate (open loop); None for closed loops and traces
    service_req_s: float  # the planner's ceiling: output tokens/s at its batch / mean output tokens
    utilization: float | None  # offered / service
    completed_req_s: float  # completions over the run
    queue_growth_s_per_s: float  # slope of queue wait against arrival time (0 when stable)
    overloaded: bool
    message: str | None


def check_load(built: Built, result: SimResult) -> LoadCheck:
    """Overload from the arrival and service rates and from the growth of the queue wait."""
    import numpy as np

    from servecap.workload import dist_mean

    w = built.workload
    out = dist_mean(w.output_tokens) if w.output_tokens is not None else built.plan.request.output_tokens
    service = built.plan.output_tokens_per_s_total / max(1.0, out)
    offered = getattr(w.arrival, "rate_per_s", None) if w.users is None else None
    util = offered / service if offered is not None and service > 0 else None
    c = result.columns
    ok = ~np.isnan(c.queue_time_s) & ~np.isnan(c.arrival_s)
    slope = 0.0
    if ok.sum() >= 10 and np.ptp(c.arrival_s[ok]) > 0:
        slope = float(np.polyfit(c.arrival_s[ok], c.queue_time_s[ok], 1)[0])
    over = slope > QUEUE_GROWTH_LIMIT or (util is not None and util > 1.0)
    message = None
    if over:
        parts = []
        if offered is not None:
            parts.append(
                f"{offered:,.2f} req/s offered vs about {service:,.2f} req/s this replica serves "
                f"(planner, {util:.0%} utilization)"
            )
        parts.append(f"the queue wait grows by {slope:,.2f} s per second of arrivals")
        message = (
            "OVERLOADED: " + "; ".join(parts) + ". The latencies below grow with the run's length; "
            "lower the load, add replicas (`servecap fleet plan`) or find the limit with `servecap capacity`"
        )
    return LoadCheck(
        offered_req_s=offered,
        service_req_s=service,
        utilization=util,
        completed_req_s=result.summary.throughput_req_s,
        queue_growth_s_per_s=slope,
        overloaded=over,
        message=message,
    )


def run_simulation(built: Built, *, seed: int, slo: Slo | None, progress: ProgressFn | None = None) -> SimResult:
    import numpy as np

    from servecap.sim import simulate as sim

    rng = np.random.default_rng(seed)
    if progress is None:
        return sim(built.setup, built.workload, rng, slo=slo)
    total = expected_requests(built.workload) or None

    def tick(event: Progress) -> None:  # the loop knows the drawn count; the spec's is the same or better
        progress(Progress("simulate", event.done, event.total or total, "requests", sim_time_s=event.sim_time_s))

    return sim(built.setup, built.workload, rng, slo=slo, progress=tick)


class SimulateResponse(BaseModel):
    """``servecap simulate --json``: the run summary's keys at the top level, then these."""

    summary: RunSummaryJson
    model: str
    gpu: str
    seed: int
    load_check: LoadCheck
    notes: list[str]
    # "ttft_s.p99" -> the 80% interval of the measured value (validation.interval)
    interval: dict[str, Interval] = {}
    # met or missed, decided on the simulated p99s as capacity decides (app/slo_verdict.py)
    slo_verdict: SloVerdict | None = None

    @model_serializer(mode="wrap")
    def _flatten(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        summary = data.pop("summary")
        assert isinstance(summary, dict)
        return {**summary, **data}


def simulate(
    built: Built, *, seed: int, slo: Slo | None, progress: ProgressFn | None = None
) -> tuple[SimulateResponse, SimResult]:
    """Run ``built`` and check its load; returns the response and the raw result (for reports)."""
    result = run_simulation(built, seed=seed, slo=slo, progress=progress)
    result, warmup_note = scored_as_capacity(built, result)
    intervals = summary_intervals(built, result)
    response = SimulateResponse(
        summary=RunSummaryJson.of(result.summary),
        model=built.plan.deployment.model.id,
        gpu=built.plan.deployment.gpu.id,
        seed=seed,
        load_check=check_load(built, result),
        notes=[*built.notes, *warmup_note],
        interval=intervals,
        slo_verdict=slo_verdict(result.summary, intervals, slo),
    )
    return response, result


def scored_as_capacity(built: Built, result: SimResult) -> tuple[SimResult, list[str]]:
    """The run with the summary ``capacity`` scores the same load by
    (:func:`servecap.sim.capacity_search.scored_run`: a closed loop after its warm-up, when every
    user's first turn arrives at once), and the note saying so (none for an open loop)."""
    from servecap.sim.capacity_search import scored_run

    summary, warmup_s = scored_run(built.plan, built.workload, result)
    if summary is result.summary:
        return result, []
    note = (
        f"closed loop: latencies and throughput over the {summary.num_requests:,} requests arriving after "
        f"the first {warmup_s:,.0f} s (the warm-up, when every user's first turn comes at once), as capacity scores"
    )
    return replace(result, summary=summary), [note]


def summary_intervals(built: Built, result: SimResult) -> dict[str, Interval]:
    """80% intervals of the simulated percentiles (TTFT, TPOT, E2E: p50, p90, p99, mean), from the
    corpus residuals of the deployment's engine and GPU family. Throughput gets none: in an open
    loop below saturation it is the offered load, not a prediction."""
    from servecap.app.answer_interval import answer_intervals

    s = result.summary
    values: dict[str, tuple[float, str]] = {}
    for name, metric, pct in (("ttft_s", "ttft", s.ttft_s), ("tpot_s", "tpot", s.tpot_s), ("e2e_s", "e2e", s.e2e_s)):
        for stat, v in (("p50", pct.p50), ("p90", pct.p90), ("p99", pct.p99), ("mean", pct.mean)):
            if v is not None and math.isfinite(v):
                values[f"{name}.{stat}"] = (v, metric)
    dep = built.plan.deployment
    found, _ = answer_intervals(
        values,
        engine=dep.engine.engine,
        gpu_family=dep.gpu.family,
        calibration=built.calibration,
        step_s=built.plan.decode_step_time_s,
    )
    return found


def simulate_request(
    request: SimulateRequest,
    *,
    model_path: str | None = None,
    progress: ProgressFn | None = None,
    limits: WorkLimits | None = None,
) -> tuple[SimulateResponse, Built, SimResult]:
    """``servecap simulate`` (and ``POST /api/v1/simulate``): build the run the request names
    and simulate it; goodput is scored only against SLOs the request gives. Returns the
    response, the built run and the raw result (for reports and the run store)."""
    from servecap.app.inputs import slo_from_ms

    slo = slo_from_ms(request.ttft_slo_ms, request.tpot_slo_ms)
    built = build(request, slo=slo, model_path=model_path, limits=limits, steady_closed_loop=True)
    response, result = simulate(built, seed=request.seed, slo=slo if request.has_slo() else None, progress=progress)
    return response, built, result
