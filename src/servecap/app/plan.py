"""The plan use case: one deployment's closed-form capacity, speed and cost, with levers.

:func:`plan` takes a :class:`PlanRequest` (the settings as a person names them) and returns a
:class:`PlanResponse`, whose :meth:`~PlanResponse.to_json` is ``servecap plan --json``.
Request and response are frozen dataclasses, not pydantic models: ``servecap plan`` is the
command people run in a loop and stays free of pydantic's import (about 0.1 s on a start-up of
0.2 s; tests/cli/test_lazy_cli.py keeps it so).

Assumptions are the ones ``capacity`` states (docs/formulas.md, "One story"):

- with no SLO, the default interactive SLO (:data:`servecap.specs.perf.INTERACTIVE_SLO`), checked
  against the steady-state *means* of the roofline model (``capacity`` checks simulated p99s);
- ``--turns T`` makes the request a turn of a T-turn chat that resends its history (the mean
  prompt of :func:`servecap.core.capacity.chat_prompt_tokens`), as ``capacity`` and ``simulate``
  do with closed-loop users;
- ``--think-time-s Z`` replaces the duty cycle by Little's law
  (:func:`servecap.core.capacity.closed_loop_users`), as ``capacity``'s closed-form figure does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from servecap.app.defaults import OUTPUT_TOKENS, PROMPT_TOKENS, TURNS
from servecap.app.flags import DeploymentFlags, deployment_from_flags, doc, efficiency_from_file, with_step_model
from servecap.errors import ServecapError
from servecap.files import dumps_json
from servecap.json_object import JsonObject
from servecap.specs.engines import engine_profile
from servecap.validation.interval import Interval, model_class_of

if TYPE_CHECKING:
    from servecap.core.levers import Lever
    from servecap.core.ops.operation import StepExplanation
    from servecap.core.plan import Plan

DEFAULT_DUTY_CYCLE = 0.2  # the duty cycle of a plan without a deployment to derive it from (core's CostInputs)
FLEET_POINTER = (
    "a closed-form count: for the simulated answer (queueing, p99 latency, a router across "
    "replicas) see `servecap fleet plan`"
)


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """``servecap plan``'s settings: each field's default and help, written once (the CLI's
    options and the HTTP body, ``api/bodies.PlanBody``, read them here)."""

    deployment: DeploymentFlags = field(default_factory=DeploymentFlags)
    prompt_tokens: int = field(default=PROMPT_TOKENS, metadata=doc("Typical prompt length (new tokens)."))
    output_tokens: int = field(default=OUTPUT_TOKENS, metadata=doc("Typical output length."))
    turns: int = field(default=TURNS, metadata=doc("Turns per chat; each turn resends the history."))
    duty_cycle: float | None = field(  # None: derived from think_time_s, else from request_interval_s
        default=None, metadata=doc("Share of a user's session spent generating [default: from --request-interval-s].")
    )
    think_time_s: float | None = field(
        default=None,
        metadata=doc(
            "Mean think time between a user's turns in seconds (closed loop; default: 30 s per request minus "
            "the answer)."
        ),
    )
    request_interval_s: float | None = field(  # None: app.defaults.REQUEST_INTERVAL_S (a request every 30 s)
        default=None,
        metadata=doc("Mean seconds between a user's requests, the answer included (default 30, as fleet plan)."),
    )
    ttft_slo_ms: float | None = field(
        default=None,
        metadata=doc("TTFT SLO in ms (steady-state mean; default: the interactive SLO, 2000 ms / 100 ms)."),
    )
    tpot_slo_ms: float | None = field(
        default=None,
        metadata=doc("TPOT SLO in ms (steady-state mean; default: the interactive SLO, 2000 ms / 100 ms)."),
    )
    # plan without any SLO (the largest batch memory and max_num_seqs allow)
    no_slo: bool = field(default=False, metadata=doc("Plan without an SLO (users at any speed)."))
    price_per_hour: float | None = field(default=None, metadata=doc("USD per GPU-hour (default: catalog)."))
    purchase_price: float | None = field(default=None, metadata=doc("USD per GPU (default: catalog)."))
    peak_users: int | None = field(default=None, metadata=doc("Size replicas for this many users."))
    peak_tok_s: float | None = field(default=None, metadata=doc("Size replicas for this many output tokens/s."))
    calibration: Path | None = field(default=None, metadata=doc("Calibration file from `servecap calibrate`."))
    step_model: str = field(
        default="auto",
        metadata=doc(
            "Step times: auto (the model the corpus's training rows favour for this model class, GPU vendor "
            "and engine; docs/validation.md), roofline (one max(memory, compute) per step) or operations (the "
            "sum of the step's operations, measured kernel tables where they cover them)."
        ),
    )
    explain_step: bool = field(
        default=False, metadata=doc("Print one decode step's operations, each with its time and source.")
    )
    explain_batch: int | None = field(
        default=None, metadata=doc("The batch of the explained decode step [default: the plan's batch].")
    )


STEP_MODELS = ("auto", "roofline", "operations")


@dataclass(frozen=True, slots=True)
class SloUsed:
    ttft_s: float | None
    tpot_s: float | None
    statistic: str  # "mean": plan checks the roofline's steady-state means, not percentiles
    source: str  # "flags" | "default" | "none"


@dataclass(frozen=True, slots=True)
class PlanResponse:
    plan: Plan
    levers: list[Lever]
    slo: SloUsed
    notes: list[str]
    turns: int = 1
    think_time_s: float | None = None
    peak_users: int | None = None
    replicas: int | None = None
    request_interval_s: float | None = None  # the user model when neither duty cycle nor think time is given
    peak_tok_s: float | None = None
    replicas_for_tok_s: int | None = None
    # 80% intervals of the measured value behind users_served and tpot_s (validation.interval)
    intervals: dict[str, Interval] = field(default_factory=dict)
    step: StepExplanation | None = None  # --explain-step: one decode step's operations

    @property
    def busy_fraction(self) -> float:
        """The share of the batch ``users_served`` keep busy on average
        (:func:`servecap.core.capacity.busy_users`: below one, so the 99th percentile of requests
        in flight fits the batch; simulation confirms the SLO means hold there)."""
        from servecap.core.capacity import busy_fraction

        return busy_fraction(self.plan.batch, self.plan.costs_in.duty_cycle)

    def to_dict(self) -> JsonObject:
        """The ``--json`` object: docs/json-schema.md documents every key."""
        from servecap.core.plan_dict import plan_to_dict

        data: JsonObject = plan_to_dict(self.plan)
        data["busy_fraction"] = self.busy_fraction
        data["slo"] = _flat_dict(self.slo)
        data["turns"] = self.turns
        data["think_time_s"] = self.think_time_s
        data["request_interval_s"] = self.request_interval_s
        data["notes"] = self.notes
        data["levers"] = [_flat_dict(lever) for lever in self.levers]
        if self.peak_users is not None:
            data["peak_users"] = self.peak_users
            data["replicas"] = self.replicas
        if self.peak_tok_s is not None:
            data["peak_tok_s"] = self.peak_tok_s
            data["replicas_for_tok_s"] = self.replicas_for_tok_s
        data["interval"] = {k: iv.to_dict() for k, iv in self.intervals.items()}
        if self.step is not None:
            data["explain_step"] = explanation_dict(self.step)
        return data

    def to_json(self) -> str:
        return dumps_json(self.to_dict())


def fleet_plan_command(r: PlanRequest, model_id: str, request_interval_s: float | None) -> str:
    """The ``servecap fleet plan`` command for the same deployment, request shape, SLOs and users
    as ``r`` (every flag ``plan`` was given that ``fleet plan`` takes), ready to run as printed."""
    import shlex

    d = r.deployment
    args = ["servecap", "fleet", "plan", "-m", model_id, "-g", d.gpu or ""]
    tp = d.tp if d.tp is not None else (d.num_gpus // max(1, d.pp) if d.num_gpus is not None else None)
    for flag, value in (
        ("--tp", tp if tp is not None and tp > 1 else None),
        ("-w", d.weights_dtype),
        ("-k", d.kv_cache_dtype if d.kv_cache_dtype != "auto" else None),
        ("-l", d.max_model_len),
        ("--peak-users", r.peak_users),
        ("--ttft-slo-ms", f"{r.ttft_slo_ms:g}" if r.ttft_slo_ms is not None else None),
        ("--tpot-slo-ms", f"{r.tpot_slo_ms:g}" if r.tpot_slo_ms is not None else None),
        ("--request-interval-s", f"{request_interval_s:.3g}" if request_interval_s else None),
    ):
        if value is not None:
            args += [flag, str(value)]
    return shlex.join(args)


def _flat_dict(obj: SloUsed | Lever) -> JsonObject:
    """``dataclasses.asdict`` for a dataclass of plain values (no nested dataclasses or
    containers to copy): the same dict without asdict's recursive deep copy (a tenth of the cost)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def slo_used(ttft_ms: float | None, tpot_ms: float | None, *, no_slo: bool = False) -> SloUsed:
    """The SLO the flags give, or the default interactive SLO when they give none."""
    from servecap.app.inputs import slo_from_ms
    from servecap.specs.perf import INTERACTIVE_SLO

    if no_slo:
        if ttft_ms is not None or tpot_ms is not None:
            raise ServecapError("no_slo", True, "give --no-slo or --ttft-slo-ms/--tpot-slo-ms, not both")
        return SloUsed(None, None, "mean", "none")
    if ttft_ms is None and tpot_ms is None:
        return SloUsed(INTERACTIVE_SLO.ttft_s, INTERACTIVE_SLO.tpot_s, "mean", "default")
    slo = slo_from_ms(ttft_ms, tpot_ms)
    return SloUsed(slo.ttft_s, slo.tpot_s, "mean", "flags")


