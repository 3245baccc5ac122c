"""The server never opens a path named in a request body: every field that names a model, a GPU
file, a calibration, a trace or an empirical distribution takes catalog names or upload ids only,
and a refusal reads the same whether the file exists or not (no existence oracle)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app

ROOT = Path(__file__).parents[2]
REAL_CONFIG = ROOT / "src/servecap/catalog/data/models/meta-llama--Llama-3.1-8B.json"  # parses: a real risk
PATHS = [
    str(REAL_CONFIG),
    "README.md",
    "src/../../../../etc/shadow",
    "/etc/passwd",
    "~/.ssh/id_rsa",
    "./config.json",
    "src/servecap/catalog/data/models",  # a folder holding configs
    "meta-llama/../../../etc/hostname",
]
FLEET = {"pools": [{"name": "a", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 2}]}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 2},
    "num_requests": 50,
    "prompt_tokens": 200,
    "output_tokens": 20,
}
PLAN = {
    "model": "meta-llama/Llama-3.1-8B",
    "candidates": [{"gpu": "H100"}],
    "traffic": {"peak_rps": 5},
}


@pytest.fixture()
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.chdir(ROOT)  # relative paths would resolve to real files here
    with TestClient(
        create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


def _with(doc: dict[str, Any], where: list[str | int], value: object) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    return out


def _routes(path: str) -> list[tuple[str, dict[str, Any], str]]:
    """(route, body, the field the refusal must name) for every place a body names a file."""
    return [
        ("/api/v1/plan", {"model": path, "gpu": "H100"}, "model"),
        ("/api/v1/compare", {"model": path}, "model"),
        ("/api/v1/simulate", {"model": path, "gpu": "H100", "rate": 1, "num_requests": 10}, "model"),
        ("/api/v1/capacity", {"model": path, "gpu": "H100"}, "model"),
        (
            "/api/v1/fleet/simulate",
            {"fleet": _with(FLEET, ["pools", 0, "model"], path), "workload": WORKLOAD},
            "fleet.pools[0].model",
        ),
        (
            "/api/v1/fleet/simulate",
            {"fleet": _with(FLEET, ["pools", 0, "gpu_file"], path), "workload": WORKLOAD},
            "fleet.pools[0].gpu_file",
        ),
        (
            "/api/v1/fleet/simulate",
            {"fleet": _with(FLEET, ["pools", 0, "calibration"], path), "workload": WORKLOAD},
            "fleet.pools[0].calibration",
        ),
        (
            "/api/v1/fleet/simulate",
            {"fleet": FLEET, "workload": {**WORKLOAD, "prompt_tokens": {"kind": "empirical", "path": path}}},
            "workload.prompt_tokens.path",
        ),
        (
            "/api/v1/fleet/simulate",
            {"fleet": FLEET, "workload": {"arrival": {"kind": "trace", "path": path}}},
            "workload.arrival.path",
        ),
        ("/api/v1/fleet/plan", {"plan": {**PLAN, "model": path}}, "plan.model"),
        ("/api/v1/fleet/plan", {"plan": _with(PLAN, ["candidates", 0, "model"], path)}, "plan.candidates[0].model"),
        ("/api/v1/fleet/plan", {"plan": {**PLAN, "small_model": path}}, "plan.small_model"),
        (
            "/api/v1/fleet/plan",
            {"plan": {**PLAN, "cheaper_gpu": {"gpu": "L4", "model": path}}},
            "plan.cheaper_gpu.model",
        ),
        (
            "/api/v1/fleet/plan",
            {
                "plan": _with(
                    PLAN,
                    ["traffic", "workload"],
                    {
                        "arrival": {"kind": "poisson", "rate_per_s": 1},
                        "prompt_tokens": {"kind": "empirical", "path": path},
                        "output_tokens": 9,
                        "duration_s": 60,
                    },
                )
            },
            "plan.traffic.workload.prompt_tokens.path",
        ),
    ]


@pytest.mark.parametrize("path", PATHS)
def test_every_body_field_naming_a_file_is_refused_naming_the_field(client: TestClient, path: str) -> None:
    for route, body, field in _routes(path):
        r = client.post(route, json=body)
        assert r.status_code == 400, (route, field, r.status_code, r.text)
        err = r.json()["error"]
        assert err["field"] == field, (route, err)
        assert err["value"] == path and "\n" not in err["message"]
        assert "not accepted by the server" in err["message"] or "unknown model" in err["message"], err
    assert client.get("/api/v1/jobs").json() == []  # nothing was queued


def test_a_refusal_does_not_reveal_whether_the_file_exists(client: TestClient) -> None:
    for route, body, _field in _routes("src/../../../../etc/hostname"):
        _r, other, _f = next(
            r for r in _routes("src/../../../../etc/no-such-file-here") if r[0] == route and r[2] == _field
        )
        a = client.post(route, json=body).json()["error"]
        b = client.post(route, json=other).json()["error"]
        assert a["message"].replace("hostname", "X") == b["message"].replace("no-such-file-here", "X"), (a, b)


def test_catalog_names_and_upload_ids_still_work(client: TestClient) -> None:
    up = client.post("/api/v1/models/upload", json={"config": json.loads(REAL_CONFIG.read_text())})
    name = up.json()["model"]
    assert client.post("/api/v1/plan", json={"model": name, "gpu": "H100"}).status_code == 200
    assert client.post("/api/v1/plan", json={"model": "llama-3.1-8b", "gpu": "H100"}).status_code == 200
    fleet = _with(FLEET, ["pools", 0, "model"], name)
    r = client.post("/api/v1/fleet/simulate", json={"fleet": fleet, "workload": WORKLOAD})
    assert r.status_code == 202, r.text
    client.delete(f"/api/v1/jobs/{r.json()['id']}")
    for bad in ("upload:../../etc/passwd", "upload:0123456789abcdef"):
        r = client.post("/api/v1/plan", json={"model": bad, "gpu": "H100"})
        assert r.status_code == 400 and r.json()["error"]["field"] == "model", r.text


def test_a_number_where_a_name_belongs_is_refused_naming_the_field(client: TestClient) -> None:
    r = client.post(
        "/api/v1/fleet/simulate", json={"fleet": _with(FLEET, ["pools", 0, "gpu"], 5), "workload": WORKLOAD}
    )
    assert r.status_code == 400 and r.json()["error"]["field"] == "fleet.pools[0].gpu", r.text
    r = client.post("/api/v1/fleet/plan", json={"plan": _with(PLAN, ["candidates", 0, "gpu"], 5)})
    assert r.status_code == 400 and r.json()["error"]["field"].startswith("plan.candidates[0].gpu"), r.text
    r = client.post(
        "/api/v1/fleet/simulate", json={"fleet": _with(FLEET, ["pools", 0, "gpu"], "H9000"), "workload": WORKLOAD}
    )
    assert r.status_code == 400 and r.json()["error"]["field"] == "fleet.pools[0].gpu", r.text
    r = client.post("/api/v1/plan", json={"gpu": 5})
    assert r.status_code == 400 and r.json()["error"]["field"] == "gpu", r.text
    r = client.post("/api/v1/compare", json={"gpus": [5]})
    assert r.status_code == 400 and r.json()["error"]["field"].startswith("gpus"), r.text
    r = client.post("/api/v1/compare", json={"gpus": []})  # never "every GPU" in disguise
    assert r.status_code == 400 and "leave it out for every GPU" in r.json()["error"]["message"], r.text


def test_every_field_that_could_name_a_file_is_classified() -> None:
    """A new field of the fleet, workload or plan schemas named like a file or a model must join
    api/names.py's lists (checked there) before the server accepts it."""
    import typing

    from pydantic import BaseModel

    from servecap.api.names import FILE_FIELDS, MODEL_FIELDS
    from servecap.app.fleet_plan import FleetPlanRequest
    from servecap.fleet.file_schema import FleetFile
    from servecap.workload import WorkloadSpec

    seen: set[type[BaseModel]] = set()
    names: set[str] = set()
    stack: list[object] = [FleetFile, FleetPlanRequest, WorkloadSpec]
    while stack:
        t = stack.pop()
        if isinstance(t, type) and issubclass(t, BaseModel):
            if t in seen:
                continue
            seen.add(t)
            for name, info in t.model_fields.items():
                if _admits_str(info.annotation):
                    names.add(name)
                stack.append(info.annotation)
        else:
            stack.extend(typing.get_args(t))
    assert len(seen) > 20  # the walk reached the nested schemas
    assert "gpu" in names and "max_model_len" not in names  # text fields only
    risky = {n for n in names if any(w in n.lower() for w in ("path", "file", "calibration", "model", "dir", "url"))}
    assert risky <= FILE_FIELDS | MODEL_FIELDS, sorted(risky - FILE_FIELDS - MODEL_FIELDS)
    assert {"path", "gpu_file", "calibration", "model", "small_model"} <= risky


