"""Kubernetes pieces shared by the KEDA and KServe targets: the vLLM Deployment and Service, the
provenance annotations, and the Prometheus query for each autoscaler signal.

Signals as PromQL over vLLM's metrics (names from :mod:`servecap.specs.vllm_metrics`, selected
by ``model_name``), and the HPA metric target type that gives servecap's own formula
(:mod:`servecap.policy.autoscalers`):

- ``num_requests_waiting``: ``sum(vllm:num_requests_waiting)``, ``AverageValue`` — the HPA
  divides the sum by the target: ``ceil(sum / target)``, servecap's rule for additive signals;
- ``inflight``: ``sum(running) + sum(waiting)``, ``AverageValue``;
- ``kv_usage``: ``avg(vllm:kv_cache_usage_perc)`` (a fraction, 1 = full), ``Value`` —
  ``ceil(current x value / target)``, servecap's rule for per-replica averages;
- ``p99_ttft_s``, ``p99_itl_s``: ``histogram_quantile(0.99, sum by (le) (rate(..._bucket[window])))``
  over ``vllm:time_to_first_token_seconds`` or ``vllm:inter_token_latency_seconds``, ``Value``.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from servecap.export.source import ExportInput, PoolExport, Source
from servecap.monitor.promql import selector
from servecap.specs import vllm_metrics as v

VLLM_PORT = 8000
ANNOTATION_SOURCE = "servecap/source"
ANNOTATION_SHA256 = "servecap/source-sha256"
MetricType = Literal["AverageValue", "Value"]

# The Kubernetes objects written, as the parts of their API schemas that are set (keys in the
# order they are written; the functional form where a key is not an identifier).
NameLabel = TypedDict("NameLabel", {"app.kubernetes.io/name": str})
Labels = TypedDict("Labels", {"app.kubernetes.io/name": str, "app.kubernetes.io/managed-by": str})
GpuQuantity = TypedDict("GpuQuantity", {"nvidia.com/gpu": str})


class ObjectMeta(TypedDict):
    name: str
    namespace: NotRequired[str]
    labels: Labels
    annotations: dict[str, str]


class GpuResources(TypedDict):
    limits: GpuQuantity
    requests: GpuQuantity


class ContainerPort(TypedDict):
    name: str
    containerPort: int


class SecretKeyRef(TypedDict):
    name: str
    key: str
    optional: bool


class EnvSource(TypedDict):
    secretKeyRef: SecretKeyRef


class EnvVar(TypedDict):
    name: str
    valueFrom: EnvSource


class HttpGet(TypedDict):
    path: str
    port: int


class Probe(TypedDict):
    httpGet: HttpGet
    periodSeconds: int


class VolumeMount(TypedDict):
    name: str
    mountPath: str


class Container(TypedDict):
    name: str
    image: str
    args: list[str]
    ports: list[ContainerPort]
    env: list[EnvVar]
    resources: GpuResources
    readinessProbe: Probe
    volumeMounts: list[VolumeMount]


class EmptyDir(TypedDict):
    medium: str


class Volume(TypedDict):
    name: str
    emptyDir: EmptyDir


class PodSpec(TypedDict):
    containers: list[Container]
    volumes: list[Volume]


class PodMeta(TypedDict):
    labels: NameLabel


class PodTemplate(TypedDict):
    metadata: PodMeta
    spec: PodSpec


class LabelSelector(TypedDict):
    matchLabels: NameLabel


class DeploymentSpec(TypedDict):
    replicas: int
    selector: LabelSelector
    template: PodTemplate


class Deployment(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: DeploymentSpec


class ServicePort(TypedDict):
    name: str
    port: int
    targetPort: int
    protocol: str


class ServiceSpec(TypedDict):
    selector: NameLabel
    ports: list[ServicePort]


class Service(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ServiceSpec


class ScalingPolicy(TypedDict):
    type: str
    value: int
    periodSeconds: int


class ScalingRules(TypedDict):
    stabilizationWindowSeconds: int
    policies: NotRequired[list[ScalingPolicy]]
    selectPolicy: NotRequired[str]


class HpaBehavior(TypedDict):
    """``autoscaling/v2`` HorizontalPodAutoscaler ``spec.behavior``."""

    scaleUp: ScalingRules
    scaleDown: ScalingRules


class HpaConfig(TypedDict):
    behavior: HpaBehavior


class HpaAdvanced(TypedDict):
    """KEDA's ``advanced`` block (ScaledObject spec, and the production-stack chart's ``keda``)."""

    horizontalPodAutoscalerConfig: HpaConfig


def signal_query(signal: str, model: str, window_s: float) -> tuple[str, MetricType]:
    sel = selector(model)
    waiting = f"sum({v.NUM_REQUESTS_WAITING.name}{sel})"
    if signal == "num_requests_waiting":
        return waiting, "AverageValue"
    if signal == "inflight":
        return f"sum({v.NUM_REQUESTS_RUNNING.name}{sel}) + {waiting}", "AverageValue"
    if signal == "kv_usage":
        return f"avg({v.KV_CACHE_USAGE_PERC.name}{sel})", "Value"
    window = f"{max(1, round(window_s))}s"
    hist = (v.INTER_TOKEN_LATENCY if signal == "p99_itl_s" else v.TIME_TO_FIRST_TOKEN).name
    return f"histogram_quantile(0.99, sum by (le) (rate({hist}_bucket{sel}[{window}])))", "Value"


def quantity(x: float) -> str:
    """A Kubernetes quantity for a metric target: milli-units when not whole (``0.8`` -> ``800m``)."""
    if float(x).is_integer():
        return str(int(x))
    return f"{round(x * 1000)}m"


def metadata(name: str, namespace: str | None, source: Source) -> ObjectMeta:
    labels: Labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "servecap"}
    annotations = {ANNOTATION_SOURCE: source.path, ANNOTATION_SHA256: source.sha256}
    if namespace is None:
        return {"name": name, "labels": labels, "annotations": annotations}
    return {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}


def container(pool: PoolExport, image: str, args: list[str]) -> Container:
    """The vLLM container: OpenAI server image, the plan's flags, one GPU per TP x PP rank."""
    gpus = str(pool.gpus_per_replica)
    return {
        "name": "vllm",
        "image": image,
        "args": args,
        "ports": [{"name": "http", "containerPort": VLLM_PORT}],
        "env": [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}},
            }
        ],
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        "readinessProbe": {"httpGet": {"path": "/health", "port": VLLM_PORT}, "periodSeconds": 5},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }


