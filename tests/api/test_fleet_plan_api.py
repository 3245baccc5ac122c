"""POST /api/v1/fleet/plan: `servecap fleet plan` as a job, in-process; its result is `--json`'s."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.cli.main import cli

PLAN: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "candidates": [{"gpu": "H100", "max_model_len": 4096}],
    "traffic": {
        "peak_rps": 30,
        "workload": {
            "arrival": {"kind": "poisson", "rate_per_s": 1},
            "prompt_tokens": 300,
            "output_tokens": 100,
            "duration_s": 600,
        },
    },
    "slo": {"ttft_s": {"p99": 1.0}, "tpot_s": {"p99": 0.05}},
    "levers": ["fp8-kv"],
    "tail_samples": 10,
}


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(
        create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


def _wait(client: TestClient, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap: dict[str, Any] = client.get(f"/api/v1/jobs/{job_id}").json()
        if snap["state"] in ("done", "failed", "cancelled"):
            return snap
        time.sleep(0.05)
    raise AssertionError("job did not finish")


def test_fleet_plan_job_matches_the_cli(client: TestClient, tmp_path: Path) -> None:
    r = client.post("/api/v1/fleet/plan", json={"plan": PLAN})
    assert r.status_code == 202, r.text
    snap = _wait(client, r.json()["id"])
    assert snap["state"] == "done", snap
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    out = CliRunner().invoke(cli, ["fleet", "plan", "--plan", str(tmp_path / "plan.json"), "--json"])
    assert out.exit_code == 0, out.output
    assert snap["result"] == json.loads(out.output)
    assert snap["result"]["fleet"]["slo_met"] and snap["result"]["simulations"] >= 2


@pytest.mark.parametrize(
    ("plan", "field"),
    [
        ({**PLAN, "candidates": []}, "plan.candidates"),
        ({**PLAN, "candidates": [{"gpu": "H1000"}]}, "plan.candidates[0].gpu"),
        ({**PLAN, "traffic": {"peak_rps": -1}}, "plan.traffic.peak_rps"),
        ({**PLAN, "routr": "random"}, "plan.routr"),
        ({**PLAN, "max_window_requests": 10**7}, "plan.max_window_requests"),
    ],
)
def test_fleet_plan_body_errors_name_the_field(client: TestClient, plan: dict[str, Any], field: str) -> None:
    r = client.post("/api/v1/fleet/plan", json={"plan": plan})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"].startswith(field)


def test_the_lever_list_is_the_planners_table(client: TestClient) -> None:
    from servecap.planning.levers import DEFAULT_LEVERS, LEVERS

    r = client.get("/api/v1/fleet/plan/levers")
    assert r.status_code == 200
    assert r.json() == {"levers": list(LEVERS), "default_levers": list(DEFAULT_LEVERS)}
    assert set(DEFAULT_LEVERS) <= set(LEVERS)
