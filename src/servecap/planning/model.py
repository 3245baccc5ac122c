"""The fleet-plan use case: for this traffic and these SLOs, the cheapest fleet, with evidence.

:func:`servecap.app.fleet_plan.fleet_plan` takes a :class:`FleetPlanRequest` (a plan file or the flags of ``servecap
fleet plan``) and returns a :class:`FleetPlanResponse` (``--json``). No I/O. The steps:

1. **Traffic**: the workload (lengths, shared prefixes, tenants and classes with their SLOs, a
   daily rate curve) scaled so its peak is ``peak_rps``, or ``peak_users / request_interval_s``
   (a user sends one request every ``request_interval_s`` on average: reading, typing and the
   answer). The same conversion turns the closed form's and the simulation's requests/s per
   replica into users per GPU, so ``plan``, ``capacity`` and ``fleet plan`` count users alike.
2. **SLOs** are percentile targets per class (``p99 TTFT <= 1 s``); a class without its own takes
   the request's ``slo`` (default: the interactive SLO of ``plan``/``capacity``, at p99).
3. **Per candidate pool**: the closed form (:func:`servecap.core.plan.plan` at the traffic's mean
   request, SLOs read as means) gives requests/s per replica and a first replica count; the
   fleet simulator then finds the fewest replicas whose peak window meets every target
   (:func:`servecap.fleet.plan_search.smallest_passing`; windows in
   :mod:`servecap.fleet.plan_window`). The evidence is that count's attainment and that of one
   replica fewer, which fails.
4. **Rank** by $/month (730 hours: 8,760 / 12) and **verify** the winner on a second seed (one
   more replica while it fails).
5. **Daily curve**: an autoscaler from the winner's requests/s per replica — min from the
   trough, max from the peak, scale-ahead of the curve by one cold start — checked on the
   steepest ramp of the day; $/month from the scale-ahead floor over the day.
6. **Levers** (:mod:`servecap.planning.levers`), each re-simulated.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from servecap.distributed.executor import Executor
from servecap.errors import ServecapError, did_you_mean, from_validation_error
from servecap.fleet import FleetSpec
from servecap.fleet.file_schema import ColdStartModel, FleetFile, build_fleet, fleet_from_dict
from servecap.fleet.kv_tier_fields import CpuGib, RemoteTib
from servecap.fleet.plan_search import SearchResult
from servecap.fleet.plan_window import Window
from servecap.json_object import JsonObject
from servecap.planning.doc import FleetDoc, PoolDoc
from servecap.policy.autoscalers import PRESETS
from servecap.policy.routers import DEFAULT_ROUTER
from servecap.progress import Progress, ProgressFn
from servecap.results.slo_report import GroupResult, Target
from servecap.workload import RequestArrays, WorkloadSpec
from servecap.workload.mix_spec import SloSpec

HOURS_PER_MONTH = 730.0
# the one default request shape of plan, capacity, fleet plan and bench (app/defaults.py)
DEFAULT_WORKLOAD: dict[str, JsonObject] = {
    "prompt_tokens": {"kind": "fixed", "value": 1024},
    "output_tokens": {"kind": "fixed", "value": 128},
}


class _Model(BaseModel):
    """An input's model: unknown keys and non-finite numbers (NaN, infinity) refused."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class _Out(BaseModel):
    """A response's model (a computed figure may be infinite)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CandidateModel(_Model):
    """One candidate pool: a GPU with the deployment flags ``plan`` takes."""

    gpu: str
    model: str | None = None  # default: the request's model
    name: str | None = None  # default: the GPU (and TP, dtypes when not the defaults)
    tp: int | None = Field(default=None, ge=1)
    weights_dtype: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_num_seqs: int | None = Field(default=None, ge=1)
    price_per_gpu_hour: float | None = Field(default=None, ge=0)  # default: the GPU catalog's
    # the parallel layout and speculative decoding (the fleet pool's fields, fleet/file_schema.py)
    dp: int = Field(default=1, ge=1, le=1024)
    ep: int = Field(default=1, ge=1, le=4096)
    redundant_experts: int = Field(default=0, ge=0, le=4096)
    two_batch_overlap: bool = False
    speculative: Literal["mtp", "eagle", "eagle3", "ngram"] | None = None

    def label(self) -> str:
        if self.name:
            return self.name
        parts = [self.gpu]
        if self.tp and self.tp > 1:
            parts.append(f"tp{self.tp}")
        if self.dp > 1:
            parts.append(f"dp{self.dp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        if self.speculative:
            parts.append(self.speculative)
        if self.weights_dtype:
            parts.append(f"w-{self.weights_dtype}")
        if self.kv_cache_dtype != "auto":
            parts.append(f"kv-{self.kv_cache_dtype}")
        return " ".join(parts)


class TrafficModel(_Model):
    """The traffic: a workload (lengths, prefixes, tenants/classes, a daily curve) and its peak."""

    peak_rps: float | None = Field(default=None, gt=0, le=1e6)
    peak_users: int | None = Field(default=None, gt=0, le=1_000_000_000)
    request_interval_s: float = Field(default=30.0, gt=0, le=86_400)
    workload: WorkloadSpec | None = None  # default: chat lengths at a constant peak rate


class AutoscalerPlanModel(_Model):
    preset: str = Field(default="keda-vllm", json_schema_extra={"enum": list(PRESETS)})

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"unknown preset; one of {', '.join(PRESETS)}" + did_you_mean(v, PRESETS))
        return v

    target: float | None = Field(default=None, gt=0)
    interval_s: float | None = Field(default=None, gt=0)
    headroom: list[float] = Field(default_factory=lambda: [1.0, 1.15, 1.3], min_length=1)
    ramp_window_s: float | None = Field(default=None, gt=0)  # default: 3 cold starts, at least 5 min


class FleetPlanRequest(_Model):
    model: str = "meta-llama/Llama-3.1-8B"
    candidates: list[CandidateModel]
    traffic: TrafficModel
    slo: SloSpec | None = None  # default: p99 TTFT <= 2 s, p99 TPOT <= 100 ms (the interactive SLO)
    router: str = DEFAULT_ROUTER
    cold_start: ColdStartModel | Literal["instant"] = ColdStartModel()
    autoscaler: AutoscalerPlanModel = AutoscalerPlanModel()
    levers: list[str] | None = None  # default: every lever the fleet file accepts
    cheaper_gpu: CandidateModel | None = None  # the cheaper-GPU lever's pool when no candidate is cheaper
    cache_hit_rate: float = Field(default=0.2, gt=0, lt=1)
    # the KV-tier levers (cpu-tier, shared-store; docs/kv-tiers.md): DRAM per replica, the shared store
    cpu_tier_gib: CpuGib = 512.0
    shared_store_tib: RemoteTib = 1.0
    small_model: str = "meta-llama/Llama-3.1-8B"
    max_replicas: int = Field(default=256, ge=1, le=4096)
    prune_candidates: bool = True  # stop a candidate that fails at the count that would still cost less
    tail_samples: int = Field(default=50, ge=5, le=10_000)
    max_window_requests: int = Field(default=200_000, ge=100)
    seed: int = 0


class FleetPlanInput(BaseModel):
    """``fleet plan`` asked with its plan file inline, as a mapping (the keys the YAML file takes;
    docs/fleet.md, "Planning a fleet"). The HTTP API's body is this model; :meth:`request`
    validates it into a :class:`FleetPlanRequest`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    plan: JsonObject

    def request(self) -> FleetPlanRequest:
        return plan_request_from_dict(self.plan)


