"""The fleet use case: a fleet file (or flags) and a workload in, a fleet simulation out.

- :class:`FleetFile` — the fleet file's schema (YAML/JSON, ``extra="forbid"``; docs/fleet.md):
  pools (model, GPU and the deployment flags ``plan`` takes, replicas or an autoscaler, price,
  cold start, failures), the router, what happens to a crashed replica's requests, SLOs;
- :func:`load_fleet_file` / :func:`fleet_from_dict` — read and validate it (the first problem
  becomes one :class:`~servecap.errors.ServecapError` naming the field);
- :func:`build_fleet` — names -> specs: each pool planned (:func:`servecap.core.plan.plan`) and
  turned into an engine setup, the result a :class:`~servecap.fleet.FleetSpec`;
- :func:`fleet_simulate` — :class:`FleetSimulateRequest` -> :class:`FleetSimulateResponse` (the
  ``--json`` output; the HTTP API will return the same model) and the full result.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from servecap.app.flapping import PoolFlapping
from servecap.app.json_object import JsonObject
from servecap.app.scale_event import ScaleEvent
from servecap.app.warm_up import SteadyWindow
from servecap.core.kv_transfer import kv_footprint
from servecap.errors import ServecapError, did_you_mean, from_validation_error
from servecap.fleet import ColdStart, FleetResult, FleetSpec, Phase, Pool, simulate_fleet
from servecap.fleet.gateway_stage import check_pool_names
from servecap.fleet.pd.stats import PdStats
from servecap.fleet.pd_spec import KvLinkSpec, PdRouterSpec
from servecap.fleet.spec import INSTANT
from servecap.policy.autoscalers import (
    AUTOSCALERS,
    DEFAULT_AUTOSCALER,
    PLANNED_LOAD_SHARE,
    PRESETS,
    SIGNALS,
    AutoscalerSettings,
    autoscaler_class,
    make_autoscaler,
)
from servecap.policy.gateway.config import GatewayConfig, gateway_from_dict
from servecap.policy.pd_router import PD_PRESETS
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS
from servecap.progress import ProgressFn
from servecap.results.summary_json import RunSummaryJson
from servecap.specs.bounds import (
    AUTOSCALER_INTERVAL_S,
    AUTOSCALER_WINDOW_S,
    COLD_START_PHASE_S,
    KV_LINK_BANDWIDTH_GB_S,
    KV_LINK_LATENCY_US,
    KV_LINK_OVERHEAD_US,
    LOAD_BANDWIDTH_GB_S,
    PHASE_CV,
    PREDICTIVE_STEP_S,
    SCRAPE_INTERVAL_MS,
    TIMESERIES_INTERVAL_S,
    Bound,
    check_scrape_interval_ms,
)
from servecap.specs.engines import ENGINE_PROFILES
from servecap.specs.perf import Slo
from servecap.workload import WorkloadSpec, traffic_classes

if TYPE_CHECKING:
    from servecap.app.limits import WorkLimits
    from servecap.core.plan import Plan
    from servecap.fleet.run_result import ReplicaStats
    from servecap.specs.gpu import GpuSpec


MAX_POOL_REPLICAS = 10_000
"""Most replicas one pool of a fleet file may hold (each is a simulated engine)."""


class _Model(BaseModel):
    """An input's model: unknown keys and non-finite numbers (NaN, infinity) refused."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    @field_validator("*")
    @classmethod
    def _in_range(cls, v: Any, info: ValidationInfo) -> Any:
        """A field made with :func:`_within` holds a number in its range, refused with the reason."""
        extra = cls.model_fields[str(info.field_name)].json_schema_extra
        if isinstance(extra, dict) and "x-bound" in extra and isinstance(v, int | float) and not isinstance(v, bool):
            low, high = float(extra["minimum"]), float(extra["maximum"])  # type: ignore[arg-type]
            if not low <= v <= high:
                raise ValueError(f"must be {extra['x-bound']}")
        return v


class _Out(BaseModel):
    """A response's model (a computed figure may be infinite)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _within(bound: Bound, default: Any = ...) -> Any:
    """A field in ``bound``'s range, its reason in the schema (servecap.specs.bounds)."""
    extra = {"minimum": bound.low, "maximum": bound.high, "x-bound": bound.describe()}
    return Field(default=default, description=bound.describe(), json_schema_extra=extra)  # type: ignore[arg-type]


class PhaseModel(_Model):
    mean_s: float = _within(COLD_START_PHASE_S)
    cv: float = _within(PHASE_CV, 0.0)


class ColdStartModel(_Model):
    """Cold-start phases; a number is a fixed duration in seconds."""

    provisioning: PhaseModel | float = PhaseModel(mean_s=60.0, cv=0.3)
    image_pull: PhaseModel | float = PhaseModel(mean_s=45.0, cv=0.3)
    load_bandwidth_gb_s: float = _within(LOAD_BANDWIDTH_GB_S, 2.0)
    compile: PhaseModel | float = PhaseModel(mean_s=30.0, cv=0.2)
    warmup: PhaseModel | float = PhaseModel(mean_s=10.0, cv=0.2)

    def to_spec(self) -> ColdStart:
        def ph(p: PhaseModel | float, name: str) -> Phase:
            if isinstance(p, PhaseModel):
                return Phase(p.mean_s, p.cv)
            if not COLD_START_PHASE_S.low <= p <= COLD_START_PHASE_S.high:
                raise ServecapError(f"cold_start.{name}", p, f"must be {COLD_START_PHASE_S.describe()}")
            return Phase(float(p))

        return ColdStart(
            ph(self.provisioning, "provisioning"),
            ph(self.image_pull, "image_pull"),
            self.load_bandwidth_gb_s * 1e9,
            ph(self.compile, "compile"),
            ph(self.warmup, "warmup"),
        )


