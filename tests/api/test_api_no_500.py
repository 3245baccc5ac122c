"""No 500s: damaged stored runs, garbage deployments, wrong types answer in the one error shape
naming what is wrong; anything unforeseen is one line (no traceback), logged by the server."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.results import MeasuredRequest, summarize
from servecap.results.store import RunStore

DEPLOYMENT = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}


def _measured(store: RunStore, run_id: str, deployment: object, created_at: str) -> None:
    req = MeasuredRequest(
        "0", 0.0, 10, 3, sent_s=0.001, first_token_s=0.05, end_s=0.07, token_times_s=(0.05, 0.06, 0.07)
    )
    store.save_measured(
        run_id=run_id,
        url="http://127.0.0.1:9",
        model="m",
        mode="open",
        settings={"seed": 1, "deployment": deployment},
        requests=[req],
        summary=summarize([req.to_record(0)], duration_s=0.07),
        wall_duration_s=0.1,
        created_at=created_at,
    )


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    _measured(store, "good", DEPLOYMENT, "2026-01-01T00:00:00")
    _measured(store, "badjson", DEPLOYMENT, "2026-01-02T00:00:00")
    _measured(store, "badpage", DEPLOYMENT, "2026-01-03T00:00:00")
    _measured(store, "gpu-number", {"model": "meta-llama/Llama-3.1-8B", "gpu": 5}, "2026-01-04T00:00:00")
    _measured(store, "garbage", ["not", "a", "mapping"], "2026-01-05T00:00:00")
    _measured(store, "model-path", {"model": "/etc/passwd", "gpu": "H100"}, "2026-01-06T00:00:00")
    _measured(store, "gpu-file", {**DEPLOYMENT, "gpu_file": "/etc/gpus.toml"}, "2026-01-07T00:00:00")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE runs SET summary_json = '{not json' WHERE run_id = 'badjson'")
        con.execute("UPDATE requests SET token_times = x'00ff00' WHERE run_id = 'badpage'")
    return path


@pytest.fixture()
def client(tmp_path: Path, db: Path) -> Iterator[TestClient]:
    with TestClient(create_app(ServeSettings(data_dir=tmp_path, db=db)), base_url="http://127.0.0.1") as c:
        yield c


def _shape(r: Any) -> dict[str, Any]:
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        err = r.json()["error"]
        assert set(err) == {"message", "field", "value"} and "\n" not in err["message"] and "Traceback" not in r.text
        return dict(err)
    return {}


def test_one_damaged_row_never_hides_the_listing(client: TestClient) -> None:
    r = client.get("/api/v1/runs")
    err = _shape(r)
    if r.status_code == 200:  # the store skips the damaged row
        ids = {run["run_id"] for run in r.json()}
        assert "good" in ids and "badjson" not in ids
    else:
        assert r.status_code == 422 and err["field"] == "runs" and "damaged" in err["message"]


def test_a_damaged_run_or_page_is_a_4xx_naming_the_run(client: TestClient) -> None:
    for path in ("/api/v1/runs/badjson", "/api/v1/runs/badjson/requests", "/api/v1/runs/badpage/requests"):
        r = client.get(path)
        err = _shape(r)
        assert r.status_code in (400, 422) and err["field"] == "run", (path, err)
        assert "damaged" in err["message"], (path, err)
    assert client.get("/api/v1/runs/good/requests").status_code == 200
    r = client.get("/api/v1/runs/nope")
    assert r.status_code == 404 and _shape(r)["field"] == "run"


def test_accuracy_refuses_a_garbage_deployment_naming_the_field(client: TestClient) -> None:
    cases = {
        "gpu-number": "deployment.gpu",
        "garbage": "deployment",
        "model-path": "deployment.model",
        "gpu-file": "deployment.gpu_file",
    }
    for run_id, field in cases.items():
        r = client.get(f"/api/v1/runs/{run_id}/accuracy")
        err = _shape(r)
        assert 400 <= r.status_code < 500 and err["field"] == field, (run_id, r.status_code, err)


def test_anything_unforeseen_is_one_line_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite"))

    @app.get("/api/v1/boom")
    def boom() -> None:
        raise RuntimeError("a bug\nwith two lines")

    with (
        TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c,
        caplog.at_level(logging.ERROR, logger="servecap.api"),
    ):
        r = c.get("/api/v1/boom")
    assert r.status_code == 500
    err = r.json()["error"]
    assert err["message"] == "request='GET /api/v1/boom': internal error: RuntimeError (a bug with two lines)"
    assert "Traceback" not in r.text
    assert any("Traceback" in (rec.exc_text or "") or rec.exc_info for rec in caplog.records)
