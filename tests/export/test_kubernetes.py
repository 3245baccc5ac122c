"""`servecap export keda|kserve`: the Deployment and Service against the Kubernetes OpenAPI schema
(kubernetes-validate, strict), the ScaledObject and InferenceService against their published
CRD schemas (schemas/README.md), the PromQL through a PromQL parser."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import promql_parser
import pytest
import yaml
from export_helpers import EXAMPLES, validate, write_fleet

from servecap.app.export import ExportOptions, export
from servecap.export.kube import quantity, signal_query

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate (the dev extra)")
K8S_VERSION = "1.33"


def _validate_all(docs: list[dict]) -> None:
    for doc in docs:
        if doc["kind"] in ("Deployment", "Service"):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        elif doc["kind"] == "ScaledObject":
            validate(doc, "keda-scaledobject-v1alpha1.json")
            promql_parser.parse(doc["spec"]["triggers"][0]["metadata"]["query"])
        else:
            assert doc["kind"] == "InferenceService"
            validate(doc, "kserve-inferenceservice-v1beta1.json.gz")
            for m in doc["spec"]["predictor"].get("autoScaling", {}).get("metrics", []):
                promql_parser.parse(m["external"]["metric"]["query"])


def test_keda_fleet(tmp_path: Path) -> None:
    res = export("keda", write_fleet(tmp_path), ExportOptions(namespace="llm"))
    _validate_all(res.data)
    assert list(yaml.safe_load_all(res.text)) == res.data
    assert [d["kind"] for d in res.data] == ["Deployment", "Service", "ScaledObject", "Deployment", "Service"]
    dep = res.data[0]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "vllm/vllm-openai:latest"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert c["args"][c["args"].index("--tensor-parallel-size") + 1] == "4"
    assert c["args"][c["args"].index("--max-num-seqs") + 1] == "256"
    assert c["args"][c["args"].index("--kv-cache-dtype") + 1] == "fp8"
    assert dep["metadata"]["name"] == "big-pool" and dep["metadata"]["namespace"] == "llm"
    assert dep["metadata"]["annotations"]["servecap/source-sha256"] in res.text.splitlines()[1]
    so = res.data[2]["spec"]
    assert so["minReplicaCount"] == 1 and so["maxReplicaCount"] == 6 and so["pollingInterval"] == 10
    assert so["cooldownPeriod"] == 600
    assert so["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 30, "policies": [{"type": "Pods", "value": 2, "periodSeconds": 10}]},
        "scaleDown": {"stabilizationWindowSeconds": 600},
    }
    trig = so["triggers"][0]
    assert trig["metricType"] == "AverageValue" and trig["metadata"]["threshold"] == "24"
    assert "vllm:num_requests_running" in trig["metadata"]["query"]
    assert res.data[3]["spec"]["replicas"] == 3
    assert "--no-enable-prefix-caching" in res.data[3]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert any("autoscaler.tolerance 0.05 not written" in w for w in res.warnings)
    assert any("max_waiting 100" in w for w in res.warnings)


def test_keda_example_and_plan(plan_file: Path) -> None:
    res = export("keda", EXAMPLES / "fleet-autoscaled.yaml")
    _validate_all(res.data)
    assert any("autoscaler.schedule not written" in w for w in res.warnings)
    res = export("keda", plan_file, ExportOptions(replicas=2))
    _validate_all(res.data)
    assert [d["kind"] for d in res.data] == ["Deployment", "Service"] and res.data[0]["spec"]["replicas"] == 2
    assert res.warnings == ()


@pytest.mark.parametrize(
    ("signal", "metric_type"),
    [
        ("num_requests_waiting", "AverageValue"),
        ("inflight", "AverageValue"),
        ("kv_usage", "Value"),
        ("p99_ttft_s", "Value"),
        ("p99_itl_s", "Value"),
    ],
)
def test_every_signal_is_valid_promql(signal: str, metric_type: str) -> None:
    query, kind = signal_query(signal, 'org/m"odel', 60.0)
    promql_parser.parse(query)
    assert kind == metric_type
    if signal == "p99_itl_s":
        assert "vllm:inter_token_latency_seconds_bucket" in query


def test_quantity() -> None:
    assert (quantity(5.0), quantity(0.8), quantity(1.5)) == ("5", "800m", "1500m")


def test_kserve_fleet(tmp_path: Path) -> None:
    res = export("kserve", write_fleet(tmp_path))
    _validate_all(res.data)
    big, small = res.data
    pred = big["spec"]["predictor"]
    assert big["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    assert (pred["minReplicas"], pred["maxReplicas"]) == (1, 6)
    assert pred["model"]["args"][:3] == [
        "--model_name=big-pool",
        "--model_id=meta-llama/Llama-3.1-70B",
        "--backend=vllm",
    ]
    assert pred["model"]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    target = pred["autoScaling"]["metrics"][0]["external"]["target"]
    assert target == {"type": "AverageValue", "averageValue": "24"}
    sp = small["spec"]["predictor"]
    assert (sp["minReplicas"], sp["maxReplicas"]) == (3, 3) and "autoScaling" not in sp
    assert any("interval_s 10 not written" in w for w in res.warnings)


def test_schemas_reject_a_typo(tmp_path: Path) -> None:
    """The vendored schemas are strict: a misspelt key fails (so a pass means something)."""
    res = export("keda", write_fleet(tmp_path))
    so = dict(res.data[2])
    so["spec"] = {**so["spec"], "pollingIntervall": 10}
    with pytest.raises(jsonschema.ValidationError):
        validate(so, "keda-scaledobject-v1alpha1.json")
    isvc = export("kserve", write_fleet(tmp_path)).data[0]
    isvc["spec"]["predictor"]["minReplica"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validate(isvc, "kserve-inferenceservice-v1beta1.json.gz")
    dep = res.data[0]
    dep["spec"]["replica"] = 1
    with pytest.raises(jsonschema.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSION, strict=True)