def plan_request_from_dict(raw: Mapping[str, object]) -> FleetPlanRequest:
    """Validate a plan file's mapping; the first problem is one error naming the field."""
    try:
        request = FleetPlanRequest.model_validate(raw)
    except ValidationError as err:
        raise from_validation_error(
            err, "plan", allowed_keys=lambda _loc: _KEYS, brackets=True, key_as_field=True
        ) from None
    # a tier lever's size given without the lever (asked for only) would change nothing: named
    for key, lever in (("cpu_tier_gib", "cpu-tier"), ("shared_store_tib", "shared-store")):
        if key in request.model_fields_set and lever not in (request.levers or ()):
            raise ServecapError(
                f"plan.{key}",
                getattr(request, key),
                f"sizes the {lever} lever, which is not asked for: add it to levers (--levers ...,{lever})",
            )
    return request


_KEYS = sorted({*FleetPlanRequest.model_fields, *TrafficModel.model_fields, *CandidateModel.model_fields})


# ---- the response ------------------------------------------------------------------------------


class TargetOut(_Out):
    group: str
    target: str  # "p99 TTFT <= 1,000 ms"
    metric: str
    percentile: float
    max_s: float
    observed_s: float | None  # None: no samples; inf is written as 1e9 (failed requests)
    share_within: float
    met: bool


