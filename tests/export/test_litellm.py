"""`servecap export litellm`: the config as LiteLLM's proxy reads it (its ConfigYAML model) and
its Router built from model_list and router_settings (no network)."""

from __future__ import annotations

import copy
import importlib.util
import inspect
import json
from pathlib import Path

import pytest
import yaml
from export_helpers import EXAMPLES, write_fleet

from servecap.app.export import ExportOptions, export
from servecap.errors import ServecapError

# find, not import: importing litellm fetches a price table unless LITELLM_LOCAL_MODEL_COST_MAP is set first
pytestmark = [pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="needs litellm (the dev extra)")]
pytestmark.append(pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning"))
# importing litellm and its proxy's models costs seconds of CPU: one worker imports them (make test)
pytestmark.append(pytest.mark.xdist_group("litellm"))


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # its bundled price table, no fetch


def _check(config: dict) -> None:
    import litellm
    from litellm import Router
    from litellm.proxy._types import ConfigYAML

    ConfigYAML.model_validate(copy.deepcopy(config))
    settings = config["router_settings"]
    accepted = inspect.signature(Router.__init__).parameters
    assert set(settings) <= set(accepted), set(settings) - set(accepted)
    router = Router(model_list=copy.deepcopy(config["model_list"]), **settings)
    assert len(router.model_list) == len(config["model_list"])
    module_settings = dict(config.get("litellm_settings", {}))
    if "cache_params" in module_settings:  # the proxy builds litellm.Cache(**cache_params)
        litellm.Cache(**module_settings.pop("cache_params"))
    for key in module_settings:
        assert hasattr(litellm, key), key  # the proxy sets litellm.<key>


def test_fleet_with_gateway(tmp_path: Path) -> None:
    res = export("litellm", write_fleet(tmp_path))
    _check(res.data)
    assert yaml.safe_load(res.text) == res.data
    big, small = res.data["model_list"]
    assert big == {
        "model_name": "big-pool",
        "litellm_params": {"model": "hosted_vllm/meta-llama/Llama-3.1-70B", "api_base": "http://big-pool:8000/v1"},
    }
    assert small["model_name"] == "small"
    rs = res.data["router_settings"]
    assert rs == {
        "routing_strategy": "least-busy",
        "num_retries": 1,
        "fallbacks": [{"big-pool": ["small"]}],
        "max_fallbacks": 1,
    }
    assert res.data["litellm_settings"] == {"cache": True, "cache_params": {"type": "local", "ttl": 300.0}}
    comments = [line[2:] for line in res.text.splitlines() if line.startswith("#   {")]
    assert [json.loads(c) for c in comments] == [
        {"team_alias": "acme", "rpm_limit": 600, "tpm_limit": 200000, "max_parallel_requests": 20},
        {"team_alias": "beta", "rpm_limit": 60},
    ]
    w = "\n".join(res.warnings)
    assert "'openai' is not a pool" in w
    assert "burst_requests 10 has no LiteLLM counterpart" in w
    assert "POST /team/new bodies are written as comments" in w


def test_one_entry_per_replica(plan_file: Path) -> None:
    opts = ExportOptions(replicas=3, api_base="http://vllm-{replica}.vllm:8000/v1")
    res = export("litellm", plan_file, opts)
    _check(res.data)
    bases = [m["litellm_params"]["api_base"] for m in res.data["model_list"]]
    assert bases == [f"http://vllm-{i}.vllm:8000/v1" for i in range(3)]
    assert res.data["router_settings"]["routing_strategy"] == "simple-shuffle"
    assert res.warnings == ()


def test_replica_template_on_an_autoscaled_pool_is_an_error() -> None:
    with pytest.raises(ServecapError, match=r"^api_base=.*autoscaled"):
        export("litellm", EXAMPLES / "fleet-autoscaled.yaml", ExportOptions(api_base="http://x-{replica}/v1"))
    with pytest.raises(ServecapError, match=r"^api_base=.*takes only"):
        export("litellm", EXAMPLES / "fleet-simple.yaml", ExportOptions(api_base="http://{host}/v1"))


def test_rate_limit_windows_are_named_in_warnings(tmp_path: Path) -> None:
    """LiteLLM counts rpm_limit per fixed window of LITELLM_RATE_LIMIT_WINDOW_SIZE seconds: a
    token bucket is warned about, a fixed window of other than 60 s gives the environment setting."""
    fleet = {
        "pools": [{"name": "main", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 1}],
        "gateway": {
            "rate_limits": {
                "tenants": {
                    "a": {"rpm": 8, "window": "fixed", "window_s": 5},
                    "b": {"rpm": 60},
                    "c": {"tpm": 1000, "window": "fixed", "window_s": 2.5},
                }
            }
        },
    }
    res = export("litellm", write_fleet(tmp_path, json.dumps(fleet), "fleet.json"))
    w = "\n".join(res.warnings)
    assert "tenants.a.window_s 5: run the proxy with LITELLM_RATE_LIMIT_WINDOW_SIZE=5" in w
    assert "tenants.b: LiteLLM counts rpm_limit/tpm_limit per fixed 60 s window, not in a token bucket" in w
    assert "tenants.c.window_s 2.5: run the proxy with LITELLM_RATE_LIMIT_WINDOW_SIZE=2 " in w
    assert "LiteLLM takes whole seconds, not 2.5" in w
    assert "windows of 2.5, 5 s; LiteLLM has one window for every limit" in w
    bodies = [json.loads(line[4:]) for line in res.text.splitlines() if line.startswith("#   {")]
    assert {"team_alias": "a", "rpm_limit": 8} in bodies
