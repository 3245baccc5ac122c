"""The capacity use case: the largest load one replica serves within p99 SLOs, by simulation,
beside the closed-form figures and the assumptions that separate them.

``plan`` and ``capacity`` answer "how many users" under different assumptions, and the gap can be
large (Llama-3.1-8B on an H100, TPOT 50 ms, TTFT 1 s: ``plan`` 895 users, ``capacity`` 229).
The response states the assumptions side by side (SLO statistic, prompt length with chat
history, think time or duty cycle, queueing) and one line on why the numbers differ; ``plan
--think-time-s Z --turns T`` gives the closed form under capacity's assumptions.
:func:`capacity_from_request` takes a :class:`~servecap.app.simulate_request.CapacityRequest`
(the CLI's flags and the HTTP body alike); ``CapacityResponse.model_dump_json()`` is ``servecap
capacity --json``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from servecap.app.flags import StreamFlags
from servecap.app.limits import WorkLimits, check_workload, cli_limits
from servecap.app.simulate import Built
from servecap.app.simulate_request import CAPACITY_DURATION_S, CapacityRequest
from servecap.errors import ServecapError
from servecap.progress import ProgressFn
from servecap.sim.capacity_search import LoadPoint
from servecap.specs.perf import CostInputs, RequestShape, Slo
from servecap.validation.interval import Interval

if TYPE_CHECKING:
    from pathlib import Path

    from servecap.core.plan import Plan
    from servecap.sim.capacity_search import CapacityResult


class Assumption(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    plan: str | None  # `servecap plan` with the same flags (None: no flags to compare, e.g. a workload file)
    closed_form: str  # capacity's closed-form figure: this workload's shape, no queueing
    simulated: str


class CapacitySlo(BaseModel):
    """The SLOs the search checked, at the ``percentile`` (99)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_s: float | None
    tpot_s: float | None
    percentile: int


@dataclass(frozen=True, slots=True)
class Figures:
    """The three answers to "how many" and what separates them, for :func:`_why`."""

    closed: bool
    turns: float  # mean turns per chat (1: single requests)
    prompt: int  # the mean prompt the closed form and the simulation use (history included)
    think: float | None  # seconds between answers (closed loop)
    plan_load: float | None  # `servecap plan` for the same flags (None: a workload file)
    closed_form: float
    simulated: float


