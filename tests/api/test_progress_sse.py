"""Issue 32, defect 6 (the web side): the progress the CLI prints on stderr flows through a job's
server-sent events: requests done of the total and the simulated clock, for ``fleet simulate``,
``simulate`` and a monitor replay; a streamed run's sketches are read as percentile tables."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from fastapi.testclient import TestClient
from tests.monitor.test_replay import FLEET, _store

from servecap.api import ServeSettings, create_app
from servecap.cli.console import progress_line
from servecap.cli.main import cli
from servecap.progress import Progress

FLEET_BODY: dict[str, Any] = {  # two H100s at 20 req/s for 120 s: 2,400 requests, about a second
    "fleet": {
        "pools": [{"name": "main", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "replicas": 2,
                   "max_model_len": 8192}],
        "router": {"name": "least-outstanding"},
        "slo": {"ttft_ms": 2000, "tpot_ms": 100},
    },
    "workload": {"arrival": {"kind": "poisson", "rate_per_s": 20}, "prompt_tokens": 1024, "output_tokens": 128,
                 "duration_s": 120},
    "seed": 0,
}  # fmt: skip


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def _events(client: TestClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    job = client.post(f"/api/v1/{path}", json=body)
    assert job.status_code == 202, job.text
    with client.stream("GET", f"/api/v1/jobs/{job.json()['id']}/events") as stream:
        return [json.loads(line[len("data:") :]) for line in stream.iter_lines() if line.startswith("data:")]


def _progress(snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert snaps[-1]["state"] == "done", snaps[-1]
    return [s["progress"] for s in snaps if s["state"] == "running" and s["progress"]]


def test_a_fleet_jobs_events_carry_requests_done_and_the_simulated_clock(client: TestClient) -> None:
    snaps = _events(client, "fleet/simulate", FLEET_BODY)
    progress = [p for p in _progress(snaps) if p["stage"] == "simulate"]
    assert len(progress) >= 2  # more than the last one: the page's bar moves
    done = [p["done"] for p in progress]
    clock = [p["sim_time_s"] for p in progress]
    assert done == sorted(done) and clock == sorted(clock)
    last = progress[-1]
    result = snaps[-1]["result"]
    assert last["unit"] == "requests" and last["total"] == result["summary"]["num_requests"]
    assert last["done"] == last["total"]
    # the clock at the last finish: past the last arrival (120 s), within the run's horizon
    assert 110 < last["sim_time_s"] <= result["horizon_s"] + 1e-6


def test_a_single_engine_job_carries_the_clock_too(client: TestClient) -> None:
    body = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192, "rate": 5, "num_requests": 200}
    progress = _progress(_events(client, "simulate", body))
    assert progress and all(p["sim_time_s"] is not None and p["sim_time_s"] > 0 for p in progress)


def test_a_replay_jobs_events_follow_the_shadow_fleet(client: TestClient, tmp_path: Path) -> None:
    """It sent one "0 of 1 replays" event and nothing until its answer."""
    _store(tmp_path / "runs.sqlite")
    (session,) = client.get("/api/v1/monitor/sessions").json()
    body = {"fleet": yaml.safe_load(FLEET), "seed": 3, "session": session["session"]}
    progress = _progress(_events(client, "monitor/replay", body))
    assert progress[-1]["stage"] == "simulate" and progress[-1]["unit"] == "requests"
    assert progress[-1]["done"] == progress[-1]["total"] > 0 and progress[-1]["sim_time_s"] > 0


def test_the_cli_line_says_the_simulated_clock() -> None:
    line = progress_line(Progress("simulate", 470, 4709, "requests", sim_time_s=62.4))
    assert line == "simulate: 470 / 4,709 requests (10%), 62 s simulated"


def test_a_streamed_runs_sketches_over_the_api(client: TestClient, tmp_path: Path) -> None:
    """The runs page plots a streamed run from these (it showed an empty chart)."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(FLEET_BODY["fleet"]), encoding="utf-8")
    db = tmp_path / "runs.sqlite"
    args = ["fleet", "simulate", "--fleet", str(fleet), "--rate", "20", "--duration-s", "120", "--sketch", "--save"]
    out = CliRunner().invoke(cli, [*args, "--db", str(db), "--json"])
    assert out.exit_code == 0, out.output
    (run,) = client.get("/api/v1/runs").json()
    got = client.get(f"/api/v1/runs/{run['run_id']}/sketches")
    assert got.status_code == 200, got.text
    report = got.json()
    whole = report["groups"][0]
    assert (whole["axis"], whole["requests"]) == ("run", run["num_requests"])
    assert abs(whole["ttft_p99_s"] - run["summary"]["ttft_s"]["p99"]) <= 0.02 * run["summary"]["ttft_s"]["p99"]
    windows = report["windows"]
    assert len(windows) >= 8 and sum(w["first_tokens"] for w in windows) == whole["completed"]
    assert client.get("/api/v1/runs/nope/sketches").status_code == 404
    # a damaged sketches row is one line naming the run, never a 500
    with sqlite3.connect(db) as con:
        con.execute("UPDATE sketches SET sketch_json = '{not json' WHERE run_id = ?", (run["run_id"],))
    damaged = client.get(f"/api/v1/runs/{run['run_id']}/sketches")
    assert damaged.status_code in (400, 422) and "damaged" in damaged.json()["error"]["message"], damaged.text
    # a run stored with its records has no sketches: said so
    recorded = client.post("/api/v1/simulate", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "rate": 5,
                                                     "num_requests": 20, "max_model_len": 8192})  # fmt: skip
    assert recorded.status_code == 202
    with client.stream("GET", f"/api/v1/jobs/{recorded.json()['id']}/events") as stream:
        last = [json.loads(x[len("data:") :]) for x in stream.iter_lines() if x.startswith("data:")][-1]
    got = client.get(f"/api/v1/runs/{last['result']['run_id']}/sketches")
    assert got.status_code == 400 and "not sketches" in got.json()["error"]["message"]