def deployment(inp: ExportInput, pool: PoolExport, *, namespace: str | None, image: str, args: list[str]) -> Deployment:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(pool.name, namespace, inp.source),
        "spec": {
            "replicas": pool.replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": pool.name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": pool.name}},
                "spec": {
                    "containers": [container(pool, image, args)],
                    # NCCL between TP ranks needs more shared memory than the 64 MiB default
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                },
            },
        },
    }


def service(inp: ExportInput, pool: PoolExport, *, namespace: str | None) -> Service:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(pool.name, namespace, inp.source),
        "spec": {
            "selector": {"app.kubernetes.io/name": pool.name},
            "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": VLLM_PORT, "protocol": "TCP"}],
        },
    }


def scale_ahead_offer(pool: PoolExport) -> str:
    """What a pool that scales ahead of its curve loses on a target that only reacts, and what
    the target can do instead: the plan's own reactive-only lever row (from ``fleet plan
    --json``), then a cron trigger raising the floor before the ramp, or a minimum at the
    highest floor the schedule holds (at that many replicas' rent around the clock)."""
    a = pool.autoscaler
    assert a is not None
    floor = max([n for _, n in a.schedule] + [pool.peak_replicas or a.min_replicas])
    cost = (
        f"; {pool.scale_ahead_cost}"
        if pool.scale_ahead_cost
        else (
            "; reactive scaling alone can miss the SLOs on the ramp (the `fleet plan` lever row 'scale-ahead' says by "
            "how much)"
        )
    )
    held = pool.scale_ahead_cost is not None and "meets the SLOs" in pool.scale_ahead_cost
    instead = "Reactive scaling alone holds the SLOs here; to scale ahead anyway:" if held else "Instead:"
    return (
        f"{cost}. {instead} a KEDA `cron` trigger (start/end in your traffic's wall-clock time, desiredReplicas "
        f"{floor}) beside the Prometheus one, raising the floor before the ramp; or minReplicaCount {floor} "
        f"(the highest floor the plan holds, all day: {floor - a.min_replicas} more replica(s) than min_replicas "
        f"{a.min_replicas} at night)"
    )


def hpa_behavior(pool: PoolExport, warnings: list[str]) -> HpaBehavior:
    """HPA ``behavior`` from the stabilisation windows and step limits (``autoscaling/v2``)."""
    a = pool.autoscaler
    assert a is not None
    period = max(1, round(a.interval_s))
    up: ScalingRules = {"stabilizationWindowSeconds": round(a.upscale_stabilization_s)}
    down: ScalingRules = {"stabilizationWindowSeconds": round(a.downscale_stabilization_s)}
    opts = dict(a.options) if a.policy == "target-tracking" else {}
    pct, pods = int(opts.get("scale_up_percent", 0)), int(opts.get("scale_up_pods", 0))
    if pct > 0 or pods > 0:  # HPA's scale-up policies, the larger applying (its default: 100% and 4 pods)
        rules: list[ScalingPolicy] = []
        if pct > 0:
            rules.append({"type": "Percent", "value": pct, "periodSeconds": period})
        if pods > 0:
            rules.append({"type": "Pods", "value": pods, "periodSeconds": period})
        up["policies"] = rules
        up["selectPolicy"] = "Max"
    if "max_step_up" in pool.explicit:
        up["policies"] = [{"type": "Pods", "value": a.max_step_up, "periodSeconds": period}]
        up.pop("selectPolicy", None)
    if "max_step_down" in pool.explicit:
        down["policies"] = [{"type": "Pods", "value": a.max_step_down, "periodSeconds": period}]
    if "tolerance" in pool.explicit:
        warnings.append(
            f"{pool.name}: autoscaler.tolerance {a.tolerance:g} not written: the HPA's tolerance is the "
            "cluster's --horizontal-pod-autoscaler-tolerance (default 0.1), or behavior.*.tolerance "
            "behind the HPAConfigurableTolerance feature gate"
        )
    for key, why in (
        ("schedule", "its times are relative to the simulation start; use a KEDA cron trigger with wall-clock times"),
        ("predictive", "KEDA scales on observed metrics only"),
    ):
        if key in pool.explicit:
            warnings.append(f"{pool.name}: autoscaler.{key} not written: {why}" + scale_ahead_offer(pool))
    return {"scaleUp": up, "scaleDown": down}


def duplicate_models(inp: ExportInput, warnings: list[str]) -> None:
    models = [p.model for p in inp.pools]
    for m in sorted({m for m in models if models.count(m) > 1}):
        warnings.append(
            f"pools serving {m!r} share its model_name label: their autoscaler queries see each other's "
            "replicas (give each pool its own --served-model-name to separate them)"
        )