class CapacityResponse(BaseModel):
    closed_loop: bool
    unit: str
    max_load: float
    # the search's bracket: the largest load that met the SLOs and the smallest that missed them
    # (the break point lies between; None when no searched load missed)
    max_load_bracket: tuple[float, float | None]
    planner_load: float
    plan_load: float | None  # `servecap plan` with its defaults (single requests, a request every 30 s per user)
    slo: CapacitySlo
    assumptions: list[Assumption]
    why: str
    target: float | None
    replicas_for_target: int | None
    table: list[LoadPoint]
    evaluations: int
    model: str
    gpu: str
    seed: int
    notes: list[str]
    # the load model the answer used, in words (its first line): closed or open loop, the warm-up
    # left unscored and, for users, the interval between requests they actually kept at the answer
    load_model: str = ""
    # the 80% interval of the measured capacity behind max_load (validation.interval), or None
    interval: Interval | None = None

    @model_serializer(mode="wrap")
    def _named(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """``max_users``/``planner_users`` for a closed loop, ``max_rate_req_s``/``planner_rate_req_s``
        for an open one (the keys the JSON has always had)."""
        data: dict[str, object] = handler(self)
        suffix = "users" if self.closed_loop else "rate_req_s"
        data[f"max_{suffix}"] = data.pop("max_load")
        data[f"planner_{suffix}"] = data.pop("planner_load")
        data[f"plan_{suffix}"] = data.pop("plan_load")
        return data


def _plan_load(built: Built, stream: StreamFlags, slo: Slo, closed: bool, think: float | None) -> float:
    """What `servecap plan` says for the same flags: one request shape, no history, and the same
    user model (``think`` seconds between answers; None: a request every 30 s, app/defaults.py)."""
    from servecap.app import defaults
    from servecap.core.plan import plan

    shape = RequestShape(stream.prompt_tokens, stream.output_tokens)
    p = plan(built.plan.deployment, request=shape, slo=slo, efficiency=built.plan.efficiency, costs=CostInputs())
    if closed and p.batch > 0:
        generating = p.ttft_s + max(0, shape.output_tokens - 1) * p.tpot_s
        duty = (
            defaults.duty_cycle(generating)
            if think is None
            else min(1.0, generating / (generating + think))
            if generating + think > 0
            else 1.0
        )
        p = plan(
            built.plan.deployment,
            request=shape,
            slo=slo,
            efficiency=built.plan.efficiency,
            costs=CostInputs(duty_cycle=max(duty, 1e-9)),
        )
    return float(p.users_served) if closed else p.output_tokens_per_s_total / max(1, stream.output_tokens)


def capacity(
    built: Built,
    slo: Slo,
    *,
    seed: int,
    stream: StreamFlags | None = None,
    target: float | None = None,
    progress: ProgressFn | None = None,
    limits: WorkLimits | None = None,
    calibration: Path | None = None,
) -> CapacityResponse:
    """Search the largest load within ``slo`` (p99); ``stream`` (the flags' request shape) adds
    what ``plan`` would say for it; ``target`` (users or req/s) gets the replicas it needs. The
    search's probes reach about twice the planner's load: that run is sized against ``limits``
    before the first probe."""
    from servecap.sim.capacity_search import find_capacity, planner_rate, planner_users, with_load
    from servecap.workload import dist_mean

    closed_loop = built.workload.users is not None
    estimate = (planner_users if closed_loop else planner_rate)(built.plan, built.workload)
    probe = with_load(built.workload, 2.0 * max(estimate, 1.0))
    try:
        check_workload(probe, limits if limits is not None else cli_limits(), where="")
    except ServecapError as err:
        reach = f"{estimate:,.0f} users" if closed_loop else f"{estimate:,.1f} req/s"
        why = (
            f"the search's probes reach about twice the planner's {reach}: {err.problem}; or give a shorter duration_s"
        )
        raise ServecapError(err.field, err.value, why) from None
    result = find_capacity(built.setup, built.plan, built.workload, slo, seed=seed, progress=progress)
    w = built.workload
    closed = w.users is not None
    unit = "users" if closed else "req/s"
    think = dist_mean(w.users.think_time_s) if w.users is not None else None
    plan_load = _plan_load(built, stream, slo, closed, think) if stream is not None else None
    turns = dist_mean(w.users.turns) if w.users is not None else 1.0
    prompt = built.plan.request.prompt_tokens
    generating = built.plan.ttft_s + max(0, built.plan.request.output_tokens - 1) * built.plan.tpot_s
    duty = generating / (generating + think) if think is not None and generating > 0 else None

    def fmt(x: float) -> str:
        # whole users, counted down as plan counts them (int()), so the two figures agree exactly
        return f"{int(x):,}" if closed else f"{x:,.2f}"

    slo_text = ", ".join(
        part
        for part in (
            f"TTFT <= {slo.ttft_s * 1e3:,.0f} ms" if slo.ttft_s is not None else "",
            f"TPOT <= {slo.tpot_s * 1e3:,.0f} ms" if slo.tpot_s is not None else "",
        )
        if part
    )
    rows = [
        Assumption(
            name="SLOs checked against",
            plan=f"steady-state means ({slo_text})",
            closed_form=f"steady-state means ({slo_text})",
            simulated=(
                f"p99 after the first {result.warmup_s:g} s ({slo_text})"
                if result.warmup_s > 0
                else f"p99 over the run ({slo_text})"
            ),
        ),
        Assumption(
            name="mean prompt (tokens)",
            plan=f"{stream.prompt_tokens:,} (one request)" if stream else None,
            closed_form=f"{prompt:,}" + (f" ({turns:g}-turn chats resend history)" if turns > 1 else ""),
            simulated=f"{prompt:,} on average" + (f", growing over {turns:g} turns" if turns > 1 else ""),
        ),
        Assumption(
            name="between answers" if closed else "arrivals",
            plan=(f"think time {think:g} s" if think is not None else "open loop") if stream else None,
            closed_form=(
                f"think time {think:g} s (duty cycle {duty:.0%})"
                if duty is not None
                else "open loop at the planner's service rate"
            ),
            simulated=(
                f"think time {think:g} s, exponential"
                if think is not None
                else f"{getattr(w.arrival, 'kind', 'trace')} arrivals"
            ),
        ),
        Assumption(name="queueing", plan="none" if stream else None, closed_form="none", simulated="simulated"),
        Assumption(
            name=f"{unit} per replica",
            plan=fmt(plan_load) if plan_load is not None else None,
            closed_form=fmt(result.planner_load),
            simulated=fmt(result.max_load),
        ),
    ]
    why = _why(Figures(closed, turns, prompt, think, plan_load, result.planner_load, result.max_load), stream, fmt)
    replicas = None
    if target is not None and target > 0:
        replicas = math.ceil(target / result.max_load) if result.max_load > 0 else None
    dep = built.plan.deployment
    load_model = _load_model(result, think, turns)
    return CapacityResponse(
        closed_loop=closed,
        unit=unit,
        max_load=result.max_load,
        max_load_bracket=(result.max_load, result.min_failing_load),
        planner_load=result.planner_load,
        plan_load=plan_load,
        slo=CapacitySlo(ttft_s=slo.ttft_s, tpot_s=slo.tpot_s, percentile=99),
        assumptions=rows,
        why=why,
        target=target,
        replicas_for_target=replicas,
        table=list(result.table),
        evaluations=result.evaluations,
        model=dep.model.id,
        gpu=dep.gpu.id,
        seed=seed,
        notes=built.notes,
        load_model=load_model,
        interval=_load_interval(result.max_load, dep.engine.engine, dep.gpu.family, calibration, built.plan),
    )


def _load_model(result: CapacityResult, think: float | None, turns: float) -> str:
    """The answer's load model in words: a closed loop of users keeps one request in flight or in
    thought each, so its rate is ``users / (think + E2E)`` at the answer's own E2E (below the
    planner's ``G`` at a light load), not ``users / 30 s``: the line gives that rate, so it can be
    set beside the fleet planner's open loop (``users / 30 s`` Poisson arrivals)."""
    if not result.closed_loop:
        return "open loop: Poisson arrivals at the rate searched, scored from the start"
    at = next((p for p in result.table if p.load == result.max_load), None)
    rate = f"{at.throughput_req_s:,.2f} req/s" if at is not None and at.throughput_req_s > 0 else None
    every = result.max_load / at.throughput_req_s if at is not None and at.throughput_req_s > 0 else None
    line = (
        f"closed loop: each user thinks {think:g} s (exponential) after an answer, then sends the next"
        + (f" ({turns:g}-turn chats)" if turns > 1 else "")
        + f"; p99s scored after the first {result.warmup_s:g} s"
    )
    if rate is not None and every is not None:
        line += (
            f"; at {int(result.max_load):,} users they sent {rate}, one request every {every:.1f} s each "
            "(think time + the answer's own time)"
        )
    return line


def _load_interval(
    max_load: float, engine: str, gpu_family: str, calibration: Path | None, plan: Plan
) -> Interval | None:
    """The 80% interval of the capacity found: from the corpus's throughput residuals, or from
    a calibration file's fit (:mod:`servecap.app.answer_interval`)."""
    from servecap.app.answer_interval import answer_intervals

    found, _ = answer_intervals(
        {"load": (max_load, "throughput")},
        engine=engine,
        gpu_family=gpu_family,
        calibration=calibration,
        step_s=plan.decode_step_time_s,
    )
    return found.get("load")


def _why(f: Figures, stream: StreamFlags | None, fmt: Callable[[float], str]) -> str:
    """One line: why plan, the closed form and the simulation give different numbers."""
    turns, prompt, think, plan_load = f.turns, f.prompt, f.think, f.plan_load
    closed_form, simulated = f.closed_form, f.simulated
    causes = []
    if stream is not None and plan_load is not None and turns > 1:
        causes.append(
            f"capacity's {turns:g}-turn chats resend their history (mean prompt {prompt:,} vs "
            f"plan's {stream.prompt_tokens:,} tokens)"
        )
    if simulated > closed_form and turns > 1:
        causes.append(
            "the simulation serves more than the closed form: the resent history hits the prefix cache, "
            "so most of each prompt is not prefilled again (the closed form prefills it all)"
        )
    elif simulated > closed_form:
        causes.append("the simulation serves more than the closed form: its TPOT is below the closed form's")
    causes.append("plan's SLOs are steady-state means, capacity's are p99s with queueing")
    line = (
        f"why the numbers differ ({'plan ' + fmt(plan_load) + ', ' if plan_load is not None else ''}"
        f"closed form {fmt(closed_form)}, simulated {fmt(simulated)}): " + "; ".join(causes)
    )
    if f.closed and stream is not None and think is not None:
        line += (
            f". `servecap plan ... --think-time-s {think:g} --turns {turns:g}` gives the closed form "
            "under these assumptions"
        )
    return line


def capacity_from_request(
    request: CapacityRequest,
    *,
    model_path: str | None = None,
    progress: ProgressFn | None = None,
    limits: WorkLimits | None = None,
) -> tuple[CapacityResponse, Built, Slo]:
    """``servecap capacity`` (and ``POST /api/v1/capacity``): the default interactive SLO when
    none is given (checked at p99), a 600 s run of chat users unless told otherwise
    (``model_path``: an uploaded model resolved to its file); returns the response, the built run
    and the SLO used."""
    from servecap.app import defaults
    from servecap.app.flags import deployment_from_flags, efficiency_from_file, with_step_model
    from servecap.app.inputs import slo_from_ms
    from servecap.app.simulate import build
    from servecap.core.plan import plan
    from servecap.specs.perf import INTERACTIVE_SLO

    r = request
    workload, closed, stream = r.workload, r.closed_loop, r.stream()
    ttft_slo_ms, tpot_slo_ms, think_time_s = r.ttft_slo_ms, r.tpot_slo_ms, r.think_time_s
    duration_s, turns = r.duration_s, r.turns
    if ttft_slo_ms is None and tpot_slo_ms is None:
        assert INTERACTIVE_SLO.ttft_s is not None and INTERACTIVE_SLO.tpot_s is not None
        ttft_slo_ms, tpot_slo_ms = INTERACTIVE_SLO.ttft_s * 1e3, INTERACTIVE_SLO.tpot_s * 1e3
    slo = slo_from_ms(ttft_slo_ms, tpot_slo_ms)
    if workload is None and closed and r.num_requests is not None:
        # a fixed request count ends a run of many users before they load the server, and every
        # larger count would then "meet" the SLOs: chat users run for a duration instead
        raise ServecapError(
            "num_requests",
            r.num_requests,
            "capacity with chat users runs for --duration-s (default 600 s), not a request count; "
            "use --duration-s, or --rate for an open loop",
        )
    if workload is None and closed and duration_s is None:
        duration_s = CAPACITY_DURATION_S
    if workload is None and closed:
        turns = turns if turns is not None else defaults.TURNS
    default_think = workload is None and closed and think_time_s is None
    if default_think:
        # the default user model: a request every 30 s, the answer included (app/defaults.py)
        dep = deployment_from_flags(r.flags(model_path))[0]
        probe = plan(
            dep,
            request=RequestShape(stream.prompt_tokens, stream.output_tokens),
            slo=slo,
            efficiency=with_step_model(efficiency_from_file(r.calibration, dep)[0], r.step_model, r.calibration),
        )
        generating = probe.ttft_s + max(0, stream.output_tokens - 1) * probe.tpot_s if probe.batch > 0 else 0.0
        think_time_s = round(defaults.think_time_s(generating), 2)
    run = r.model_copy(
        update={
            "rate": None if workload is not None or closed else 1.0,
            "users": None if workload is not None or not closed else 1,
            "think_time_s": think_time_s,
            "duration_s": duration_s,
            "turns": turns,
            "max_waiting": None,
        }
    )
    built = build(run, slo=slo, model_path=model_path, default_num_requests=2000, limits=limits)
    response = capacity(
        built,
        slo,
        seed=r.seed,
        stream=stream if workload is None else None,
        target=r.target,
        progress=progress,
        limits=limits,
        calibration=r.calibration,
    )
    if default_think:
        response.notes.insert(
            0,
            f"users: one request every {defaults.REQUEST_INTERVAL_S:g} s each (the default user model, "
            f"app/defaults.py): {think_time_s:g} s think time between answers, one turn",
        )
    return response, built, slo
