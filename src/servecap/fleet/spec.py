"""What a fleet is: pools of identical replicas, a router, failures, SLOs (frozen values).

A pool's replicas are engines of one :class:`~servecap.sim.setup.EngineSetup` (a model on a GPU
with the deployment flags ``plan`` takes); the fleet file (:mod:`servecap.fleet.file_schema`) builds
these from names. Times are seconds on the simulated clock, money in dollars.

Cold start (:class:`ColdStart`): a replica asked for at ``t`` is ready at
``t + provisioning + image pull + weights_bytes / load_bandwidth + compile + warm-up``; each
phase but the weight load is a log-normal with the given mean and coefficient of variation
(0: fixed). It costs money from ``t`` (a GPU node is billed once it is provisioned for you).
Defaults (docs/fleet.md gives their sources): provisioning 60 s, image pull 45 s, weights read
at 2 GB/s, torch.compile + CUDA-graph capture 30 s, warm-up 10 s — a Llama-3.1-8B replica
(16 GB) in about 2.5 min, a 70B one in BF16 (141 GB) in about 3.5 min, inside the 3-6 min the
issue's reports give for 70B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from servecap.core.kv_transfer import KvFootprint
from servecap.errors import ServecapError
from servecap.fleet.pd_spec import KvLinkSpec, PdRouterSpec, check_roles
from servecap.policy.autoscalers import AutoscalerSettings, autoscaler_class
from servecap.policy.gateway.config import GatewayConfig
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS
from servecap.sim.setup import EngineSetup
from servecap.specs.perf import Slo

OnFailure = Literal["retry", "fail"]


@dataclass(frozen=True, slots=True)
class Phase:
    """One cold-start phase: a log-normal duration with mean ``mean_s`` and coefficient of
    variation ``cv`` (sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2 / 2)."""

    mean_s: float
    cv: float = 0.0

    def __post_init__(self) -> None:
        if self.mean_s < 0 or self.cv < 0 or not math.isfinite(self.mean_s):
            raise ServecapError("cold_start", (self.mean_s, self.cv), "phase mean_s and cv must be >= 0")

    def log_params(self) -> tuple[float, float]:
        sigma2 = math.log1p(self.cv * self.cv)
        return math.log(self.mean_s) - sigma2 / 2, math.sqrt(sigma2)


@dataclass(frozen=True, slots=True)
class ColdStart:
    provisioning: Phase = Phase(60.0, 0.3)
    image_pull: Phase = Phase(45.0, 0.3)
    load_bandwidth_bytes_s: float = 2e9
    compile: Phase = Phase(30.0, 0.2)
    warmup: Phase = Phase(10.0, 0.2)

    def __post_init__(self) -> None:
        if not self.load_bandwidth_bytes_s > 0:
            raise ServecapError("cold_start.load_bandwidth_bytes_s", self.load_bandwidth_bytes_s, "must be > 0")

    def phases(self) -> tuple[tuple[str, Phase], ...]:
        return (
            ("provisioning", self.provisioning),
            ("image_pull", self.image_pull),
            ("compile", self.compile),
            ("warmup", self.warmup),
        )


INSTANT = ColdStart(Phase(0.0), Phase(0.0), float("inf"), Phase(0.0), Phase(0.0))


@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    setup: EngineSetup
    replicas: int = 1  # at the start (ready at t = 0); the autoscaler's initial count
    gpus_per_replica: int = 1
    price_per_gpu_hour: float = 0.0
    weights_bytes: float = 0.0  # per replica, read at cold start
    cold_start: ColdStart = field(default_factory=ColdStart)
    autoscaler: AutoscalerSettings | None = None
    mtbf_s: float | None = None  # mean time between failures of one replica (exponential)
    crash_at_s: tuple[float, ...] = ()  # a ready replica of the pool crashes at each time
    role: str = "both"  # both | prefill | decode (servecap.fleet.pd_spec)
    kv: KvFootprint | None = None  # what its KV weighs per token (a P/D fleet's transfers)

    def __post_init__(self) -> None:
        if not self.name:
            raise ServecapError("pool.name", self.name, "must not be empty")
        if self.autoscaler is not None:
            autoscaler_class(self.autoscaler.policy)  # a registered policy, or "did you mean"
        lo = self.autoscaler.min_replicas if self.autoscaler is not None else 1
        if self.replicas < lo:
            raise ServecapError(f"pools.{self.name}.replicas", self.replicas, f"must be >= {lo}")
        if self.autoscaler is not None and self.replicas > self.autoscaler.max_replicas:
            raise ServecapError(
                f"pools.{self.name}.replicas", self.replicas, f"exceeds max_replicas {self.autoscaler.max_replicas}"
            )
        if self.gpus_per_replica < 1:
            raise ServecapError(f"pools.{self.name}.gpus_per_replica", self.gpus_per_replica, "must be >= 1")
        if self.price_per_gpu_hour < 0:
            raise ServecapError(f"pools.{self.name}.price_per_gpu_hour", self.price_per_gpu_hour, "must be >= 0")
        if self.mtbf_s is not None and not self.mtbf_s > 0:
            raise ServecapError(f"pools.{self.name}.mtbf_s", self.mtbf_s, "must be > 0")
        if any(t < 0 for t in self.crash_at_s):
            raise ServecapError(f"pools.{self.name}.crash_at_s", self.crash_at_s, "times must be >= 0")


@dataclass(frozen=True, slots=True)
class FleetSpec:
    pools: tuple[Pool, ...]
    router: str = DEFAULT_ROUTER
    router_settings: dict[str, float | int | None] = field(default_factory=dict)
    scrape_interval_s: float = 0.0  # the router reads gauges as last scraped (0: exact)
    on_failure: OnFailure = "retry"  # in-flight requests of a crashed replica
    max_retries: int = 2
    slo: Slo | None = None
    timeseries_interval_s: float | None = None  # None: 400 samples over the arrivals
    ttft_window_s: float = 60.0  # rolling p99 TTFT of the time series
    gateway: GatewayConfig | None = None  # the gateway stage in front of the router (docs/gateway.md)
    kv_link: KvLinkSpec | None = None  # a P/D fleet's link (default: InfiniBand, per GPU)
    pd_router: PdRouterSpec | None = None  # a P/D fleet's router (default: prefix-affinity / least-kv)

    def __post_init__(self) -> None:
        if not self.pools:
            raise ServecapError("pools", [], "a fleet needs at least one pool")
        if check_roles([p.role for p in self.pools]) and self.scrape_interval_s > 0:
            raise ServecapError(
                "scrape_interval_s", self.scrape_interval_s, "a disaggregated fleet's routers read live gauges"
            )
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ServecapError("pools", names, "pool names must be unique")
        if self.router not in ROUTERS:
            from servecap.errors import did_you_mean

            raise ServecapError(
                "router", self.router, f"one of {', '.join(ROUTERS)}" + did_you_mean(self.router, ROUTERS)
            )
        if self.scrape_interval_s < 0:
            raise ServecapError("scrape_interval_s", self.scrape_interval_s, "must be >= 0")
        if self.on_failure not in ("retry", "fail"):
            raise ServecapError("on_failure", self.on_failure, "one of retry, fail")
        if self.max_retries < 0:
            raise ServecapError("max_retries", self.max_retries, "must be >= 0")
        if self.timeseries_interval_s is not None and not self.timeseries_interval_s > 0:
            raise ServecapError("timeseries_interval_s", self.timeseries_interval_s, "must be > 0")
        if not self.ttft_window_s > 0:
            raise ServecapError("ttft_window_s", self.ttft_window_s, "must be > 0")

    @property
    def is_disaggregated(self) -> bool:
        """Prefill and decode pools (servecap.fleet.pd) rather than co-located replicas."""
        return any(p.role != "both" for p in self.pools)
