"""``servecap export keda``: per pool a Kubernetes Deployment and Service running vLLM's OpenAI
server with the plan's flags, and (for an autoscaled pool) a KEDA ``ScaledObject`` on a
Prometheus trigger.

=============================== ========================================== ==================
servecap (``autoscaler:``)      KEDA ``ScaledObject``                      KEDA/HPA default
=============================== ========================================== ==================
``min_replicas``                ``minReplicaCount``                        0
``max_replicas``                ``maxReplicaCount``                        100
``signal``, ``target``          ``triggers[0]`` prometheus ``query``,      (none)
                                ``threshold``, ``metricType``
                                (:mod:`servecap.export.kube`)
``interval_s``                  ``pollingInterval``                        30
``upscale_stabilization_s``     ``advanced.horizontalPodAutoscalerConfig`` 0
                                ``.behavior.scaleUp.stabilizationWindowSeconds``
``downscale_stabilization_s``   ``...scaleDown.stabilizationWindowSeconds`` 300
                                and ``cooldownPeriod`` (the 1 -> 0 step)
``max_step_up`` / ``_down``     ``...scaleUp/scaleDown.policies`` (Pods per interval)
``tolerance``                   (cluster flag: warning)                    0.1
``schedule``, ``predictive``    (none: warning)
=============================== ========================================== ==================
"""

from __future__ import annotations

from typing import TypedDict

from servecap.export import kube
from servecap.export.request import DEFAULT_IMAGE, DEFAULT_PROMETHEUS
from servecap.export.source import ExportInput, PoolExport
from servecap.export.vllm_args import cli_args, engine_kwargs


class ScaleTargetRef(TypedDict):
    apiVersion: str
    kind: str
    name: str


class PrometheusMetadata(TypedDict):
    serverAddress: str
    query: str
    threshold: str


class Trigger(TypedDict):
    type: str
    metricType: kube.MetricType
    metadata: PrometheusMetadata


class ScaledObjectSpec(TypedDict):
    scaleTargetRef: ScaleTargetRef
    pollingInterval: int
    cooldownPeriod: int
    minReplicaCount: int
    maxReplicaCount: int
    advanced: kube.HpaAdvanced
    triggers: list[Trigger]


class ScaledObject(TypedDict):
    """``keda.sh/v1alpha1`` ScaledObject, the parts written."""

    apiVersion: str
    kind: str
    metadata: kube.ObjectMeta
    spec: ScaledObjectSpec


KedaObject = kube.Deployment | kube.Service | ScaledObject


def keda_manifests(
    inp: ExportInput,
    warnings: list[str],
    *,
    namespace: str | None = None,
    image: str = DEFAULT_IMAGE,
    prometheus_url: str = DEFAULT_PROMETHEUS,
) -> list[KedaObject]:
    """Deployment, Service and (autoscaled pools) ScaledObject, pool by pool."""
    kube.duplicate_models(inp, warnings)
    docs: list[KedaObject] = []
    for pool in inp.pools:
        args = cli_args(engine_kwargs(pool, warnings))
        docs.append(kube.deployment(inp, pool, namespace=namespace, image=image, args=args))
        docs.append(kube.service(inp, pool, namespace=namespace))
        if pool.autoscaler is not None:
            docs.append(scaled_object(inp, pool, warnings, namespace=namespace, prometheus_url=prometheus_url))
    return docs


def scaled_object(
    inp: ExportInput, pool: PoolExport, warnings: list[str], *, namespace: str | None, prometheus_url: str
) -> ScaledObject:
    a = pool.autoscaler
    assert a is not None
    query, metric_type = kube.signal_query(a.signal, pool.model, a.window_s)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": kube.metadata(pool.name, namespace, inp.source),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": pool.name},
            "pollingInterval": max(1, round(a.interval_s)),
            "cooldownPeriod": round(a.downscale_stabilization_s),
            "minReplicaCount": a.min_replicas,
            "maxReplicaCount": a.max_replicas,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": kube.hpa_behavior(pool, warnings)}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": metric_type,
                    "metadata": {"serverAddress": prometheus_url, "query": query, "threshold": f"{a.target:g}"},
                }
            ],
        },
    }
