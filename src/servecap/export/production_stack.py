"""``servecap export production-stack``: Helm values for vLLM's production-stack chart
(``vllm-stack``; written against chart 0.1.12's ``values.schema.json``).

Each pool is a ``servingEngineSpec.modelSpec`` entry: ``vllmConfig`` carries the flags the chart
knows (``maxModelLen``, ``tensorParallelSize``, ``maxNumSeqs``, ``gpuMemoryUtilization``,
``enablePrefixCaching``) and ``vllmConfig.extraArgs`` the rest of the plan's vLLM flags;
``resources`` asks for TP x PP GPUs (CPU and memory are left to the cluster's defaults: the chart
requires ``requestCPU``/``requestMemory`` only when ``resources`` is absent).

An autoscaled pool gets the chart's ``keda`` block: ``minReplicaCount``, ``maxReplicaCount``,
``pollingInterval`` (``interval_s``), ``cooldownPeriod`` (``downscale_stabilization_s``) and the
HPA ``behavior`` under ``advanced.horizontalPodAutoscalerConfig``. The trigger is the chart's
own: ``vllm:num_requests_waiting`` with threshold 5 — chart 0.1.12 types ``keda.triggers`` as
one object in its schema while its template needs a list, so no other trigger can be written;
another signal or target is named in a warning (``servecap export keda`` writes any of them).

The router (``routerSpec.routingLogic``):

=================== ================ =========================================================
servecap            production-stack notes
=================== ================ =========================================================
``round-robin``     ``roundrobin``
``session``         ``session``      ``sessionKey`` from ``--session-key`` (the request header)
``prefix-affinity`` ``prefixaware``  the router's own prefix matching (no balance thresholds:
                                     warning for the settings)
others              ``roundrobin``   warning: no counterpart (``kvaware`` needs LMCache and is
                                     not ``least-kv``)
=================== ================ =========================================================

``router.scrape_interval_ms`` becomes ``engineScrapeInterval`` (whole seconds, at least 1).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from servecap.export.kube import HpaAdvanced, hpa_behavior
from servecap.export.source import ExportInput, PoolExport
from servecap.export.vllm_args import EngineValue, cli_args, engine_kwargs

# The chart's values that are written (keys in the order they are written).
GpuCount = TypedDict("GpuCount", {"nvidia.com/gpu": int})


class GpuCounts(TypedDict):
    limits: GpuCount
    requests: GpuCount


class KedaValues(TypedDict):
    enabled: bool
    minReplicaCount: int
    maxReplicaCount: int
    pollingInterval: int
    cooldownPeriod: int
    advanced: HpaAdvanced


class ModelSpec(TypedDict):
    name: str
    repository: str
    tag: str
    modelURL: str
    replicaCount: int
    requestGPU: int
    resources: GpuCounts
    vllmConfig: dict[str, EngineValue | list[str]]
    keda: NotRequired[KedaValues]


class ServingEngineSpec(TypedDict):
    modelSpec: list[ModelSpec]


class RouterSpec(TypedDict):
    routingLogic: str
    sessionKey: NotRequired[str]
    engineScrapeInterval: NotRequired[int]


class StackValues(TypedDict):
    servingEngineSpec: ServingEngineSpec
    routerSpec: RouterSpec


CHART_VERSION = "0.1.12"
_CHART_KEYS = {
    "max_model_len": "maxModelLen",
    "tensor_parallel_size": "tensorParallelSize",
    "max_num_seqs": "maxNumSeqs",
    "gpu_memory_utilization": "gpuMemoryUtilization",
    "enable_prefix_caching": "enablePrefixCaching",
}
_ROUTING = {"round-robin": "roundrobin", "session": "session", "prefix-affinity": "prefixaware"}
CHART_TRIGGER = ("num_requests_waiting", 5.0)


def stack_values(
    inp: ExportInput,
    warnings: list[str],
    *,
    repository: str = "vllm/vllm-openai",
    tag: str = "latest",
    session_key: str = "x-user-id",
) -> StackValues:
    specs = [_model_spec(pool, warnings, repository, tag) for pool in inp.pools]
    router: RouterSpec = {"routingLogic": _routing(inp, warnings)}
    if router["routingLogic"] == "session":
        router["sessionKey"] = session_key
    if inp.scrape_interval_ms > 0:
        router["engineScrapeInterval"] = max(1, round(inp.scrape_interval_ms / 1000))
    return {"servingEngineSpec": {"modelSpec": specs}, "routerSpec": router}


def _model_spec(pool: PoolExport, warnings: list[str], repository: str, tag: str) -> ModelSpec:
    kw = engine_kwargs(pool, warnings)
    model = str(kw.pop("model"))
    vllm_config: dict[str, EngineValue | list[str]] = {_CHART_KEYS[k]: kw.pop(k) for k in list(kw) if k in _CHART_KEYS}
    extra = cli_args(kw)
    if extra:
        vllm_config["extraArgs"] = extra
    gpus = pool.gpus_per_replica
    spec: ModelSpec = {
        "name": pool.name,
        "repository": repository,
        "tag": tag,
        "modelURL": model,
        "replicaCount": pool.replicas,
        "requestGPU": gpus,
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        "vllmConfig": vllm_config,
    }
    a = pool.autoscaler
    if a is not None:
        spec["keda"] = {
            "enabled": True,
            "minReplicaCount": a.min_replicas,
            "maxReplicaCount": a.max_replicas,
            "pollingInterval": max(1, round(a.interval_s)),
            "cooldownPeriod": round(a.downscale_stabilization_s),
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(pool, warnings)}},
        }
        if (a.signal, a.target) != CHART_TRIGGER:
            warnings.append(
                f"{pool.name}: autoscaler signal {a.signal} target {a.target:g} not written: chart "
                f"{CHART_VERSION} only takes its default trigger (num_requests_waiting, threshold 5); "
                "use `servecap export keda` for this trigger"
            )
    return spec


def _routing(inp: ExportInput, warnings: list[str]) -> str:
    if inp.router is None:
        return "roundrobin"
    logic = _ROUTING.get(inp.router)
    if logic is None:
        warnings.append(
            f"router {inp.router} has no production-stack routingLogic: roundrobin written "
            "(the stack offers roundrobin, session, prefixaware, kvaware with LMCache, disaggregated prefill)"
        )
        return "roundrobin"
    for k in sorted(inp.router_settings or {}):
        warnings.append(f"router.settings.{k} has no production-stack counterpart ({logic}): not written")
    return logic
