"""The shadow autoscaler over the API (the web runs page's replay): the monitor sessions of the
server's results file, and a replay job whose answer is `monitor replay --json`'s for the same
session and fleet file; a fleet with a path, an unknown session and no store are refused."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from fastapi.testclient import TestClient
from tests.monitor.test_replay import FLEET, _store  # the synthetic step the CLI's tests replay

from servecap.api import ServeSettings, create_app
from servecap.cli.main import cli


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def _wait(client: TestClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        snap: dict[str, Any] = client.get(f"/api/v1/jobs/{job_id}").json()
        if snap["state"] in ("done", "failed", "cancelled"):
            return snap
        time.sleep(0.05)
    raise AssertionError("the replay job did not finish")


def test_a_replay_job_answers_as_the_cli(client: TestClient, tmp_path: Path) -> None:
    body = {"fleet": yaml.safe_load(FLEET), "seed": 3}
    assert client.get("/api/v1/monitor/sessions").json() == []
    refused = client.post("/api/v1/monitor/replay", json=body)
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "session"
    db = tmp_path / "runs.sqlite"
    _store(db)
    # a results file the monitor wrote first is still the run store (its tables were "foreign")
    assert client.get("/api/v1/runs").json() == []
    (session,) = client.get("/api/v1/monitor/sessions").json()
    assert session["samples"] == 60 and session["duration_s"] == 590.0 and session["urls"] == ["http://a/metrics"]
    job = client.post("/api/v1/monitor/replay", json={**body, "session": session["session"]})
    assert job.status_code == 202
    snap = _wait(client, job.json()["id"])
    assert snap["state"] == "done", snap
    got = snap["result"]
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    out = CliRunner().invoke(cli, ["monitor", "replay", str(db), "--fleet", str(fleet), "--seed", "3", "--json"])
    want = json.loads(out.stdout)
    assert got["history"] == f"monitor session {session['session']}"  # the server's file is not named
    for key in ("history", "fleet_file"):
        got.pop(key), want.pop(key)
    assert got == want and len(got["scale_events"]) >= 1


def test_bad_replays_are_refused_before_queueing(client: TestClient, tmp_path: Path) -> None:
    _store(tmp_path / "runs.sqlite")
    fleet = yaml.safe_load(FLEET)
    r = client.post("/api/v1/monitor/replay", json={"fleet": fleet, "session": "nope"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("session='nope'")
    fleet["pools"][0]["gpu_file"] = "/etc/passwd"
    r = client.post("/api/v1/monitor/replay", json={"fleet": fleet})
    assert r.status_code == 400 and r.json()["error"]["field"] == "fleet.pools[0].gpu_file"