class ScheduleEntry(_Model):
    at_s: float = Field(ge=0)
    min_replicas: int = Field(ge=0, le=MAX_POOL_REPLICAS)


class PredictiveModel(_Model):
    """Scale ahead of the workload's rate curve (``servecap.fleet.predictive``)."""

    req_s_per_replica: float = Field(gt=0)
    lead_s: float | None = _within(COLD_START_PHASE_S, None)  # default: the pool's mean cold start
    step_s: float = _within(PREDICTIVE_STEP_S, 60.0)
    headroom: float = Field(default=1.0, gt=0)


def _registered(v: str | None, registry: Collection[str], what: str) -> str | None:
    """``v`` when the registry has it (None: the default); else a ValueError pydantic names the
    field in, with a "did you mean"."""
    if v is not None and v not in registry:
        raise ValueError(f"unknown {what}; one of {', '.join(registry)}" + did_you_mean(v, list(registry)))
    return v


def planned_target(preset: str, plan: Plan | None) -> float | None:
    """The target ``preset`` takes on a replica of ``plan``: the requests in flight at its
    :data:`~servecap.policy.autoscalers.PLANNED_LOAD_SHARE` of the planned service rate (output
    tokens/s at the planned batch over the request's output tokens), at least 1; None when the
    preset's target is a fixed value or no plan is known."""
    share = PLANNED_LOAD_SHARE.get(preset)
    if share is None or plan is None or plan.batch <= 0:
        return None
    from servecap.core.capacity import inflight_at_rate

    rate = share * plan.output_tokens_per_s_total / max(1, plan.request.output_tokens)
    eng = plan.deployment.engine
    b = inflight_at_rate(plan.step, plan.request, plan.efficiency, eng.max_num_batched_tokens, rate, plan.batch)
    return float(max(1, round(b if b is not None else share * plan.batch)))


class AutoscalerModel(_Model):
    """A pool's autoscaler: ``policy`` names one of :data:`~servecap.policy.autoscalers.AUTOSCALERS`
    (default ``target-tracking``), ``preset`` one of :data:`~servecap.policy.autoscalers.PRESETS`
    (default: the policy's own, ``keda-vllm`` for target tracking) whose values the other keys
    override; ``options`` are the policy's own knobs (the KPA's windows, for one)."""

    # the registries as the schema's enums (null: the default); the validators below say "did you mean"
    preset: str | None = Field(default=None, json_schema_extra={"enum": [*PRESETS, None]})
    policy: str | None = Field(default=None, json_schema_extra={"enum": [*AUTOSCALERS, None]})
    options: dict[str, float] = Field(default_factory=dict)
    signal: str | None = Field(default=None, json_schema_extra={"enum": [*SIGNALS, None]})
    target: float | None = Field(default=None, gt=0)
    interval_s: float | None = _within(AUTOSCALER_INTERVAL_S, None)
    min_replicas: int = Field(default=1, ge=0, le=MAX_POOL_REPLICAS)
    max_replicas: int = Field(ge=1, le=MAX_POOL_REPLICAS)
    upscale_stabilization_s: float | None = _within(AUTOSCALER_WINDOW_S, None)
    downscale_stabilization_s: float | None = _within(AUTOSCALER_WINDOW_S, None)
    max_step_up: int | None = Field(default=None, ge=1)
    max_step_down: int | None = Field(default=None, ge=1)
    tolerance: float | None = Field(default=None, ge=0, lt=1)
    window_s: float | None = Field(
        default=None, gt=0, le=AUTOSCALER_WINDOW_S.high, description=AUTOSCALER_WINDOW_S.describe()
    )
    schedule: list[ScheduleEntry] = Field(default_factory=list)
    predictive: PredictiveModel | None = None

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str | None) -> str | None:
        if v is not None and v not in AUTOSCALERS:  # ValueError: pydantic names the field
            raise ValueError(f"unknown autoscaler; one of {', '.join(AUTOSCALERS)}" + did_you_mean(v, AUTOSCALERS))
        return v

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str | None) -> str | None:
        return _registered(v, PRESETS, "preset")

    @field_validator("signal")
    @classmethod
    def _signal(cls, v: str | None) -> str | None:
        return _registered(v, SIGNALS, "signal")

    def to_settings(self, plan: Plan | None = None) -> AutoscalerSettings:
        """The settings; the pool's ``plan`` sets the target of a preset that reads it
        (``keda-vllm``: running + waiting per replica at 60% of the planned service rate)."""
        preset = self.preset or autoscaler_class(self.policy or DEFAULT_AUTOSCALER).default_preset
        base = PRESETS[preset]
        if self.target is not None:
            target = self.target
        else:
            signal = base.signal if self.signal is None else self.signal
            planned = planned_target(preset, plan) if signal == base.signal else None
            target = base.target if planned is None else planned
        options = dict(base.options) if self.policy in (None, base.policy) else {}
        options.update(self.options)
        settings = AutoscalerSettings(
            signal=base.signal if self.signal is None else self.signal,
            target=target,
            interval_s=base.interval_s if self.interval_s is None else self.interval_s,
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            upscale_stabilization_s=base.upscale_stabilization_s
            if self.upscale_stabilization_s is None
            else self.upscale_stabilization_s,
            downscale_stabilization_s=base.downscale_stabilization_s
            if self.downscale_stabilization_s is None
            else self.downscale_stabilization_s,
            max_step_up=base.max_step_up if self.max_step_up is None else self.max_step_up,
            max_step_down=base.max_step_down if self.max_step_down is None else self.max_step_down,
            tolerance=base.tolerance if self.tolerance is None else self.tolerance,
            window_s=base.window_s if self.window_s is None else self.window_s,
            schedule=tuple((e.at_s, e.min_replicas) for e in self.schedule),
            policy=base.policy if self.policy is None else self.policy,
            options=tuple(sorted(options.items())),
        )
        make_autoscaler(settings)  # the policy checks its signal and options now, not mid-run
        return settings


