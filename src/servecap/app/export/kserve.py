"""``servecap export kserve``: per pool a KServe ``InferenceService`` (``serving.kserve.io/v1beta1``)
on KServe's Hugging Face runtime with the vLLM backend, in Standard (raw Deployment) mode.

The runtime takes ``--model_name`` / ``--model_id`` and passes vLLM's engine flags through, so
the container ``args`` are the plan's vLLM flags (:mod:`servecap.app.export.vllm_args`) with
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

from typing import Any

from servecap.app.export import kube
from servecap.app.export.keda import DEFAULT_PROMETHEUS
from servecap.app.export.source import ExportInput, PoolExport
from servecap.app.export.vllm_args import cli_args, engine_kwargs


def inference_services(
    inp: ExportInput, warnings: list[str], *, namespace: str | None = None, prometheus_url: str = DEFAULT_PROMETHEUS
) -> list[dict[str, Any]]:
    kube.duplicate_models(inp, warnings)
    return [_isvc(inp, pool, warnings, namespace, prometheus_url) for pool in inp.pools]


def _isvc(
    inp: ExportInput, pool: PoolExport, warnings: list[str], namespace: str | None, prometheus_url: str
) -> dict[str, Any]:
    kw = engine_kwargs(pool, warnings)
    model = kw.pop("model")
    args = [f"--model_name={pool.name}", f"--model_id={model}", "--backend=vllm", *cli_args(kw)]
    gpus = str(pool.gpus_per_replica)
    meta = kube.metadata(pool.name, namespace, inp.source)
    meta["annotations"]["serving.kserve.io/deploymentMode"] = "Standard"
    predictor: dict[str, Any] = {
        "model": {
            "modelFormat": {"name": "huggingface"},
            "args": args,
            "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        }
    }
    a = pool.autoscaler
    if a is None:
        predictor["minReplicas"] = pool.replicas
        predictor["maxReplicas"] = pool.replicas
    else:
        meta["annotations"]["serving.kserve.io/autoscalerClass"] = "keda"
        query, metric_type = kube.signal_query(a.signal, pool.model, a.window_s)
        target_key = "averageValue" if metric_type == "AverageValue" else "value"
        predictor["minReplicas"] = a.min_replicas
        predictor["maxReplicas"] = a.max_replicas
        predictor["autoScaling"] = {
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"backend": "prometheus", "serverAddress": prometheus_url, "query": query},
                        "target": {"type": metric_type, target_key: kube.quantity(a.target)},
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
