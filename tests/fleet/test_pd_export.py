"""``servecap export pd``: a P/D fleet file as real disaggregated serving commands."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from servecap.app.export import export_pd as pd_config
from servecap.errors import ServecapError

EXAMPLE = Path(__file__).parents[2] / "examples" / "fleet-pd.yaml"


def test_the_example_fleet_maps_to_servers_per_role_and_both_pd_routers() -> None:
    data, warnings = pd_config(EXAMPLE)
    prefill, decode = data["servers"]["prefill"], data["servers"]["decode"]
    assert (prefill["role"], prefill["replicas"], decode["role"], decode["replicas"]) == ("prefill", 2, "decode", 2)
    vllm = shlex.split(prefill["vllm"])
    assert vllm[vllm.index("--kv-transfer-config") + 1] == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    sg = shlex.split(decode["sglang"])
    assert sg[sg.index("--disaggregation-mode") + 1] == "decode"
    assert "--disaggregation-bootstrap-port" in shlex.split(prefill["sglang"])
    router = shlex.split(data["sglang_router"])
    assert "--pd-disaggregation" in router
    assert router.count("--prefill") == 2 and router.count("--decode") == 2
    assert router[router.index("--prefill") + 1 : router.index("--prefill") + 3] == ["http://prefill-0:8000", "8998"]
    assert router[router.index("--prefill-policy") + 1] == "cache_aware"
    assert router[router.index("--decode-policy") + 1] == "power_of_two"  # least-kv has no SGLang twin
    vr = shlex.split(data["vllm_router"])
    assert vr[vr.index("--decode-policy") + 1] == "kv_aware"
    assert any("least-kv" in w for w in warnings)
    assert any(w.startswith("kv_link") for w in warnings)


def test_a_co_located_fleet_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text("pools:\n  - {model: meta-llama/Llama-3.1-8B, gpu: H100}\n")
    with pytest.raises(ServecapError, match="not a disaggregated fleet"):
        pd_config(f)