MIN_MTBF_S = 1.0
"""The shortest mean time between failures of one replica: a second. Real GPU servers fail about
once in days to months (Llama 3's 16,384 GPUs saw 419 unexpected interruptions in 54 days,
arXiv:2407.21783 sec. 3.3.4); 1e-9 s with instant cold starts made crash and restart events
without end (the compiled fleet died with ``SystemError``)."""


class PoolModel(_Model):
    name: str = "main"
    model: str
    gpu: str
    gpu_file: str | None = None  # a TOML file adding [[gpu]] rows (relative to the fleet file)
    num_gpus: int | None = Field(default=None, ge=1)
    tp: int | None = Field(default=None, ge=1)
    pp: int = Field(default=1, ge=1)
    weights_dtype: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_memory_bytes: int | None = Field(default=None, ge=1)
    block_size: int | None = Field(default=None, ge=1)
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    engine: str = Field(default="vllm", json_schema_extra={"enum": list(ENGINE_PROFILES)})  # the engine profile
    enable_prefix_caching: bool = True
    max_waiting: int | None = Field(default=None, ge=0)
    calibration: str | None = None
    replicas: int | None = Field(default=None, ge=0, le=MAX_POOL_REPLICAS)
    price_per_gpu_hour: float | None = Field(default=None, ge=0)
    cold_start: ColdStartModel | Literal["instant"] = ColdStartModel()
    autoscaler: AutoscalerModel | None = None
    mtbf_s: float | None = None
    crash_at_s: list[float] = Field(default_factory=list)
    role: Literal["both", "prefill", "decode"] = "both"  # docs/fleet.md, disaggregated prefill/decode
    # the parallel layout and speculative decoding, as the deployment flags (app/flags.py)
    dp: int = Field(default=1, ge=1, le=1024)
    ep: int = Field(default=1, ge=1, le=4096)
    nodes: int | None = Field(default=None, ge=1, le=4096)
    gpus_per_node: int | None = Field(default=None, ge=1, le=72)
    redundant_experts: int = Field(default=0, ge=0, le=4096)
    expert_skew: float = Field(default=0.0, ge=0.0, le=4.0)
    a2a_mode: Literal["auto", "normal", "low_latency"] = "auto"
    two_batch_overlap: bool = False
    speculative: Literal["mtp", "eagle", "eagle3", "draft", "ngram"] | None = None
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=16)
    spec_acceptance: str | None = Field(default=None, min_length=1, max_length=200)
    draft_model: str | None = Field(default=None, min_length=1, max_length=500)

    @field_validator("mtbf_s")
    @classmethod
    def _plausible_mtbf(cls, value: float | None) -> float | None:
        if value is not None and not value >= MIN_MTBF_S:
            raise ValueError(
                f"must be at least {MIN_MTBF_S:g} s: a replica failing more often than once a second never "
                "serves a request (real GPU servers fail about once in days to months)"
            )
        return value

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        return _registered(v, ENGINE_PROFILES, "engine") or v


class KvLinkModel(_Model):
    """A P/D fleet's KV link (servecap.fleet.pd_spec.KvLinkSpec)."""

    kind: Literal["nvlink", "infiniband", "roce", "tcp"] = "infiniband"
    bandwidth_gb_s: float | None = _within(KV_LINK_BANDWIDTH_GB_S, None)
    latency_us: float | None = _within(KV_LINK_LATENCY_US, None)
    overhead_us: float | None = _within(KV_LINK_OVERHEAD_US, None)
    scope: Literal["per-gpu", "shared"] = "per-gpu"
    streaming: bool = False

    def to_spec(self) -> KvLinkSpec:
        return KvLinkSpec(
            kind=self.kind,
            bandwidth_bytes_s=None if self.bandwidth_gb_s is None else self.bandwidth_gb_s * 1e9,
            latency_s=None if self.latency_us is None else self.latency_us / 1e6,
            overhead_s=None if self.overhead_us is None else self.overhead_us / 1e6,
            scope=self.scope,
            streaming=self.streaming,
        )


