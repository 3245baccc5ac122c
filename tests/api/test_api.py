"""The HTTP API in-process: the same JSON as the CLI, one-line errors, jobs end to end."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.cli.main import cli

CATALOG = Path(__file__).parents[2] / "src/servecap/catalog/data/models"


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(
        create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


def _cli_json(*args: str) -> dict:  # type: ignore[type-arg]
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]  # progress goes to stderr


def test_plan_equals_the_cli(client: TestClient) -> None:
    body = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192, "tpot_slo_ms": 50}
    got = client.post("/api/v1/plan", json=body)
    assert got.status_code == 200
    want = _cli_json("plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "8192", "--tpot-slo-ms", "50")
    assert got.json() == want


def test_default_plan_is_the_worked_example(client: TestClient) -> None:
    got = client.post("/api/v1/plan", json={}).json()
    assert got == _cli_json("plan")


def test_bad_input_is_one_line_naming_the_field(client: TestClient) -> None:
    r = client.post("/api/v1/plan", json={"model": "llama-9000", "gpu": "H100"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["field"] == "model" and err["message"].startswith("model='llama-9000': unknown model")
    r = client.post("/api/v1/plan", json={"gpu": "H100", "prompt_tokens": -5})
    assert r.status_code == 400 and r.json()["error"]["field"] == "prompt_tokens"
    r = client.post("/api/v1/plan", json={"gpu": "H100", "bogus": 1})
    assert r.status_code == 400 and r.json()["error"]["field"] == "bogus"
    r = client.post("/api/v1/plan", json={"model": "/etc/passwd.json"})
    assert r.status_code == 400 and "file paths are not accepted" in r.json()["error"]["message"]
    tiny = client.post("/api/v1/plan", json={"gpu": "H100", "duty_cycle": 5e-324})  # found by the fuzz test
    assert tiny.status_code == 400 and tiny.json()["error"]["field"] == "duty_cycle"
    infeasible = client.post("/api/v1/plan", json={"model": "meta-llama/Llama-3.1-70B", "gpu": "H100"})
    assert infeasible.status_code == 400 and "weights_bytes_per_gpu" in infeasible.json()["error"]["message"]


def test_catalog_search(client: TestClient) -> None:
    gpus = client.get("/api/v1/gpus", params={"q": "h100"}).json()
    assert gpus and all("H100" in g["id"] for g in gpus)
    models = client.get("/api/v1/models", params={"q": "qwen3-8b"}).json()
    assert [m["id"] for m in models] == ["Qwen/Qwen3-8B"]
    assert len(client.get("/api/v1/models").json()) == len(_cli_json_list("models"))


def _cli_json_list(*args: str) -> list:  # type: ignore[type-arg]
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]  # progress goes to stderr


def test_uploaded_config_plans_like_the_file(client: TestClient) -> None:
    config = json.loads((CATALOG / "meta-llama--Llama-3.1-8B.json").read_text())
    up = client.post("/api/v1/models/upload", json={"config": config})
    assert up.status_code == 200
    name = up.json()["model"]
    assert name.startswith("upload:")
    assert client.post("/api/v1/models/upload", json={"config": config}).json()["model"] == name  # by content
    got = client.post("/api/v1/plan", json={"model": name, "gpu": "H100", "max_model_len": 8192}).json()
    ref = client.post("/api/v1/plan", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192})
    for key in ("num_gpu_blocks", "kv_cache_tokens", "max_concurrency", "users_served"):
        assert got[key] == ref.json()[key]
    bad = client.post("/api/v1/models/upload", json={"config": {"model_type": "llama"}})
    assert bad.status_code == 400
    missing = client.post("/api/v1/plan", json={"model": "upload:0123456789abcdef", "gpu": "H100"})
    assert missing.status_code == 400 and "no such uploaded config" in missing.json()["error"]["message"]


def test_compare_equals_the_cli(client: TestClient) -> None:
    body = {"model": "meta-llama/Llama-3.1-8B", "gpus": ["H100", "L40S"], "counts": [1], "tpot_slo_ms": 50}
    got = client.post("/api/v1/compare", json=body)
    assert got.status_code == 200
    want = _cli_json(
        "compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "H100,L40S", "--counts", "1", "--tpot-slo-ms", "50"
    )
    assert got.json() == want


def _wait(client: TestClient, job_id: str, timeout_s: float = 60) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = client.get(f"/api/v1/jobs/{job_id}").json()
        if snap["state"] in ("done", "failed", "cancelled"):
            return snap  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError("job did not finish")


def test_simulate_job_matches_the_cli(client: TestClient) -> None:
    body = {
        "model": "meta-llama/Llama-3.1-8B",
        "gpu": "H100",
        "max_model_len": 8192,
        "rate": 5,
        "num_requests": 200,
        "seed": 3,
    }
    r = client.post("/api/v1/simulate", json=body)
    assert r.status_code == 202 and r.headers["location"].endswith(r.json()["id"])
    snap = _wait(client, r.json()["id"])
    assert snap["state"] == "done", snap
    want = _cli_json(
        "simulate",
        "-m",
        "meta-llama/Llama-3.1-8B",
        "-g",
        "H100",
        "-l",
        "8192",
        "--rate",
        "5",
        "--num-requests",
        "200",
        "--seed",
        "3",
    )
    result = dict(snap["result"])
    assert result.pop("timeseries")["time_s"]
    run_id = result.pop("run_id")
    assert result == want
    runs = client.get("/api/v1/runs", params={"kind": "simulated"}).json()
    assert [r["run_id"] for r in runs] == [run_id]
    assert runs[0]["summary"]["completed"] == want["completed"]
    detail = client.get(f"/api/v1/runs/{run_id}").json()
    assert detail["settings"]["rate"] == 5
    assert client.get("/api/v1/runs/nope").status_code in (400, 404)


def test_job_events_stream_ends_with_the_result(client: TestClient) -> None:
    body = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192, "rate": 5, "num_requests": 100}
    job = client.post("/api/v1/simulate", json=body).json()
    with client.stream("GET", f"/api/v1/jobs/{job['id']}/events") as stream:
        events = [line for line in stream.iter_lines() if line.startswith("event:")]
    assert events[-1] == "event: done"


def test_bad_job_input_fails_before_queueing(client: TestClient) -> None:
    r = client.post("/api/v1/simulate", json={"gpu": "H100", "num_requests": 10**9})
    assert r.status_code == 400 and r.json()["error"]["field"] == "num_requests"
    assert client.get("/api/v1/jobs/nope").status_code == 404
    failed = client.post("/api/v1/simulate", json={"model": "meta-llama/Llama-3.1-70B", "gpu": "H100", "rate": 1})
    snap = _wait(client, failed.json()["id"])
    assert snap["state"] == "failed" and "weights_bytes_per_gpu" in snap["error"]


def test_capacity_with_chat_users_refuses_a_request_count(client: TestClient) -> None:
    r = client.post("/api/v1/capacity", json={"gpu": "H100", "model": "meta-llama/Llama-3.1-8B", "num_requests": 300})
    snap = _wait(client, r.json()["id"])
    assert snap["state"] == "failed" and snap["error"].startswith("num_requests=300: capacity with chat users")


FLEET = {
    "pools": [
        {"name": "h100", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192, "replicas": 3}
    ],
    "router": "least-outstanding",
    "slo": {"ttft_ms": 1000, "tpot_ms": 50},
}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 20},
    "prompt_tokens": 1024,
    "output_tokens": 128,
    "num_requests": 600,
}


def test_fleet_simulate_job_matches_the_cli(client: TestClient, tmp_path: Path) -> None:
    r = client.post("/api/v1/fleet/simulate", json={"fleet": FLEET, "workload": WORKLOAD, "seed": 2})
    assert r.status_code == 202, r.text
    snap = _wait(client, r.json()["id"])
    assert snap["state"] == "done", snap
    (tmp_path / "fleet.json").write_text(json.dumps(FLEET))
    (tmp_path / "workload.json").write_text(json.dumps(WORKLOAD))
    want = _cli_json(
        "fleet",
        "simulate",
        "--fleet",
        str(tmp_path / "fleet.json"),
        "--workload",
        str(tmp_path / "workload.json"),
        "--seed",
        "2",
    )
    assert snap["result"] == want
    assert snap["result"]["outcomes"] == {"ok": 600}


def test_fleet_body_errors_name_the_field(client: TestClient) -> None:
    bad_router = {**FLEET, "router": "least-outstandnig"}
    r = client.post("/api/v1/fleet/simulate", json={"fleet": bad_router, "workload": WORKLOAD})
    assert r.status_code == 400 and r.json()["error"]["field"].startswith("router")
    with_path = {**FLEET, "pools": [{**FLEET["pools"][0], "calibration": "/etc/cal.json"}]}
    r = client.post("/api/v1/fleet/simulate", json={"fleet": with_path, "workload": WORKLOAD})
    assert r.status_code == 400 and "file paths are not accepted by the server" in r.json()["error"]["message"]
    huge = {**WORKLOAD, "num_requests": 10**8}
    r = client.post("/api/v1/fleet/simulate", json={"fleet": FLEET, "workload": huge})
    assert r.status_code == 400 and r.json()["error"]["field"] == "workload.num_requests"
