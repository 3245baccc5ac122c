"""``POST /api/v1/fleet/simulate`` with ``fidelity: cache-replay`` (api/cache_replay_job.py): a
shipped trace sample replayed as a job whose result is ``fleet simulate --fidelity cache-replay
--json``, its progress over the job's events; everything the replay does not model refused
before the job is queued, one line naming the body's field in the CLI's words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.cli.main import cli
from servecap.errors import ServecapError

ROOT = Path(__file__).parents[2]
FLEET: dict[str, Any] = {
    "pools": [{"name": "main", "model": "Qwen/Qwen3-0.6B", "gpu": "H100-SXM", "replicas": 2, "max_model_len": 8192}],
    "router": {"name": "least-outstanding", "scrape_interval_ms": 0},
    "slo": {"ttft_ms": 2000, "tpot_ms": 100},
}
SAMPLE = "sample:mooncake-conversation"
TRACE: dict[str, Any] = {"arrival": {"kind": "trace", "path": SAMPLE}}


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def _cli(tmp_path: Path, fleet: dict[str, Any], *args: str) -> Any:
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    return CliRunner().invoke(cli, ["fleet", "simulate", "--fleet", str(tmp_path / "fleet.yaml"), *args, "--json"])


def _refused(client: TestClient, body: dict[str, Any], field: str) -> str:
    """The 400's one line (it names ``field``), and no job queued."""
    r = client.post("/api/v1/fleet/simulate", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["field"] == field and err["message"].startswith(field + "=") and "\n" not in err["message"], err
    assert client.get("/api/v1/jobs").json() == []
    return str(err["message"])


def test_the_job_is_the_clis_cache_replay_with_its_progress(client: TestClient, tmp_path: Path) -> None:
    body = {"fleet": FLEET, "workload": {"arrival": {**TRACE["arrival"], "time_scale": 2}}, "fidelity": "cache-replay"}
    job = client.post("/api/v1/fleet/simulate", json=body)
    assert job.status_code == 202 and job.json()["kind"] == "fleet-cache-replay", job.text
    with client.stream("GET", f"/api/v1/jobs/{job.json()['id']}/events") as stream:
        snaps = [json.loads(line[len("data:") :]) for line in stream.iter_lines() if line.startswith("data:")]
    assert snaps[-1]["state"] == "done", snaps[-1]
    out = _cli(tmp_path, FLEET, "--trace", SAMPLE, "--time-scale", "2", "--fidelity", "cache-replay")
    assert out.exit_code == 0, out.output
    want = json.loads(out.stdout)
    assert snaps[-1]["result"] == want
    # 40 of the sample's 75 requests are past the pool's max_model_len 8,192: refused as too_long (the
    # full simulation's rule), not served as before
    assert (want["requests"], want["too_long"]) == (35, 40) and want["prefix_cache_query_tokens"] > 0
    progress = [s["progress"] for s in snaps if s["progress"]]
    assert progress and progress[-1]["stage"] == "cache replay" and progress[-1]["done"] == 75


def test_refusals_are_the_clis_naming_the_body_field(client: TestClient, tmp_path: Path) -> None:
    def cli_problem(fleet: dict[str, Any], *args: str) -> str:
        out = _cli(tmp_path, fleet, "--fidelity", "cache-replay", *args)
        assert isinstance(out.exception, ServecapError), out.output  # the entry point prints its line
        return out.exception.problem

    replay = {"fleet": FLEET, "fidelity": "cache-replay"}
    # a P/D fleet: the replay models one pool
    pd = yaml.safe_load((ROOT / "examples/fleet-pd.yaml").read_text())
    message = _refused(client, {**replay, "fleet": pd, "workload": TRACE}, "fidelity")
    assert message.endswith(": " + cli_problem(pd, "--trace", SAMPLE))
    # a load field beside the trace: not read
    message = _refused(client, {**replay, "workload": {**TRACE, "num_requests": 5}}, "workload.num_requests")
    assert message.endswith(": " + cli_problem(FLEET, "--trace", SAMPLE, "--num-requests", "5"))
    # a window of the trace
    window = {"arrival": {**TRACE["arrival"], "start_s": 3}}
    message = _refused(client, {**replay, "workload": window}, "workload.arrival.start_s")
    assert message.endswith(": " + cli_problem(FLEET, "--trace", SAMPLE, "--trace-start-s", "3"))
    # a format it does not read
    fmt = {"arrival": {**TRACE["arrival"], "format": "servecap"}}
    message = _refused(client, {**replay, "workload": fmt}, "workload.arrival.format")
    assert message.endswith(": " + cli_problem(FLEET, "--trace", SAMPLE, "--trace-format", "servecap"))
    # no trace at all
    poisson = {"arrival": {"kind": "poisson", "rate_per_s": 5}}
    assert "replays a block-hash trace" in _refused(client, {**replay, "workload": poisson}, "fidelity")
    # a sample it cannot read: named by its sample name, never the server's path to it
    azure = {"arrival": {"kind": "trace", "path": "sample:azure-code-2023"}}
    message = _refused(client, {**replay, "workload": azure}, "workload.arrival.path")
    assert "sample:azure-code-2023" in message and "/" not in message.split("sample:azure-code-2023")[1]
    # a path instead of a sample, as every fleet body
    path = {"arrival": {"kind": "trace", "path": "/etc/passwd"}}
    assert "file paths are not accepted" in _refused(client, {**replay, "workload": path}, "workload.arrival.path")


@pytest.mark.parametrize("fidelity", ["replay", "CACHE-REPLAY", "", None, 1, float("nan"), ["cache-replay"]])
def test_an_unknown_fidelity_is_one_line(client: TestClient, fidelity: object) -> None:
    body = json.dumps({"fleet": FLEET, "workload": TRACE, "fidelity": fidelity}, allow_nan=True)
    r = client.post("/api/v1/fleet/simulate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "fidelity", r.text