class PdRouterModel(_Model):
    prefill: str = "prefix-affinity"
    decode: str = "least-kv"


class RouterModel(_Model):
    name: str = Field(default=DEFAULT_ROUTER, json_schema_extra={"enum": list(ROUTERS)})
    settings: dict[str, float | int | None] = Field(default_factory=dict)
    scrape_interval_ms: float = Field(
        default=0.0, ge=0, le=SCRAPE_INTERVAL_MS.high, description="0 or " + SCRAPE_INTERVAL_MS.describe()
    )

    @field_validator("scrape_interval_ms")
    @classmethod
    def _scrape(cls, v: float) -> float:
        return check_scrape_interval_ms(v)


class SloModel(_Model):
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)


class FleetFile(_Model):
    pools: list[PoolModel] = Field(min_length=1)
    router: RouterModel | str = RouterModel()
    on_failure: Literal["retry", "fail"] = "retry"
    max_retries: int = Field(default=2, ge=0)
    slo: SloModel | None = None
    timeseries_interval_s: float | None = _within(TIMESERIES_INTERVAL_S, None)
    gateway: GatewayConfig | None = None  # docs/gateway.md
    kv_link: KvLinkModel | None = None  # a P/D fleet's link
    pd_router: PdRouterModel | str | None = None  # a P/D fleet's router: a preset of PD_PRESETS, or per side

    @field_validator("pd_router")
    @classmethod
    def _pd_router(cls, v: PdRouterModel | str | None) -> PdRouterModel | str | None:
        return _registered(v, PD_PRESETS, "P/D router preset") if isinstance(v, str) else v

    @field_validator("gateway", mode="before")
    @classmethod
    def _gateway(cls, v: Any) -> Any:
        # the gateway's own validation: its one-line errors name ``gateway.<field>``
        if v is None or isinstance(v, GatewayConfig):
            return v
        if not isinstance(v, dict):
            raise ServecapError("gateway", v, "must be a mapping (see docs/gateway.md)")
        return gateway_from_dict(v)

    @model_validator(mode="after")
    def _layout(self) -> FleetFile:
        from servecap.fleet.pd_spec import check_pd_layout

        check_pd_layout(self.pools)  # a P/D fleet's roles, model, replicas and engine (one line)
        return self

    def router_model(self) -> RouterModel:
        return RouterModel(name=self.router) if isinstance(self.router, str) else self.router


def fleet_from_dict(raw: Mapping[str, object]) -> FleetFile:
    """Validate a mapping; the first problem becomes one error naming the field."""
    try:
        return FleetFile.model_validate(raw)
    except ValidationError as err:
        raise from_validation_error(err, "fleet", allowed_keys=_allowed_keys, brackets=True) from None


def _allowed_keys(loc: list[str]) -> list[str]:
    """The keys of the model found by following ``loc`` from :class:`FleetFile`."""
    import typing

    model: type[BaseModel] = FleetFile
    for part in loc:
        if part.isdigit() or part not in model.model_fields:
            continue
        stack: list[Any] = [model.model_fields[part].annotation]
        found: type[BaseModel] | None = None
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                found = t
                break
            stack.extend(typing.get_args(t))
        if found is None:
            return []
        model = found
    return sorted(model.model_fields)


def load_fleet_file(path: Path | str) -> FleetFile:
    """Read a ``.yaml``/``.yml``/``.json`` fleet file."""
    from servecap.files import load_document

    raw = load_document(path, "fleet")
    return fleet_from_dict(raw)