class FleetEval(_Out):
    """One simulated fleet on one window."""

    candidate: str
    replicas: int
    usd_per_month: float
    requests: int  # scored (after the warm-up)
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    attainment: float  # share of scored requests within all their class's targets
    slo_met: bool
    failed_targets: list[str]
    targets: list[TargetOut]
    seed: int
    prefix_cache_hit_rate: float | None = None  # GPU prefix-cache hits / prompt tokens looked up
    kv_tier_hits: dict[str, float] | None = None  # per KV tier (gpu, cpu, ssd, remote): hits / looked up


class CandidateOut(_Out):
    name: str
    model: str
    gpu: str
    gpus_per_replica: int
    price_per_gpu_hour: float
    closed_form_req_s_per_replica: float
    closed_form_replicas: int
    replicas: int | None  # None: no count up to max_replicas meets the SLOs
    usd_per_month: float | None
    req_s_per_replica: float | None  # simulated, at the peak
    users_per_gpu: float | None
    closed_form_users_per_gpu: float
    simulations: int
    best: FleetEval | None  # the answer's evaluation (or the best attainment seen when none passed)
    note: str = ""


class AutoscalerOut(_Out):
    preset: str
    signal: str
    target: float
    interval_s: float
    min_replicas: int
    max_replicas: int
    scale_ahead_req_s_per_replica: float
    scale_ahead_lead_s: float
    scale_ahead_headroom: float
    ramp_start_s: float
    ramp_end_s: float
    ramp_rate_from_req_s: float
    ramp_rate_to_req_s: float
    ramp: FleetEval
    usd_per_month: float  # the scale-ahead floor over the day (not a simulated day)
    simulations: int


class LeverOut(_Out):
    name: str
    change: str
    replicas: int | None
    usd_per_month: float | None
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    slo_met: bool
    simulations: int
    note: str = ""
    # the KV-tier levers: the chosen fleet's hits per tier and the lever's (fractions of prompt tokens)
    hit_rates_before: dict[str, float] | None = None
    hit_rates: dict[str, float] | None = None
    fleet_file: FleetDoc | None = None  # the split's fleet file (P/D roles) where it met the SLOs
    # the split's own 80% intervals where it met the SLOs ("replicas", "usd_per_month", "ttft_s.p99",
    # "tpot_s.p99"), as the chosen fleet's ``interval`` (FleetPlanResponse.interval)
    interval: dict[str, JsonObject] = Field(default_factory=dict)


class FleetPlanResponse(_Out):
    model: str
    router: str
    peak_rps: float
    peak_users: int | None
    request_interval_s: float
    daily_curve: bool
    slo: list[str]  # every target, the percentile stated
    window: dict[str, float]
    chosen: CandidateOut
    fleet: FleetEval
    next_cheaper: FleetEval | None  # one replica fewer: it fails
    verify: FleetEval
    candidates: list[CandidateOut]
    autoscaler: AutoscalerOut | None
    levers: list[LeverOut]
    levers_skipped: list[str]
    simulations: int
    story: list[str]  # where the figures differ from plan/capacity and why, one line each
    fleet_file: FleetDoc  # the chosen fleet as a fleet file (`servecap fleet simulate --fleet`)
    notes: list[str]
    # the peak window the plan scored, as a workload file (`fleet plan --out` writes it beside the
    # fleet file: `fleet simulate --fleet F --workload W --seed S` re-runs the plan's evidence)
    peak_workload: JsonObject = Field(default_factory=dict)
    # "replicas", "usd_per_month" -> the 80% interval of the chosen fleet's count and rent
    # (validation.interval.replica_interval: the throughput interval carried to the count)
    interval: dict[str, JsonObject] = Field(default_factory=dict)