def slo_line(slo: SloUsed) -> str:
    """One line stating the SLO, its statistic and where it came from."""
    if slo.source == "none":
        return "SLO: none (--no-slo): the batch is as large as memory and max_num_seqs allow"
    parts = []
    if slo.ttft_s is not None:
        parts.append(f"TTFT <= {slo.ttft_s * 1e3:,.0f} ms")
    if slo.tpot_s is not None:
        parts.append(f"TPOT <= {slo.tpot_s * 1e3:,.0f} ms")
    text = "SLO (steady-state mean, no queueing; capacity checks p99): " + ", ".join(parts)
    if slo.source == "default":
        text += " — the default interactive SLO (docs/formulas.md); set --ttft-slo-ms/--tpot-slo-ms or --no-slo"
    return text


def plan(request: PlanRequest) -> PlanResponse:
    """Plan one deployment; raises ServecapError (one line) on bad input or an infeasible one."""
    from servecap.app.inputs import cost_inputs, request_shape
    from servecap.core.capacity import chat_prompt_tokens
    from servecap.core.cost import replicas_needed
    from servecap.core.levers import levers
    from servecap.core.plan import plan as make_plan
    from servecap.specs.perf import Slo

    r = request
    dep, notes = deployment_from_flags(r.deployment)
    eff, eff_note = efficiency_from_file(r.calibration, dep)
    if eff_note:
        notes.append(eff_note)
    if r.step_model not in STEP_MODELS:
        raise ServecapError("step_model", r.step_model, "must be one of " + ", ".join(STEP_MODELS))
    if r.explain_batch is not None and not 1 <= r.explain_batch <= 1_000_000:
        raise ServecapError("explain_batch", r.explain_batch, "must be between 1 and 1,000,000 sequences")
    eff = with_step_model(eff, r.step_model, r.calibration)
    if not 1 <= r.turns <= 1000:
        raise ServecapError("turns", r.turns, "must be between 1 and 1000")
    if r.think_time_s is not None and not 0 <= r.think_time_s <= 86_400:
        raise ServecapError("think_time_s", r.think_time_s, "must be between 0 and 86,400 seconds")
    given = [n for n, v in (("duty_cycle", r.duty_cycle), ("think_time_s", r.think_time_s)) if v is not None]
    if r.request_interval_s is not None:
        given.append("request_interval_s")
        if not 0 < r.request_interval_s <= 86_400:
            raise ServecapError("request_interval_s", r.request_interval_s, "must be between 0 and 86,400 seconds")
    if len(given) > 1:
        raise ServecapError(
            given[0],
            getattr(r, given[0]),
            "give one of --duty-cycle, --think-time-s and --request-interval-s (they say the same thing)",
        )
    shape = request_shape(r.prompt_tokens, r.output_tokens)
    if r.turns > 1:
        prompt = round(chat_prompt_tokens(r.prompt_tokens, r.output_tokens, r.turns))
        shape = request_shape(prompt, r.output_tokens)
        notes.append(
            f"{r.turns}-turn chats resend their history: mean prompt {prompt:,} tokens "
            f"({r.prompt_tokens:,} new + (turns - 1) / 2 x {r.prompt_tokens + r.output_tokens:,})"
        )
    elif r.prompt_tokens == 1024 and r.output_tokens == 128:
        notes.append(
            "request shape 1,024 prompt + 128 output tokens: the default of plan, capacity, fleet plan and "
            "bench (vLLM's benchmark random-dataset default)"
        )
    slo = slo_used(r.ttft_slo_ms, r.tpot_slo_ms, no_slo=r.no_slo)
    duty = r.duty_cycle if r.duty_cycle is not None else DEFAULT_DUTY_CYCLE
    costs = cost_inputs(r.price_per_hour, r.purchase_price, duty)
    spec_slo = Slo(slo.ttft_s, slo.tpot_s)
    p = make_plan(dep, request=shape, slo=spec_slo, efficiency=eff, costs=costs)
    interval = None
    if r.duty_cycle is None and r.think_time_s is None and p.batch > 0:
        from servecap.app import defaults

        interval = r.request_interval_s if r.request_interval_s is not None else defaults.REQUEST_INTERVAL_S
        generating = p.ttft_s + max(0, shape.output_tokens - 1) * p.tpot_s
        duty = defaults.duty_cycle(generating, interval)
        costs = cost_inputs(r.price_per_hour, r.purchase_price, duty)
        p = make_plan(dep, request=shape, slo=spec_slo, efficiency=eff, costs=costs)
        notes.append(
            f"users: one request every {interval:g} s each (the default user model, app/defaults.py): a user "
            f"generates {generating:.1f} s of it, a duty cycle of {duty:.1%} (Little's law)"
        )
    if r.think_time_s is not None and p.batch > 0:
        generating = p.ttft_s + max(0, shape.output_tokens - 1) * p.tpot_s
        duty = min(1.0, generating / (generating + r.think_time_s))
        costs = cost_inputs(r.price_per_hour, r.purchase_price, duty)
        p = make_plan(dep, request=shape, slo=spec_slo, efficiency=eff, costs=costs)
        notes.append(
            f"think time {r.think_time_s:g} s between answers: a user generates {generating:.1f} s "
            f"per turn, a duty cycle of {duty:.1%} (Little's law)"
        )
    replicas = replicas_tok_s = None
    if r.peak_users is not None:
        if r.peak_users < 0:
            raise ServecapError("peak_users", r.peak_users, "must be >= 0")
        replicas = replicas_needed(r.peak_users, p.users_served) if p.users_served else None
        if interval is None and p.batch > 0 and duty > 0:
            interval = (p.ttft_s + max(0, shape.output_tokens - 1) * p.tpot_s) / duty
        notes.append(
            f"replicas for {r.peak_users:,} users: {FLEET_POINTER} "
            f"(`{fleet_plan_command(r, dep.model.id, interval)}`; "
            "it counts users at one request per --request-interval-s: the plan's duty cycle as an interval)"
        )
    if r.peak_tok_s is not None:
        if not 0 <= r.peak_tok_s < 1e12:
            raise ServecapError("peak_tok_s", r.peak_tok_s, "must be a non-negative rate")
        total = p.output_tokens_per_s_total
        replicas_tok_s = replicas_needed(r.peak_tok_s, total) if total > 0 else None
    step = None
    fallback = 0.0
    chosen = p.efficiency.step_model  # "auto" resolved by the plan (specs.step_choice)
    step_note = None
    if eff.step_model == "auto":
        from servecap.core.plan import auto_step_model

        step_note = auto_step_model(dep, p.params.total).reason
        notes.append(f"step times: {step_note} (docs/validation.md, 'The default step model')")
    if r.explain_step or chosen == "operations":
        from servecap.core.ops import explain_decode_step

        step = explain_decode_step(
            dep,
            p.step,
            p.efficiency,
            batch=r.explain_batch or max(1, p.batch),
            context_tokens=shape.mean_held_tokens,
            choice=step_note,
        )
        fallback = step.fallback_share if chosen == "operations" else 0.0
    from servecap.app.answer_interval import answer_intervals

    intervals, iv_note = answer_intervals(
        {"users_served": (float(p.users_served), "throughput"), "tpot_s": (p.tpot_s, "tpot")},
        engine=dep.engine.engine,
        gpu_family=dep.gpu.family,
        calibration=r.calibration,
        step_s=p.decode_step_time_s,
        fallback_share=fallback,
        model_class=model_class_of(dep.model.moe is not None, p.params.total),
        engine_version=engine_profile(dep.engine.engine).version,
        step_note=step_note,
    )
    if iv_note:
        notes.append(iv_note)
    return PlanResponse(
        plan=p,
        levers=levers(p),
        slo=slo,
        notes=notes,
        turns=r.turns,
        think_time_s=r.think_time_s,
        peak_users=r.peak_users,
        replicas=replicas,
        request_interval_s=interval,
        peak_tok_s=r.peak_tok_s,
        replicas_for_tok_s=replicas_tok_s,
        intervals=intervals,
        step=step if r.explain_step else None,
    )


def explanation_dict(step: StepExplanation) -> JsonObject:
    """``--explain-step``'s JSON: the step and each operation's time (seconds) and source."""
    return {
        "step_model": step.step_model,
        "step_model_choice": step.choice,
        "batch": step.batch,
        "context_tokens": step.context_tokens,
        "total_s": step.total_s,
        "fallback_share": step.fallback_share,
        "operations": [
            {
                "name": o.name,
                "kind": o.kind,
                "count": o.count,
                "time_s": o.time_s,
                "bytes": o.bytes,
                "flops": o.flops,
                "per_rank": o.per_rank,
                "source": o.source,
            }
            for o in step.operations
        ],
    }
