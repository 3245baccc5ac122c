"""The API's documented job limits (200,000 requests, 100,000 users) hold against every way of
asking for more: a rate or users over a long duration, replicas, layers, candidates. Each is
refused before a job starts, in one line naming the number, the limit and the flag that raises
it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app

MODEL = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 2},
    "num_requests": 50,
    "prompt_tokens": 200,
    "output_tokens": 20,
}


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(
        create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


def _refused(client: TestClient, route: str, body: dict[str, Any], field: str, number: str, flag: str) -> str:
    started = time.perf_counter()
    r = client.post(route, json=body)
    elapsed = time.perf_counter() - started
    assert r.status_code == 400, (route, r.status_code, r.text)
    err = r.json()["error"]
    assert err["field"] == field, err
    assert number.replace(",", "") in err["message"].replace(",", ""), err["message"]
    assert f"servecap serve {flag}" in err["message"], err["message"]
    assert "\n" not in err["message"]
    assert elapsed < 2.0  # refused before any work
    assert client.get("/api/v1/jobs").json() == []  # and no job was queued
    return str(err["message"])


def test_a_billion_request_job_is_refused_before_work(client: TestClient) -> None:
    # past the workload schema's own ceiling (100M requests in one workload) the workload is
    # refused as it is built, before the job limits are read: a one-line 400 all the same
    started = time.perf_counter()
    r = client.post("/api/v1/simulate", json={**MODEL, "rate": 20_000, "duration_s": 50_000})
    assert r.status_code == 400 and time.perf_counter() - started < 2.0, r.text
    err = r.json()["error"]
    assert "1e+09 requests" in err["message"] and "\n" not in err["message"], err
    assert client.get("/api/v1/jobs").json() == []
    # below it, the job limit names the size and the flag that raises it
    body = {**MODEL, "rate": 1_000, "duration_s": 50_000}
    message = _refused(client, "/api/v1/simulate", body, "duration_s", "50,000,000", "--max-requests")
    assert "200,000" in message


def test_rate_times_a_day_is_refused(client: TestClient) -> None:
    body = {**MODEL, "rate": 1_000, "duration_s": 86_400}
    _refused(client, "/api/v1/simulate", body, "duration_s", "86,400,000", "--max-requests")


def test_users_with_no_think_time_over_a_day_are_refused(client: TestClient) -> None:
    body = {**MODEL, "users": 100_000, "think_time_s": 0, "duration_s": 86_400}
    _refused(client, "/api/v1/simulate", body, "users", "8,640,000,000", "--max-requests")


def test_ten_million_replicas_are_refused(client: TestClient) -> None:
    fleet = {"pools": [{"name": "a", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 10_000_000}]}
    body = {"fleet": fleet, "workload": WORKLOAD}
    # past the fleet file's own ceiling (10,000 replicas a pool) the schema refuses it, naming the pool
    r = client.post("/api/v1/fleet/simulate", json=body)
    assert r.status_code == 400 and r.json()["error"]["field"] == "fleet.pools[0].replicas", r.text
    # below it, the job limit counts every pool and names the flag that raises it
    fleet["pools"][0]["replicas"] = 5_000
    _refused(client, "/api/v1/fleet/simulate", body, "fleet.pools.replicas", "5,000", "--max-replicas")
    long = {**WORKLOAD, "num_requests": None, "duration_s": 86_400, "arrival": {"kind": "poisson", "rate_per_s": 1}}
    fleet["pools"][0]["replicas"] = 4000
    body = {"fleet": fleet, "workload": {k: v for k, v in long.items() if v is not None}}
    _refused(client, "/api/v1/fleet/simulate", body, "fleet.pools.replicas", "345,600,000", "--max-replica-s")


def test_a_config_with_three_million_layers_is_refused_before_parsing(client: TestClient) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 3_000_000,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
    }
    started = time.perf_counter()
    r = client.post("/api/v1/models/upload", json={"config": config})
    assert time.perf_counter() - started < 1.0
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["field"] == "config.num_hidden_layers" and err["value"] == 3_000_000
    assert "servecap serve --max-layers" in err["message"]


def test_fleet_plan_candidates_and_replicas_are_bounded(client: TestClient) -> None:
    plan = {"model": "meta-llama/Llama-3.1-8B", "candidates": [{"gpu": "H100"}] * 40, "traffic": {"peak_rps": 5}}
    _refused(client, "/api/v1/fleet/plan", {"plan": plan}, "plan.candidates", "40", "--max-candidates")
    plan = {**plan, "candidates": [{"gpu": "H100"}], "max_window_requests": 10**7}
    _refused(client, "/api/v1/fleet/plan", {"plan": plan}, "plan.max_window_requests", "10,000,000", "--max-requests")


def test_the_limits_are_the_servers_settings(tmp_path: Path) -> None:
    from dataclasses import replace

    from servecap.app.limits import API_LIMITS

    settings = ServeSettings(data_dir=tmp_path, limits=replace(API_LIMITS, max_requests=1_000))
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        body = {**MODEL, "rate": 10, "duration_s": 200}
        _refused(c, "/api/v1/simulate", body, "duration_s", "2,000", "--max-requests")