# ---- the search --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scored:
    """A window's drawn requests and how to score them."""

    window: Window
    arrays: RequestArrays
    groups: dict[str, np.ndarray]  # group -> scored row indices
    targets: dict[str, tuple[Target, ...]]
    scored: np.ndarray  # all scored row indices


@dataclass(frozen=True, slots=True)
class EvalTask:
    """One simulation of the search, as a value a worker can run (:func:`evaluate_task`)."""

    request: FleetPlanRequest
    fleet: FleetDoc
    scored: Scored
    label: str
    replicas: int
    seed: int | None = None


def evaluate_task(task: EvalTask) -> FleetEval:
    """Simulate and score one fleet (in a worker: a process of a pool, or a Ray task)."""
    ctx = Context(task.request, None)
    return ctx.simulate(
        fleet_from_dict(task.fleet), task.scored, label=task.label, replicas=task.replicas, seed=task.seed
    )


# ``auto``: a local process pool on more than one core for windows at least this big (smaller
# ones simulate in less time than workers take to start)
AUTO_PARALLEL_MIN_REQUESTS = 20_000
EXECUTOR_CHOICES = ("auto", "serial", "process", "ray")


@dataclass(frozen=True, slots=True)
class Stage:
    """Where a fleet plan is: ``done`` of ``total`` ``unit`` (``"candidates searched"``,
    ``"second-seed checks"``, ``"daily-curve sizings"``, ``"levers re-simulated"``)."""

    unit: str
    done: int
    total: int