def plan_pool(p: PoolModel, base_dir: Path | None = None) -> tuple[Plan, GpuSpec]:
    """A pool's deployment planned as ``servecap plan`` would (its calibration applied), and its GPU."""
    from servecap.catalog import load_gpu_file, lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan

    where = f"pools.{p.name}"
    extra = None
    if p.gpu_file is not None:
        gpu_path = Path(p.gpu_file)
        if base_dir is not None and not gpu_path.is_absolute():
            gpu_path = base_dir / gpu_path
        extra = load_gpu_file(gpu_path)
    gpu = lookup_gpu(p.gpu, extra)
    model = resolve_model(p.model)
    tp, pp = p.tp, p.pp
    if tp is None:
        tp = (p.num_gpus // pp) if p.num_gpus is not None else 1
    if p.num_gpus is not None and p.num_gpus != tp * pp * p.dp:
        raise ServecapError(f"{where}.num_gpus", p.num_gpus, f"must equal tp x pp x dp = {tp * pp * p.dp}")
    try:
        from servecap.app.flags import _draft_model
        from servecap.core.parallel import resolve_nodes

        speculative = None
        if p.speculative is not None or p.num_speculative_tokens is not None or p.spec_acceptance is not None:
            from servecap.core.spec_decode import spec_config_from_flags

            speculative = spec_config_from_flags(
                model, p.speculative, p.num_speculative_tokens, p.spec_acceptance, _draft_model(p.draft_model)
            )
        dep = build_deployment(
            model,
            gpu,
            tp=tp,
            pp=pp,
            weights_dtype=p.weights_dtype or "auto",
            kv_cache_dtype=p.kv_cache_dtype,
            max_model_len=p.max_model_len,
            gpu_memory_utilization=p.gpu_memory_utilization,
            block_size=p.block_size,
            max_num_seqs=p.max_num_seqs,
            max_num_batched_tokens=p.max_num_batched_tokens,
            kv_cache_memory_bytes=p.kv_cache_memory_bytes,
            engine=p.engine,
            dp=p.dp,
            ep=p.ep,
            gpus_per_node=resolve_nodes(p.nodes, p.gpus_per_node, tp * pp * p.dp),
            redundant_experts=p.redundant_experts,
            expert_skew=p.expert_skew,
            a2a_mode=p.a2a_mode,
            two_batch_overlap=p.two_batch_overlap,
            speculative=speculative,
        )
    except ServecapError as err:
        if err.field in ("dp", "ep", "nodes", "gpus_per_node", "redundant_experts", "expert_skew", "a2a_mode") or (
            err.field in ("speculative", "num_speculative_tokens", "spec_acceptance", "draft_model")
        ):
            raise ServecapError(f"{where}.{err.field}", err.value, err.problem) from None
        raise
    efficiency = None
    if p.calibration is not None:
        from servecap.calibration import load_calibration

        cal_path = Path(p.calibration)
        if base_dir is not None and not cal_path.is_absolute():
            cal_path = base_dir / cal_path
        efficiency = load_calibration(cal_path).efficiency()
    return plan(dep, efficiency=efficiency), gpu


def build_pool(p: PoolModel, base_dir: Path | None = None) -> tuple[Pool, list[str]]:
    """One pool: the deployment planned as ``servecap plan`` would, its engine, its lifecycle."""
    from servecap.sim import engine_setup_from_plan

    notes: list[str] = []
    where = f"pools.{p.name}"
    the_plan, gpu = plan_pool(p, base_dir)
    dep = the_plan.deployment
    setup = engine_setup_from_plan(
        the_plan,
        enable_prefix_caching=p.enable_prefix_caching,
        waiting_queue_limit=p.max_waiting,
    )
    notes.extend(f"{p.name}: {n}" for n in setup.notes)
    price = p.price_per_gpu_hour
    if price is None:
        price = gpu.rent_usd_per_hour or 0.0
        notes.append(
            f"{p.name}: price {price:.2f} $/GPU-hour from the GPU catalog"
            if gpu.rent_usd_per_hour
            else f"{p.name}: no price_per_gpu_hour and none in the catalog: cost 0"
        )
    autoscaler = p.autoscaler.to_settings(the_plan) if p.autoscaler is not None else None
    replicas = p.replicas
    if replicas is None:
        replicas = autoscaler.min_replicas if autoscaler is not None else 1
    if autoscaler is None and replicas < 1:
        raise ServecapError(f"{where}.replicas", replicas, "a pool without an autoscaler needs at least 1 replica")
    cold = INSTANT if p.cold_start == "instant" else p.cold_start.to_spec()
    pool = Pool(
        name=p.name,
        setup=setup,
        replicas=replicas,
        gpus_per_replica=dep.num_gpus,
        price_per_gpu_hour=price,
        weights_bytes=float(the_plan.stage.weights_bytes_per_gpu * dep.num_gpus),
        cold_start=cold,
        autoscaler=autoscaler,
        mtbf_s=p.mtbf_s,
        crash_at_s=tuple(p.crash_at_s),
        role=p.role,
        kv=kv_footprint(dep.model, dep.parallelism.tp, dep.kv_dtype, gpu.hbm_bandwidth_tb_s * 1e12),
    )
    return pool, notes


def build_fleet(f: FleetFile, base_dir: Path | None = None) -> tuple[FleetSpec, list[str]]:
    pools: list[Pool] = []
    notes: list[str] = []
    for p in f.pools:
        pool, n = build_pool(p, base_dir)
        pools.append(pool)
        notes.extend(n)
    router = f.router_model()
    if router.name not in ROUTERS:
        raise ServecapError(
            "router", router.name, f"unknown router; one of {', '.join(ROUTERS)}" + did_you_mean(router.name, ROUTERS)
        )
    slo = None
    if f.slo is not None and (f.slo.ttft_ms is not None or f.slo.tpot_ms is not None):
        slo = Slo(
            ttft_s=f.slo.ttft_ms / 1e3 if f.slo.ttft_ms is not None else None,
            tpot_s=f.slo.tpot_ms / 1e3 if f.slo.tpot_ms is not None else None,
        )
    spec = FleetSpec(
        pools=tuple(pools),
        router=router.name,
        router_settings=dict(router.settings),
        scrape_interval_s=router.scrape_interval_ms / 1e3,
        on_failure=f.on_failure,
        max_retries=f.max_retries,
        slo=slo,
        timeseries_interval_s=f.timeseries_interval_s,
        gateway=f.gateway,
        kv_link=None if f.kv_link is None else f.kv_link.to_spec(),
        pd_router=_pd_router(f.pd_router),
    )
    if f.gateway is not None:
        check_pool_names(
            f.gateway,
            [p.name for p in pools],
            [p.name for p in f.gateway.providers],
            disaggregated=spec.is_disaggregated,
        )
    return spec, notes


# above this many requests a run streams into sketches unless asked for exact percentiles
STREAM_ABOVE_REQUESTS = 1_000_000


def _pd_router(m: PdRouterModel | str | None) -> PdRouterSpec | None:
    if m is None:
        return None
    if isinstance(m, str):
        prefill, decode = PD_PRESETS[m]
        return PdRouterSpec(prefill, decode)
    return PdRouterSpec(m.prefill, m.decode)


class FleetSimulateRequest(_Model):
    fleet: FleetFile
    workload: WorkloadSpec
    seed: int = 0
    # "auto": exact up to STREAM_ABOVE_REQUESTS requests, sketches above; "exact": keep every
    # request; "sketch": stream into mergeable sketches (bounded memory) whatever the size
    percentiles: Literal["auto", "exact", "sketch"] = "auto"


class FleetSimulateInput(BaseModel):
    """``fleet simulate`` asked with its files inline: a fleet file and a workload file as
    mappings (the keys the YAML files take; docs/fleet.md, docs/workload.md) and a seed. The HTTP
    API's body is this model; :meth:`request` validates the files into a
    :class:`FleetSimulateRequest` (the first problem one error naming the field)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    fleet: JsonObject
    workload: JsonObject
    seed: int = Field(default=0, ge=0, le=2**32 - 1)

    def request(self) -> FleetSimulateRequest:
        from servecap.workload import workload_from_dict

        return FleetSimulateRequest(
            fleet=fleet_from_dict(self.fleet), workload=workload_from_dict(dict(self.workload)), seed=self.seed
        )


class ReplicaOut(_Out):
    replica_id: int
    pool: str
    state: str
    requested_s: float
    ready_s: float | None
    stopped_s: float | None
    routed: int
    completed: int
    utilization: float  # share of its ready time with a request in flight ("busy", not load)
    prefix_cache_hit_rate: float | None
    billed_s: float
    load_req_s: float | None = None  # requests it completed per second of its ready time
    capacity_req_s: float | None = None  # its pool's service rate (planner: output tok/s / mean output)


@with_config(ConfigDict(extra="forbid"))
class SloTargetOut(TypedDict):
    """One percentile target of one (tenant, class) group and how the run met it (a typed
    dictionary: the response's rows stay plain mappings)."""

    group: str
    target: str
    metric: str
    percentile: float
    max_s: float
    observed_s: float | None  # None: failed requests count as infinitely slow
    share_within: float
    requests: int
    met: bool


class FleetSimulateResponse(_Out):
    summary: RunSummaryJson
    by_tenant: dict[str, RunSummaryJson]
    by_class: dict[str, RunSummaryJson]
    outcomes: dict[str, int]
    replicas: list[ReplicaOut]
    timeseries: dict[str, list[float]]
    scale_events: list[ScaleEvent]  # app/monitor_replay.py passes them on
    horizon_s: float
    gpu_hours: float
    cost_usd: float
    usd_per_million_tokens: float | None
    usd_per_user: float | None
    retried: int
    seed: int
    notes: list[str]
    slo_by_class: list[SloTargetOut] = Field(default_factory=list)  # per (tenant, class) percentile targets
    gateway: GatewayOut | None = None  # with a gateway: section
    by_pool: dict[str, RunSummaryJson] = Field(default_factory=dict)  # a streaming run of several pools
    # per replica id: its busy share of each interval of the time series
    replica_utilization: dict[str, list[float]] = Field(default_factory=dict)
    records_path: str | None = None  # where every request's record went (--records)
    pd: PdStats | None = None  # a disaggregated fleet: per-role times, transfers, links
    # per autoscaled pool: scale events, their rate after settling, min<->max cycles (app/flapping.py)
    flapping: list[PoolFlapping] = Field(default_factory=list)
    # an autoscaled run: the requests after the ramp, beside the whole run (app/warm_up.py)
    steady: SteadyWindow | None = None


class GatewayOut(_Out):
    """The gateway's counts: one outcome per request (``outcomes_by_tenant``; their sum per
    tenant is its ``arrivals``), the decisions on the way, the external providers' share, and
    the latency summary of the requests a pool served (cache hits left out)."""

    arrivals_by_tenant: dict[str, int]
    outcomes_by_tenant: dict[str, dict[str, int]]
    decisions_by_tenant: dict[str, dict[str, int]]
    provider_requests: dict[str, int]
    provider_cost_usd: float
    served_summary: RunSummaryJson | None


def _gateway_out(res: FleetResult) -> GatewayOut | None:
    g = res.gateway
    if g is None:
        return None
    return GatewayOut(
        arrivals_by_tenant=dict(g.arrivals_by_tenant),
        outcomes_by_tenant={t: dict(c) for t, c in g.outcomes_by_tenant.items()},
        decisions_by_tenant={t: dict(c) for t, c in g.decisions_by_tenant.items()},
        provider_requests=dict(g.provider_requests),
        provider_cost_usd=g.provider_cost_usd,
        served_summary=None if res.served_summary is None else RunSummaryJson.of(res.served_summary),
    )


def _load_req_s(r: ReplicaStats, horizon_s: float) -> float | None:
    if r.ready_s is None:
        return None
    span = (r.stopped_s if r.stopped_s is not None else horizon_s) - r.ready_s
    return r.completed / span if span > 0 else None


def pool_capacities(fleet: FleetFile, workload: WorkloadSpec, base_dir: Path | None = None) -> dict[str, float]:
    """Each pool's service rate per replica, as ``simulate``'s load check reads it: the planner's
    output tokens/s at its batch over the workload's mean output tokens (a P/D pool: in its role)."""

    from servecap.app.role_capacity import role_capacity_req_s

    caps = {}
    for p in fleet.pools:
        the_plan, _ = plan_pool(p, base_dir)
        caps[p.name] = role_capacity_req_s(the_plan, p.role, workload)
    return caps


def response_from_result(
    res: FleetResult, seed: int, notes: list[str], capacity_by_pool: dict[str, float] | None = None
) -> FleetSimulateResponse:
    ts = res.timeseries
    caps = capacity_by_pool or {}
    return FleetSimulateResponse(
        gateway=_gateway_out(res),
        summary=RunSummaryJson.of(res.summary),
        by_tenant={k: RunSummaryJson.of(v) for k, v in res.by_tenant.items()},
        by_class={k: RunSummaryJson.of(v) for k, v in res.by_class.items()},
        by_pool={k: RunSummaryJson.of(v) for k, v in res.by_pool.items()},
        replica_utilization={str(i): list(u) for i, u in enumerate(ts.replica_utilization)},
        outcomes=dict(res.outcomes),
        replicas=[
            ReplicaOut(
                replica_id=r.replica_id,
                pool=r.pool,
                state=r.state,
                requested_s=r.requested_s,
                ready_s=r.ready_s,
                stopped_s=r.stopped_s,
                routed=r.routed,
                completed=r.completed,
                utilization=r.utilization,
                prefix_cache_hit_rate=r.prefix_cache_hit_rate,
                billed_s=r.billed_s,
                load_req_s=_load_req_s(r, res.horizon_s),
                capacity_req_s=caps.get(r.pool),
            )
            for r in res.replicas
        ],
        timeseries={
            "time_s": list(ts.time_s),
            "arrival_rate_req_s": list(ts.arrival_rate_req_s),
            "ready": [float(x) for x in ts.ready],
            "starting": [float(x) for x in ts.starting],
            "queue_depth": [float(x) for x in ts.queue_depth],
            "running": [float(x) for x in ts.running],
            "kv_usage": list(ts.kv_usage),
            "p99_ttft_s": list(ts.p99_ttft_s),
        },
        scale_events=[ScaleEvent({"time_s": t, "pool": p, "from": a, "to": b}) for t, p, a, b in res.scale_events],
        horizon_s=res.horizon_s,
        gpu_hours=res.gpu_hours,
        cost_usd=res.cost_usd,
        usd_per_million_tokens=res.usd_per_million_tokens,
        usd_per_user=res.usd_per_user,
        retried=res.retried,
        seed=seed,
        notes=notes,
        pd=res.pd,
    )


def _rate_curve(workload: WorkloadSpec) -> Callable[[Any], Any] | None:
    """The workload's arrival rate as a function of time (None: not an open-loop rate)."""
    import numpy as np

    from servecap.workload import rate_at
    from servecap.workload.schedule_spec import ScheduleArrival
    from servecap.workload.spec import PoissonArrival

    arrival = workload.arrival
    if isinstance(arrival, ScheduleArrival):
        return lambda t: rate_at(arrival, t)
    if isinstance(arrival, PoissonArrival):
        const = arrival.rate_per_s
        return lambda t: np.full(len(t), const)
    return None


def with_predictive_floors(spec: FleetSpec, f: FleetFile, workload: WorkloadSpec, notes: list[str]) -> FleetSpec:
    """Add each pool's predictive scale-ahead floors (from the workload's rate curve) to its
    autoscaler's schedule."""
    import dataclasses

    from servecap.fleet.predictive import scale_ahead_schedule

    pools = list(spec.pools)
    for i, p in enumerate(f.pools):
        a = p.autoscaler
        if a is None or a.predictive is None:
            continue
        rate = _rate_curve(workload)
        if rate is None:
            raise ServecapError(
                f"pools.{p.name}.autoscaler.predictive", "{...}", "needs an open-loop poisson or schedule arrival"
            )
        pool = pools[i]
        assert pool.autoscaler is not None
        cs = pool.cold_start
        lead = a.predictive.lead_s
        if lead is None:
            load = pool.weights_bytes / cs.load_bandwidth_bytes_s if cs.load_bandwidth_bytes_s != float("inf") else 0.0
            lead = load + sum(ph.mean_s for _, ph in cs.phases())
        horizon = workload.duration_s or 86400.0
        floors = scale_ahead_schedule(
            rate,
            req_s_per_replica=a.predictive.req_s_per_replica,
            lead_s=lead,
            horizon_s=horizon,
            step_s=a.predictive.step_s,
            headroom=a.predictive.headroom,
        )
        cap = pool.autoscaler.max_replicas
        entries = tuple(sorted({*pool.autoscaler.schedule, *((t, min(n, cap)) for t, n in floors)}))
        pools[i] = dataclasses.replace(pool, autoscaler=dataclasses.replace(pool.autoscaler, schedule=entries))
        notes.append(f"{p.name}: predictive scale-ahead {lead:.0f} s early, {len(floors)} floor changes")
    return dataclasses.replace(spec, pools=tuple(pools))


def expected_requests(workload: WorkloadSpec) -> int | None:
    """How many requests an open-loop workload will send (None: unknown)."""
    if workload.num_requests is not None:
        return workload.num_requests
    rate = getattr(workload.arrival, "rate_per_s", None)
    if rate is not None and workload.duration_s is not None:
        return int(rate * workload.duration_s)
    return None


def use_sketches(request: FleetSimulateRequest, spec: FleetSpec, notes: list[str]) -> bool:
    """Whether the run streams into sketches (see ``FleetSimulateRequest.percentiles``); notes why."""
    from servecap.fleet.simulate import stream_refusal

    wl = request.workload
    mode = request.percentiles
    if mode == "exact":
        return False
    refusal = stream_refusal(spec, wl)
    if refusal is None and any(c.slo_targets for c in traffic_classes(wl)):
        refusal = "the classes' percentile targets are checked on every request; run it exact"
    if mode == "sketch":
        if refusal is not None:
            raise ServecapError("percentiles", "sketch", refusal)
        return True
    n = expected_requests(wl)
    if refusal is not None or n is None or n <= STREAM_ABOVE_REQUESTS:
        return False
    notes.append(
        f"{n:,} requests (above {STREAM_ABOVE_REQUESTS:,}): percentiles from mergeable sketches in bounded "
        "memory, each within 1% of the exact value at its rank; --exact keeps every request"
    )
    return True


def with_flapping(response: FleetSimulateResponse, spec: FleetSpec) -> FleetSimulateResponse:
    """The response with the flapping detector's verdict per autoscaled pool, and its warning
    in the notes (app/flapping.py)."""
    from servecap.app.flapping import detect_flapping

    bounds = {p.name: (p.autoscaler.min_replicas, p.autoscaler.max_replicas) for p in spec.pools if p.autoscaler}
    if not bounds:
        return response
    verdicts = detect_flapping(response.scale_events, response.horizon_s, bounds)
    warnings = [v.warning for v in verdicts if v.warning]
    return response.model_copy(update={"flapping": verdicts, "notes": [*response.notes, *warnings]})


def fleet_simulate(
    request: FleetSimulateRequest,
    *,
    base_dir: Path | None = None,
    progress: ProgressFn | None = None,
    limits: WorkLimits | None = None,
    records: Path | None = None,
) -> tuple[FleetSimulateResponse, FleetResult]:
    """Build the fleet, simulate it under the workload, and shape the response; the work is
    sized against ``limits`` (default: the CLI's) first. ``records``: a Parquet file to stream
    every request's record to (the run then streams). Autoscaled pools get the flapping
    detector's verdict (:func:`with_flapping`)."""
    from servecap.app.warm_up import with_warm_up

    response, res, spec = _fleet_simulate(request, base_dir=base_dir, progress=progress, limits=limits, records=records)
    return with_warm_up(with_flapping(response, spec), res, spec), res


def _fleet_simulate(
    request: FleetSimulateRequest,
    *,
    base_dir: Path | None,
    progress: ProgressFn | None,
    limits: WorkLimits | None,
    records: Path | None,
) -> tuple[FleetSimulateResponse, FleetResult, FleetSpec]:
    from servecap.app.limits import check_fleet_work, cli_limits

    limits = limits if limits is not None else cli_limits()
    check_fleet_work(request.fleet, request.workload, limits.streamed())
    spec, notes = build_fleet(request.fleet, base_dir)
    spec = with_predictive_floors(spec, request.fleet, request.workload, notes)
    wl = request.workload
    if records is not None and request.percentiles == "exact":
        raise ServecapError("records", str(records), "a records file comes with a streaming run, not --exact")
    if records is not None:  # raises where the run cannot stream
        stream = use_sketches(request.model_copy(update={"percentiles": "sketch"}), spec, notes)
    else:
        stream = use_sketches(request, spec, notes)
    check_fleet_work(request.fleet, request.workload, limits, streaming=stream)  # the exact path keeps every request
    if stream:
        res = simulate_fleet(spec, wl, request.seed, progress=progress, stream=True, records=records)
        response = response_from_result(res, request.seed, notes)
        return response.model_copy(update={"records_path": None if records is None else str(records)}), res, spec
    if not any(c.slo_targets for c in traffic_classes(wl)):
        res = simulate_fleet(spec, wl, request.seed, progress=progress)
        caps = pool_capacities(request.fleet, wl, base_dir)
        return response_from_result(res, request.seed, notes, caps), res, spec
    # the classes' own percentile targets: draw the requests here (simulate_fleet draws the same
    # ones from the same seed) to know each one's class
    import numpy as np

    from servecap.fleet.class_slo import class_slo_report
    from servecap.workload import generate_arrays

    arrays = generate_arrays(wl, np.random.default_rng(request.seed))
    res = simulate_fleet(spec, arrays, request.seed, progress=progress)
    report = class_slo_report(res.columns, arrays, wl)
    response = response_from_result(res, request.seed, notes, pool_capacities(request.fleet, wl, base_dir))
    rows = [
        SloTargetOut(
            group=t.group,
            target=t.label(),
            metric=t.metric,
            percentile=t.percentile,
            max_s=t.max_s,
            observed_s=t.observed_s if np.isfinite(t.observed_s) else None,
            share_within=t.share_within,
            requests=g.requests,
            met=t.met,
        )
        for g in report
        for t in g.targets
    ]
    return response.model_copy(update={"slo_by_class": rows}), res, spec
