"""The shipped trace samples over HTTP: ``GET /traces`` lists them (read from their files), and a
fleet plan replays one by name (``sample:<name>``) with its window and time scale; a path is never
read, and a bad window or scale is named in one line, 400."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.workload.samples import SAMPLES

ROOT = Path(__file__).parents[2]


@pytest.fixture()
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.chdir(ROOT)  # a relative path would name a real file here
    with TestClient(
        create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


def _plan(trace: dict[str, Any]) -> dict[str, Any]:
    return {
        "plan": {
            "model": "meta-llama/Llama-3.1-8B",
            "candidates": [{"gpu": "H100"}],
            "traffic": {"workload": {"arrival": {"kind": "trace", **trace}}},
            "levers": [],
        }
    }


def _done(client: TestClient, job: str) -> dict[str, Any]:
    for _ in range(1200):
        snap: dict[str, Any] = client.get(f"/api/v1/jobs/{job}").json()
        if snap["state"] in ("done", "failed"):
            return snap
        time.sleep(0.05)
    raise AssertionError("the job did not finish")


def test_the_samples_are_listed_from_their_files(client: TestClient) -> None:
    rows = {r["name"]: r for r in client.get("/api/v1/traces").json()}
    assert list(rows) == list(SAMPLES)
    moon = rows["mooncake-conversation"]
    assert (moon["path"], moon["format"], moon["requests"], moon["block_hashes"]) == (
        "sample:mooncake-conversation",
        "mooncake",
        75,
        True,
    )
    assert moon["span_s"] == 24.0  # its last timestamp, 24000 ms
    az = rows["azure-code-2023"]
    assert (az["format"], az["requests"], az["block_hashes"]) == ("azure", 40, False)
    assert az["span_s"] == pytest.approx(34.2844, abs=1e-4)  # 18:17:03.980 to 18:17:38.264


def test_a_fleet_plan_replays_a_sample_with_its_window_and_scale(client: TestClient) -> None:
    r = client.post("/api/v1/fleet/plan", json=_plan({"path": "sample:azure-code-2023", "time_scale": 0.5}))
    assert r.status_code == 202, r.text
    snap = _done(client, r.json()["id"])
    assert snap["state"] == "done", snap
    res = snap["result"]
    assert res["window"]["scored_requests"] == 40 and res["window"]["warmup_s"] == 0
    assert res["peak_rps"] == pytest.approx(40 / (34.2844 * 0.5), rel=1e-3)
    assert res["chosen"]["replicas"] >= 1


@pytest.mark.parametrize(
    ("trace", "field", "message"),
    [
        ({"path": "/etc/passwd"}, "path", "file paths are not accepted"),
        ({"path": "workload/data/azure_code_2023_head.csv"}, "path", "file paths are not accepted"),
        ({"path": "sample:nope"}, "path", "no such sample"),
        ({"path": "sample:azure-code-2023", "time_scale": 0}, "time_scale", "greater than or equal"),
        ({"path": "sample:azure-code-2023", "time_scale": 1e300}, "time_scale", "less than or equal"),
        ({"path": "sample:azure-code-2023", "start_s": 9, "end_s": 3}, "", "must be after"),
        # read before the job is queued (was: 202, then a failed job)
        ({"path": "sample:azure-code-2023", "start_s": 1e8}, "start_s", "falls in the window [1e+08, end) s"),
        ({"path": "sample:agentic", "end_s": 1e-300}, "end_s", "falls in the window [0, 1e-300) s"),
        ({"path": "sample:agentic", "format": "azure"}, "format", "a trace of format azure is CSV, not JSONL"),
        ({"path": "sample:agentic", "format": "sessions"}, "request_id", "must be a string"),
    ],
)
@pytest.mark.parametrize("endpoint", ["fleet/plan", "fleet/simulate", "simulate"])
def test_a_path_or_a_bad_window_is_refused_in_one_line(
    client: TestClient, trace: dict[str, Any], field: str, message: str, endpoint: str
) -> None:
    body = _plan(trace)
    if endpoint == "fleet/simulate":
        pool = {"name": "main", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 1}
        body = {"fleet": {"pools": [pool]}, "workload": body["plan"]["traffic"]["workload"]}
    elif endpoint == "simulate":
        body = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "trace": {"kind": "trace", **trace}}
    r = client.post(f"/api/v1/{endpoint}", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert field in err["field"] and message in err["message"], err
    assert "\n" not in err["message"]