def _admits_str(annotation: object) -> bool:
    import typing

    return annotation is str or any(_admits_str(a) for a in typing.get_args(annotation))


def test_a_shipped_trace_sample_is_the_one_trace_path_the_server_reads(client: TestClient) -> None:
    """``sample:<name>`` names a trace shipped with servecap; any other trace path is refused as
    before, and an unknown sample by its name (no file is looked up)."""
    import time

    workload = {"arrival": {"kind": "trace", "path": "sample:agentic", "time_scale": 0.1}}
    r = client.post("/api/v1/fleet/simulate", json={"fleet": FLEET, "workload": workload, "seed": 0})
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    for _ in range(600):
        snap = client.get(f"/api/v1/jobs/{job}").json()
        if snap["state"] in ("done", "failed"):
            break
        time.sleep(0.05)
    assert snap["state"] == "done", snap
    assert snap["result"]["outcomes"] == {"ok": 387}
    for path, message in (("sample:agentc", "no such sample"), ("/etc/passwd", "file paths are not accepted")):
        bad = {"arrival": {"kind": "trace", "path": path}}
        r = client.post("/api/v1/fleet/simulate", json={"fleet": FLEET, "workload": bad})
        assert r.status_code == 400 and message in r.json()["error"]["message"], r.text


def test_simulate_takes_a_sample_trace_and_refuses_any_other(client: TestClient) -> None:
    body = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
    r = client.post("/api/v1/simulate", json={**body, "trace": {"kind": "trace", "path": "/etc/passwd"}})
    assert r.status_code == 400 and r.json()["error"]["field"] == "trace.path"
    r = client.post("/api/v1/simulate", json={**body, "trace": {"path": "sample:azure-code-2023", "time_scale": 0}})
    assert r.status_code == 400 and "time_scale" in r.json()["error"]["field"]
    r = client.post("/api/v1/simulate", json={**body, "trace": {"path": "sample:azure-code-2023"}})
    assert r.status_code == 202, r.text
