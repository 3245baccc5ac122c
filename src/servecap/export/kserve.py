"""``servecap export kserve``: per pool a KServe ``InferenceService`` (``serving.kserve.io/v1beta1``)
on KServe's Hugging Face runtime with the vLLM backend, in Standard (raw Deployment) mode.

The runtime takes ``--model_name`` / ``--model_id`` and passes vLLM's engine flags through, so
the container ``args`` are the plan's vLLM flags (:mod:`servecap.export.vllm_args`) with
``--model`` given as ``--model_id``. GPUs: ``resources.limits["nvidia.com/gpu"]`` = TP x PP.

Autoscaling (``serving.kserve.io/autoscalerClass: keda``):

=============================== ==============================================================
servecap (``autoscaler:``)      ``spec.predictor``
=============================== ==============================================================
``min_replicas``/``max_replicas`` ``minReplicas`` / ``maxReplicas``
``signal``, ``target``          ``autoScaling.metrics[0].external``: prometheus ``query``,
                                ``target.type`` (``AverageValue``/``Value``) and value — the same
                                query as the KEDA target
``*_stabilization_s``,          ``autoScaling.behavior`` (HPA ``behavior``)
``max_step_*``
``interval_s``                  (none: KServe sets KEDA's polling; warning when set)
``tolerance``, ``schedule``,    (none: warning)
``predictive``
=============================== ==============================================================

A pool without an autoscaler gets ``minReplicas = maxReplicas = replicas``.
(``scaleMetric``/``scaleTarget`` only offer cpu, memory, concurrency and rps, which is why
the external metric is used.)
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from servecap.export import kube
from servecap.export.request import DEFAULT_PROMETHEUS
from servecap.export.source import ExportInput, PoolExport
from servecap.export.vllm_args import cli_args, engine_kwargs


class ModelFormat(TypedDict):
    name: str


class PredictorModel(TypedDict):
    modelFormat: ModelFormat
    args: list[str]
    resources: kube.GpuResources


class ExternalMetricSource(TypedDict):
    backend: str
    serverAddress: str
    query: str


class MetricTarget(TypedDict):
    type: kube.MetricType
    averageValue: NotRequired[str]
    value: NotRequired[str]


class ExternalMetric(TypedDict):
    metric: ExternalMetricSource
    target: MetricTarget


class MetricSpec(TypedDict):
    type: str
    external: ExternalMetric


class AutoScaling(TypedDict):
    metrics: list[MetricSpec]
    behavior: kube.HpaBehavior


class Predictor(TypedDict):
    model: PredictorModel
    minReplicas: int
    maxReplicas: int
    autoScaling: NotRequired[AutoScaling]


class InferenceServiceSpec(TypedDict):
    predictor: Predictor


class InferenceService(TypedDict):
    """``serving.kserve.io/v1beta1`` InferenceService, the parts written."""

    apiVersion: str
    kind: str
    metadata: kube.ObjectMeta
    spec: InferenceServiceSpec


def inference_services(
    inp: ExportInput, warnings: list[str], *, namespace: str | None = None, prometheus_url: str = DEFAULT_PROMETHEUS
) -> list[InferenceService]:
    kube.duplicate_models(inp, warnings)
    return [_isvc(inp, pool, warnings, namespace, prometheus_url) for pool in inp.pools]


def _isvc(
    inp: ExportInput, pool: PoolExport, warnings: list[str], namespace: str | None, prometheus_url: str
) -> InferenceService:
    kw = engine_kwargs(pool, warnings)
    model = kw.pop("model")
    args = [f"--model_name={pool.name}", f"--model_id={model}", "--backend=vllm", *cli_args(kw)]
    gpus = str(pool.gpus_per_replica)
    meta = kube.metadata(pool.name, namespace, inp.source)
    meta["annotations"]["serving.kserve.io/deploymentMode"] = "Standard"
    model_spec: PredictorModel = {
        "modelFormat": {"name": "huggingface"},
        "args": args,
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
    }
    a = pool.autoscaler
    predictor: Predictor
    if a is None:
        predictor = {"model": model_spec, "minReplicas": pool.replicas, "maxReplicas": pool.replicas}
    else:
        meta["annotations"]["serving.kserve.io/autoscalerClass"] = "keda"
        query, metric_type = kube.signal_query(a.signal, pool.model, a.window_s)
        target: MetricTarget
        if metric_type == "AverageValue":
            target = {"type": metric_type, "averageValue": kube.quantity(a.target)}
        else:
            target = {"type": metric_type, "value": kube.quantity(a.target)}
        predictor = {"model": model_spec, "minReplicas": a.min_replicas, "maxReplicas": a.max_replicas}
        predictor["autoScaling"] = {
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"backend": "prometheus", "serverAddress": prometheus_url, "query": query},
                        "target": target,
                    },
                }
            ],
            "behavior": kube.hpa_behavior(pool, warnings),
        }
        if "interval_s" in pool.explicit:
            warnings.append(
                f"{pool.name}: autoscaler.interval_s {a.interval_s:g} not written: the InferenceService has no "
                "polling interval (KServe's KEDA ScaledObject uses KEDA's 30 s)"
            )
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": meta,
        "spec": {"predictor": predictor},
    }