class Context:
    """What every evaluation shares: the request, the scoring, a counter of simulations, and
    where simulations run (``executor``: ``serial`` in this process; ``process`` or ``ray``:
    the search evaluates ``width`` replica counts at once, speculatively, with the serial
    search's answer; ``auto``: ``process`` on more than one core for big enough windows)."""

    def __init__(
        self,
        request: FleetPlanRequest,
        progress: ProgressFn | None,
        *,
        executor: str = "serial",
        workers: int | None = None,
        ray_address: str | None = None,
    ) -> None:
        if executor not in EXECUTOR_CHOICES:
            raise ServecapError(
                "executor", executor, f"one of {', '.join(EXECUTOR_CHOICES)}" + did_you_mean(executor, EXECUTOR_CHOICES)
            )
        if workers is not None and workers < 1:
            raise ServecapError("workers", workers, "must be at least 1")
        self.request = request
        self.progress = progress
        self.simulations = 0
        self.stage = Stage("candidates searched", 0, len(request.candidates))  # the progress events' count
        self.speculated = 0  # simulations run ahead that the search did not need
        self.notes: list[str] = []
        self.executor_kind = executor
        self.workers = workers
        self.ray_address = ray_address
        self._executor: Executor | None = None

    def width(self, scored: Scored) -> int:
        """How many replica counts the search evaluates at once on this window (1: serial)."""
        kind = self.executor_kind
        cores = os.cpu_count() or 1
        if kind == "serial":
            return 1
        if kind == "auto" and (
            cores < 2
            or len(scored.arrays) < AUTO_PARALLEL_MIN_REQUESTS
            or multiprocessing.current_process().daemon  # a job's worker (the API): no children
        ):
            return 1
        return self.workers or (cores if kind != "ray" else max(2, cores))

    def run_many(self, tasks: list[EvalTask]) -> list[FleetEval | str]:
        """Each task's evaluation, or its error line, in order (not counted: see :meth:`count`)."""
        if self._executor is None:
            from servecap.distributed import make_executor

            kind = "process" if self.executor_kind == "auto" else self.executor_kind
            self._executor = make_executor(kind, workers=self.workers, ray_address=self.ray_address, persistent=True)
        outs = self._executor.map(evaluate_task, tasks)
        return [o.value if o.ok and o.value is not None else (o.error or "no result") for o in outs]

    def count(self, ev: FleetEval) -> None:
        """An evaluation the search used: counted, and reported as progress."""
        self.simulations += 1
        self._report(ev)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def simulate(
        self, ff: FleetFile, scored: Scored, *, label: str, replicas: int, seed: int | None = None
    ) -> FleetEval:
        """Simulate ``ff`` on the window and score it."""
        from servecap.fleet import simulate_fleet
        from servecap.results.slo_report import metric_values, slo_report

        spec, _ = build_fleet(ff)
        s = self.request.seed if seed is None else seed
        from servecap.workload.generate import is_session_trace

        # a sessions trace is replayed closed loop, as its graph (its arrays are nominal times)
        workload = scored.window.workload
        res = simulate_fleet(spec, workload if is_session_trace(workload) else scored.arrays, s)
        self.simulations += 1
        report = slo_report(res.columns, scored.groups, scored.targets)
        ok = np.zeros(len(scored.arrays.arrival_s), dtype=bool)
        ok[scored.scored] = True
        n = len(scored.scored)
        within = sum(g.attainment * g.requests for g in report)
        counted = sum(g.requests for g in report)
        ttft = metric_values(res.columns, "ttft_s")[scored.scored]
        tpot = metric_values(res.columns, "tpot_s")[scored.scored]
        ev = FleetEval(
            candidate=label,
            replicas=replicas,
            usd_per_month=usd_per_month(spec),
            requests=n,
            ttft_p99_s=_p99(ttft),
            tpot_p99_s=_p99(tpot),
            attainment=within / counted if counted else 1.0,
            slo_met=all(g.met for g in report),
            failed_targets=[f"{t.group}: {t.label()}" for g in report for t in g.targets if not t.met],
            targets=_targets_out(report),
            seed=s,
            prefix_cache_hit_rate=res.summary.prefix_cache_hit_rate,
            kv_tier_hits=_tier_fractions(res.summary.kv_tier_hit_tokens, res.summary.kv_tier_query_tokens),
        )
        self._report(ev)
        return ev

    def enter(self, stage: Stage) -> None:
        """The plan moved on (a candidate searched, a lever started): said at once."""
        self.stage = stage
        self._emit(f"simulations: {self.simulations:,}")

    def _report(self, ev: FleetEval) -> None:
        verdict = "meets" if ev.slo_met else "misses"
        self._emit(f"simulations: {self.simulations:,}; {ev.candidate} x {ev.replicas} {verdict} the SLOs")

    def _emit(self, message: str) -> None:
        # counted in the stage's units, whose total is known when the stage starts (a search's
        # simulations are not: it stops where the SLOs flip); the simulations in the message
        if self.progress is not None:
            st = self.stage
            self.progress(Progress("fleet-plan", st.done, st.total, st.unit, message))


def _p99(v: np.ndarray) -> float | None:
    v = v[~np.isnan(v)]
    if v.size == 0:
        return None
    x = float(np.percentile(np.where(np.isinf(v), 1e300, v), 99))
    return None if x > 1e299 else x


def _targets_out(report: tuple[GroupResult, ...]) -> list[TargetOut]:
    return [
        TargetOut(
            group=t.group,
            target=t.label(),
            metric=t.metric,
            percentile=t.percentile,
            max_s=t.max_s,
            observed_s=None if math.isnan(t.observed_s) else (1e9 if math.isinf(t.observed_s) else t.observed_s),
            share_within=t.share_within,
            met=t.met,
        )
        for g in report
        for t in g.targets
    ]


def _tier_fractions(hits: dict[str, int] | None, query: int) -> dict[str, float] | None:
    if hits is None or not query:
        return None
    return {name: n / query for name, n in hits.items()}


