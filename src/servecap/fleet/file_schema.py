"""The fleet file: its schema, its reading and its building into a fleet spec.

- :class:`FleetFile` — the fleet file's schema (YAML/JSON, ``extra="forbid"``; docs/fleet.md):
  pools (model, GPU and the deployment flags ``plan`` takes, replicas or an autoscaler, price,
  cold start, failures), the router, what happens to a crashed replica's requests, SLOs;
- :func:`load_fleet_file` / :func:`fleet_from_dict` — read and validate it (the first problem
  becomes one :class:`~servecap.errors.ServecapError` naming the field);
- :func:`build_fleet` — names -> specs: each pool planned (:func:`servecap.core.plan.plan`) and
  turned into an engine setup, the result a :class:`~servecap.fleet.FleetSpec`.

The use case that runs it (``fleet simulate``) is :mod:`servecap.app.fleet_simulate`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
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
)

from servecap.core.kv_tier_settings import check_modes_need_tiers
from servecap.core.kv_transfer import kv_footprint
from servecap.errors import ServecapError, did_you_mean, from_validation_error
from servecap.fleet import ColdStart, FleetSpec, Phase, Pool
from servecap.fleet.gateway_stage import check_pool_names
from servecap.fleet.kv_tier_fields import CpuKvGib, KvLoadField, KvStoreField, RemoteKvTib, SsdKvGib
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
    check_autoscaler_settings,
)
from servecap.policy.gateway.config import GatewayConfig, gateway_from_dict
from servecap.policy.pd_router import PD_PRESETS
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS
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

if TYPE_CHECKING:
    from servecap.core.plan import Plan
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
        check_autoscaler_settings(settings)  # the policy checks its signal and options now, not mid-run
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
    # KV tiers below GPU memory (docs/kv-tiers.md): per replica, and the fleet's shared store
    cpu_kv_gib: CpuKvGib = None
    ssd_kv_gib: SsdKvGib = None
    remote_kv_tib: RemoteKvTib = None
    kv_load: KvLoadField = "layerwise"
    kv_store: KvStoreField = "on-evict"
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

    @model_validator(mode="before")
    @classmethod
    def _no_router(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping) and "router" in raw:
            raise ServecapError(
                f"pools.{raw.get('name', 'main')}.router",
                raw["router"],
                "a pool has no router of its own: the fleet's router: routes a co-located fleet (both sides of a "
                "P/D one), pd_router: {prefill, decode} names each side",
            )
        return raw

    @model_validator(mode="after")
    def _modes_need_tiers(self) -> PoolModel:
        check_modes_need_tiers(
            f"pools.{self.name}.", self.kv_load, self.kv_store, self.cpu_kv_gib, self.ssd_kv_gib, self.remote_kv_tib
        )
        return self

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
    via: Literal["direct", "store"] = Field(
        default="direct",
        description="direct: the decode side pulls the prefill's KV; store: through the pools' shared "
        "remote KV store (remote_kv_tib), the prefill putting only the blocks it lacks",
    )

    def to_spec(self) -> KvLinkSpec:
        return KvLinkSpec(
            kind=self.kind,
            bandwidth_bytes_s=None if self.bandwidth_gb_s is None else self.bandwidth_gb_s * 1e9,
            latency_s=None if self.latency_us is None else self.latency_us / 1e6,
            overhead_s=None if self.overhead_us is None else self.overhead_us / 1e6,
            scope=self.scope,
            streaming=self.streaming,
            via=self.via,
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

        if check_pd_layout(self.pools):  # a P/D fleet's roles, model, replicas and engine (one line)
            return self._pd_routing()
        return self

    def _pd_routing(self) -> FleetFile:
        """A P/D fleet's ``router:``: its name sets both sides' policy (SGLang's router: ``--policy``
        sets both sides unless ``--prefill-policy``/``--decode-policy`` name one), a ``pd_router:``
        that names other sides is refused, its settings reach both sides (a scrape interval is
        refused when the fleet is built: the P/D routers read live gauges). A mapping naming the default router is taken
        as unset: every fleet's ``model_dump`` writes it."""
        router = self.router_model()
        named = isinstance(self.router, str) or ("name" in router.model_fields_set and router.name != DEFAULT_ROUTER)
        if not named:
            return self
        if router.name not in ROUTERS:
            raise ServecapError(
                "router",
                router.name,
                f"unknown router; one of {', '.join(ROUTERS)}" + did_you_mean(router.name, ROUTERS),
            )
        if self.pd_router is None:
            return self.model_copy(update={"pd_router": PdRouterModel(prefill=router.name, decode=router.name)})
        sides = _pd_router(self.pd_router)
        assert sides is not None
        if (sides.prefill, sides.decode) != (router.name, router.name):
            raise ServecapError(
                "router",
                router.name,
                f"sets both sides of a P/D fleet, and pd_router sets prefill {sides.prefill}, decode "
                f"{sides.decode}: give one",
            )
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
        from servecap.catalog import resolve_draft_model
        from servecap.core.parallel import resolve_nodes

        speculative = None
        if p.speculative is not None or p.num_speculative_tokens is not None or p.spec_acceptance is not None:
            from servecap.core.spec_decode import spec_config_from_flags

            speculative = spec_config_from_flags(
                model, p.speculative, p.num_speculative_tokens, p.spec_acceptance, resolve_draft_model(p.draft_model)
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
    from servecap.core.kv_tier_settings import kv_tiers_of
    from servecap.sim import engine_setup_from_plan

    notes: list[str] = []
    where = f"pools.{p.name}"
    the_plan, gpu = plan_pool(p, base_dir)
    dep = the_plan.deployment
    setup = engine_setup_from_plan(
        the_plan,
        enable_prefix_caching=p.enable_prefix_caching,
        waiting_queue_limit=p.max_waiting,
        kv_tiers=kv_tiers_of(p.cpu_kv_gib, p.ssd_kv_gib, p.remote_kv_tib),
        kv_load=p.kv_load,
        kv_store=p.kv_store,
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
    if router.scrape_interval_ms > 0 and any(p.role != "both" for p in f.pools):
        raise ServecapError(
            "router.scrape_interval_ms", router.scrape_interval_ms, "a P/D fleet's routers read live gauges"
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


def _pd_router(m: PdRouterModel | str | None) -> PdRouterSpec | None:
    if m is None:
        return None
    if isinstance(m, str):
        prefill, decode = PD_PRESETS[m]
        return PdRouterSpec(prefill, decode)
    return PdRouterSpec(m.prefill, m.decode)
