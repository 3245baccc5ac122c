"""`servecap export production-stack` against the chart's values.schema.json (vllm-stack 0.1.12)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml
from export_helpers import EXAMPLES, validate, write_fleet

from servecap.app.export import ExportOptions, export

SCHEMA = "production-stack-values.schema.json"


def test_fleet_values(tmp_path: Path) -> None:
    res = export("production-stack", write_fleet(tmp_path), ExportOptions(image="lmcache/vllm-openai:v0.3"))
    validate(res.data, SCHEMA)
    assert yaml.safe_load(res.text) == res.data
    big, small = res.data["servingEngineSpec"]["modelSpec"]
    assert (big["repository"], big["tag"]) == ("lmcache/vllm-openai", "v0.3")
    assert big["vllmConfig"]["tensorParallelSize"] == 4 and big["vllmConfig"]["maxNumSeqs"] == 256
    assert big["vllmConfig"]["extraArgs"][:2] == ["--max-num-batched-tokens", "8192"]
    assert big["requestGPU"] == 4 and big["resources"]["limits"]["nvidia.com/gpu"] == 4
    keda = big["keda"]
    assert (keda["minReplicaCount"], keda["maxReplicaCount"], keda["pollingInterval"], keda["cooldownPeriod"]) == (
        1,
        6,
        10,
        600,
    )
    assert small["replicaCount"] == 3 and "keda" not in small
    assert small["vllmConfig"]["enablePrefixCaching"] is False
    assert res.data["routerSpec"] == {"routingLogic": "roundrobin"}
    w = "\n".join(res.warnings)
    assert "router least-outstanding has no production-stack routingLogic" in w
    assert "signal inflight target 24 not written" in w


@pytest.mark.parametrize(
    ("router", "logic"), [("session", "session"), ("prefix-affinity", "prefixaware"), ("round-robin", "roundrobin")]
)
def test_router_mapping(tmp_path: Path, router: str, logic: str) -> None:
    text = (EXAMPLES / "fleet-simple.yaml").read_text().replace("router: least-outstanding", f"router: {router}")
    res = export("production-stack", write_fleet(tmp_path, text))
    validate(res.data, SCHEMA)
    assert res.data["routerSpec"]["routingLogic"] == logic
    assert ("sessionKey" in res.data["routerSpec"]) == (router == "session")
    assert res.warnings == ()


def test_example_with_the_charts_trigger() -> None:
    res = export("production-stack", EXAMPLES / "fleet-autoscaled.yaml")
    validate(res.data, SCHEMA)
    assert res.data["routerSpec"] == {"routingLogic": "prefixaware", "engineScrapeInterval": 5}
    assert not any("signal" in w for w in res.warnings)  # waiting requests, target 5: the chart's own trigger


def test_schema_rejects_a_typo(tmp_path: Path) -> None:
    data = export("production-stack", write_fleet(tmp_path)).data
    data["routerSpec"]["routingLogic"] = "least-busy"
    with pytest.raises(jsonschema.ValidationError):
        validate(data, SCHEMA)