def usd_per_month(spec: FleetSpec) -> float:
    """A fixed fleet's rent: Σ pools replicas x GPUs x $/GPU-hour x 730 h."""
    return float(sum(p.replicas * p.gpus_per_replica * p.price_per_gpu_hour for p in spec.pools)) * HOURS_PER_MONTH


def pool_dict(request: FleetPlanRequest, c: CandidateModel, replicas: int, *, name: str = "main") -> PoolDoc:
    """Candidate ``c`` as a fleet file's pool of ``replicas`` (cold starts instant: a fixed fleet)."""
    d: PoolDoc = {
        "name": name,
        "model": c.model or request.model,
        "gpu": c.gpu,
        "replicas": replicas,
        "kv_cache_dtype": c.kv_cache_dtype,
        "cold_start": "instant",
    }
    if c.tp is not None:
        d["tp"] = c.tp
    if c.weights_dtype is not None:
        d["weights_dtype"] = c.weights_dtype
    if c.max_model_len is not None:
        d["max_model_len"] = c.max_model_len
    if c.gpu_memory_utilization is not None:
        d["gpu_memory_utilization"] = c.gpu_memory_utilization
    if c.max_num_seqs is not None:
        d["max_num_seqs"] = c.max_num_seqs
    if c.price_per_gpu_hour is not None:
        d["price_per_gpu_hour"] = c.price_per_gpu_hour
    if c.dp > 1:
        d["dp"] = c.dp
    if c.ep > 1:
        d["ep"] = c.ep
    if c.redundant_experts:
        d["redundant_experts"] = c.redundant_experts
    if c.two_batch_overlap:
        d["two_batch_overlap"] = True
    if c.speculative is not None:
        d["speculative"] = c.speculative
    return d


def fixed_fleet(request: FleetPlanRequest, c: CandidateModel, replicas: int, router: str | None = None) -> FleetDoc:
    return {"pools": [pool_dict(request, c, replicas)], "router": router or request.router}


Evaluate = Callable[[int], tuple[bool, FleetEval]]


def search_counts(
    ctx: Context,
    scored: Scored,
    label: str,
    build: Callable[[int], FleetDoc],
    guess: int,
    *,
    limit: int,
    cache: dict[int, tuple[bool, FleetEval]] | None = None,
) -> SearchResult[FleetEval]:
    """The fewest replicas whose fleet (``build(k)``, a fleet file) meets the targets on the
    window (:func:`~servecap.fleet.plan_search.smallest_passing`), in this process or, with a
    parallel executor, speculatively in batches of ``ctx.width`` on its workers: the same
    answer and evaluations either way; only those the search used are counted."""
    from servecap.fleet.plan_search import smallest_passing

    cache = {} if cache is None else cache

    def evaluate(k: int) -> tuple[bool, FleetEval]:
        if k not in cache:
            ev = ctx.simulate(fleet_from_dict(build(k)), scored, label=label, replicas=k)
            cache[k] = (ev.slo_met, ev)
        return cache[k]

    width = ctx.width(scored)
    if width <= 1:
        return smallest_passing(evaluate, guess, limit=limit)
    ahead: dict[int, tuple[bool, FleetEval]] = {}

    def evaluate_many(ks: list[int]) -> list[tuple[bool, FleetEval] | None]:
        todo = [k for k in ks if k not in cache and k not in ahead]
        outs = ctx.run_many([EvalTask(ctx.request, build(k), scored, label, k) for k in todo])
        for k, out in zip(todo, outs, strict=True):
            if isinstance(out, str):
                if k == ks[0]:  # the count the search needs: its error is the plan's
                    raise ServecapError("fleet", f"{label} x {k}", out)
                continue
            ahead[k] = (out.slo_met, out)
        return [cache[k] if k in cache else ahead.get(k) for k in ks]

    res = smallest_passing(evaluate, guess, limit=limit, evaluate_many=evaluate_many, width=width)
    for k, (ok, ev) in res.evaluations.items():
        if k not in cache:
            cache[k] = (ok, ev)
            ctx.count(ev)
    ctx.speculated += sum(1 for k in ahead if k not in res.evaluations)
    return res
