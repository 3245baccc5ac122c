"""``servecap export ray-serve``: a Ray Serve config file (``serve deploy`` / ``serve run``) that
serves each pool with Ray Serve LLM (``ray.serve.llm:build_openai_app``, vLLM inside).

One application; one ``llm_configs`` entry per pool: ``engine_kwargs`` are the plan's vLLM
arguments (:mod:`servecap.export.vllm_args`); Ray Serve LLM reserves ``tensor_parallel_size x
pipeline_parallel_size`` GPUs per replica in a placement group from them, so no
``ray_actor_options.num_gpus`` is written (it would reserve them twice). The pool's
autoscaler becomes ``deployment_config.autoscaling_config``:

=============================== ================================ ===========================
servecap (``autoscaler:``)      Ray Serve ``autoscaling_config`` Ray Serve's default
=============================== ================================ ===========================
``min_replicas``                ``min_replicas``                 1
``max_replicas``                ``max_replicas``                 1
pool ``replicas``               ``initial_replicas``             ``min_replicas``
``signal: inflight``, target    ``target_ongoing_requests``      2
``signal: num_requests_waiting`` ``target_ongoing_requests`` =   (warning: Ray counts
                                plan batch + target              running + queued)
``interval_s``                  (none: warning; Ray Serve's       (continuous)
                                ``metrics_interval_s`` is deprecated)
``upscale_stabilization_s``     ``upscale_delay_s``              30
``downscale_stabilization_s``   ``downscale_delay_s``            600
``kv_usage``, ``p99_ttft_s``,   (none: warning)
``p99_itl_s``, ``tolerance``,
``max_step_*``,
``schedule``, ``predictive``
=============================== ================================ ===========================

A pool without an autoscaler gets ``num_replicas``. With ``--import-path MODULE:APP`` the pools
run the user's own vLLM application instead (one application per pool, its args ``model`` and
``engine_kwargs``), and the deployment override names ``--deployment-name`` with the same
replicas/``autoscaling_config`` and ``ray_actor_options.num_gpus`` = TP x PP. The router: ``power-of-two`` is Ray Serve's
default request router (power of two choices on queue length); ``prefix-affinity`` is Ray
Serve LLM's ``PrefixCacheAffinityRouter`` (``balance_abs_threshold`` -> ``imbalanced_threshold``,
``cache_threshold`` -> ``match_rate_threshold``); any other router has no Ray Serve
counterpart and leaves the default (warning).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from servecap.export.source import ExportInput, PoolExport, plan_int
from servecap.export.vllm_args import EngineKwargs, engine_kwargs


# ``ServeDeploySchema``'s parts that are written (keys in the order they are written).
class AutoscalingConfig(TypedDict):
    min_replicas: int
    max_replicas: int
    initial_replicas: NotRequired[int]
    target_ongoing_requests: NotRequired[float]
    upscale_delay_s: NotRequired[float]
    downscale_delay_s: NotRequired[float]


class RequestRouterConfig(TypedDict):
    request_router_class: str
    request_router_kwargs: dict[str, float | int | None]


class DeploymentConfig(TypedDict):
    num_replicas: NotRequired[int]
    autoscaling_config: NotRequired[AutoscalingConfig]
    request_router_config: NotRequired[RequestRouterConfig]


class CustomDeployment(DeploymentConfig):
    """A deployment of the user's own app: its name first, then :class:`DeploymentConfig`'s keys."""

    name: str
    ray_actor_options: NotRequired[dict[str, int]]


class ModelLoadingConfig(TypedDict):
    model_id: str
    model_source: str


class LlmConfig(TypedDict):
    model_loading_config: ModelLoadingConfig
    accelerator_type: NotRequired[str]
    deployment_config: DeploymentConfig
    engine_kwargs: EngineKwargs


class LlmArgs(TypedDict):
    llm_configs: list[LlmConfig]


class LlmApp(TypedDict):
    name: str
    route_prefix: str
    import_path: str
    args: LlmArgs


class CustomArgs(TypedDict):
    model: str
    engine_kwargs: EngineKwargs


class CustomApp(TypedDict):
    name: str
    route_prefix: str
    import_path: str
    args: CustomArgs
    deployments: list[CustomDeployment]


class RayServeConfig(TypedDict):
    applications: list[LlmApp] | list[CustomApp]


IMPORT_PATH = "ray.serve.llm:build_openai_app"
PREFIX_ROUTER = "ray.serve.llm.request_router:PrefixCacheAffinityRouter"

# Ray's accelerator type names (``ray.util.accelerators``) for the catalog's GPU ids: the id
# equals the key or starts with the key and a hyphen.
_RAY_ACCELERATORS = {
    "V100": "V100",
    "T4": "T4",
    "A10G": "A10G",
    "L4": "L4",
    "L40S": "L40S",
    "A100-40GB": "A100-40G",
    "A100-80GB": "A100-80G",
    "H100": "H100",
    "H200": "H200",
    "H20": "H20",
    "B200": "B200",
    "B300": "B300",
    "GB200": "GB200",
    "GB300": "GB300",
    "RTX-PRO-6000": "RTX-PRO-6000",
}


def ray_accelerator(gpu_id: str) -> str | None:
    key = gpu_id.upper()
    for ours, ray in _RAY_ACCELERATORS.items():
        if key == ours or key.startswith(ours + "-"):
            return ray
    return None


def ray_serve_config(
    inp: ExportInput,
    warnings: list[str],
    *,
    import_path: str | None = None,
    deployment_name: str = "VLLMDeployment",
) -> RayServeConfig:
    """The ``serve deploy`` config (``ServeDeploySchema``'s shape): Ray Serve LLM, or with
    ``import_path`` the user's own vLLM application, one per pool (:func:`custom_apps`)."""
    router = _request_router(inp, warnings)
    if import_path is not None:
        return {"applications": custom_apps(inp, warnings, router, import_path, deployment_name)}
    models = [pool.model for pool in inp.pools]
    llm_configs: list[LlmConfig] = []
    for pool in inp.pools:
        kw = engine_kwargs(pool, warnings)
        model = str(kw.pop("model"))
        model_id = model if models.count(model) == 1 else pool.name
        loading: ModelLoadingConfig = {"model_id": model_id, "model_source": model}
        accel = ray_accelerator(str(pool.plan["gpu"]))
        deployment = _deployment(pool, warnings, router)
        if accel is None:
            warnings.append(
                f"{pool.name}: GPU {pool.plan['gpu']!r} has no Ray accelerator type: accelerator_type left out"
            )
            entry: LlmConfig = {"model_loading_config": loading, "deployment_config": deployment, "engine_kwargs": kw}
        else:
            entry = {
                "model_loading_config": loading,
                "accelerator_type": accel,
                "deployment_config": deployment,
                "engine_kwargs": kw,
            }
        llm_configs.append(entry)
    app: LlmApp = {
        "name": "servecap",
        "route_prefix": "/",
        "import_path": IMPORT_PATH,
        "args": {"llm_configs": llm_configs},
    }
    return {"applications": [app]}


def custom_apps(
    inp: ExportInput, warnings: list[str], router: RequestRouterConfig | None, import_path: str, deployment_name: str
) -> list[CustomApp]:
    """One application per pool running the user's vLLM app (``import_path``, called with
    ``model`` and ``engine_kwargs`` as its args), its deployment ``deployment_name`` given the
    replicas or ``autoscaling_config`` and ``ray_actor_options.num_gpus`` = TP x PP (the actor
    holds every GPU of the replica, as vLLM's multiprocessing executor inside it needs)."""
    apps: list[CustomApp] = []
    for pool in inp.pools:
        kw = engine_kwargs(pool, warnings)
        model = str(kw.pop("model"))
        deployment: CustomDeployment = {
            "name": deployment_name,
            **_deployment(pool, warnings, router),
            "ray_actor_options": {"num_gpus": pool.gpus_per_replica},
        }
        apps.append(
            {
                "name": pool.name,
                "route_prefix": "/" if len(inp.pools) == 1 else f"/{pool.name}",
                "import_path": import_path,
                "args": {"model": model, "engine_kwargs": kw},
                "deployments": [deployment],
            }
        )
    return apps


def _deployment(pool: PoolExport, warnings: list[str], router: RequestRouterConfig | None) -> DeploymentConfig:
    deployment: DeploymentConfig = {}
    if pool.autoscaler is None:
        deployment["num_replicas"] = pool.replicas
    else:
        deployment["autoscaling_config"] = _autoscaling(pool, warnings)
    if router is not None:
        deployment["request_router_config"] = router
    return deployment


def _autoscaling(pool: PoolExport, warnings: list[str]) -> AutoscalingConfig:
    a = pool.autoscaler
    assert a is not None
    cfg: AutoscalingConfig = {"min_replicas": a.min_replicas, "max_replicas": a.max_replicas}
    if pool.replicas != a.min_replicas:
        cfg["initial_replicas"] = pool.replicas
    if a.signal == "inflight":
        cfg["target_ongoing_requests"] = a.target
    elif a.signal == "num_requests_waiting":
        batch = plan_int(pool.plan, "batch_size")
        cfg["target_ongoing_requests"] = batch + a.target
        warnings.append(
            f"{pool.name}: autoscaler.signal num_requests_waiting: Ray Serve scales on ongoing (running + queued) "
            f"requests per replica: target_ongoing_requests = the plan's batch {batch} + target {a.target:g}"
        )
    else:
        warnings.append(
            f"{pool.name}: autoscaler.signal {a.signal} (target {a.target:g}) has no Ray Serve counterpart "
            "(it scales on ongoing requests): target_ongoing_requests left at Ray's default"
        )
    cfg["upscale_delay_s"] = a.upscale_stabilization_s
    cfg["downscale_delay_s"] = a.downscale_stabilization_s
    for key, why in (
        ("interval_s", "Ray Serve decides continuously (metrics_interval_s is deprecated for environment variables)"),
        ("tolerance", "Ray Serve has no tolerance band"),
        ("max_step_up", "Ray Serve's upscaling_factor scales the step, it does not cap it"),
        ("max_step_down", "Ray Serve's downscaling_factor scales the step, it does not cap it"),
        ("schedule", "Ray Serve has no scheduled floor"),
        ("predictive", "Ray Serve has no predictive scaling"),
    ):
        if key in pool.explicit:
            warnings.append(f"{pool.name}: autoscaler.{key} not written: {why}")
    return cfg


def _request_router(inp: ExportInput, warnings: list[str]) -> RequestRouterConfig | None:
    if inp.router is None or inp.router == "power-of-two":
        return None
    if inp.router == "prefix-affinity":
        s = dict(inp.router_settings or {})
        kwargs: dict[str, float | int | None] = {}
        if "balance_abs_threshold" in s:
            v = s["balance_abs_threshold"]
            kwargs["imbalanced_threshold"] = float("inf") if v is None else v
        if "cache_threshold" in s:
            kwargs["match_rate_threshold"] = s["cache_threshold"]
        for k in sorted(set(s) - {"balance_abs_threshold", "cache_threshold"}):
            warnings.append(f"router.settings.{k} {s[k]} has no PrefixCacheAffinityRouter counterpart: not written")
        return {"request_router_class": PREFIX_ROUTER, "request_router_kwargs": kwargs}
    if len(inp.pools) > 0 and any(p.autoscaler is not None or p.replicas > 1 for p in inp.pools):
        warnings.append(
            f"router {inp.router} has no Ray Serve request router: Ray Serve's default "
            "(power of two choices on queue length) routes between replicas"
        )
    return None
