"""Issue 20, defect 8: a fleet plan's progress carries its stage totals, in the library, on the
CLI's stderr and in the API's server-sent events (the web page's bar): "1 of 2 candidates
searched", "3 of 7 levers re-simulated"; the simulations so far in the message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.app.fleet_plan import fleet_plan, plan_request_from_dict
from servecap.progress import Progress

PLAN: dict[str, Any] = {  # an 8B at 30 req/s on two GPUs with two levers: about 2 s
    "model": "meta-llama/Llama-3.1-8B",
    "candidates": [{"gpu": "L40S", "max_model_len": 4096}, {"gpu": "H100-SXM", "max_model_len": 4096}],
    "traffic": {"peak_rps": 30, "workload": {"prompt_tokens": 300, "output_tokens": 100, "duration_s": 600,
                                              "arrival": {"kind": "poisson", "rate_per_s": 1}}},
    "slo": {"ttft_s": {"p99": 1.0}, "tpot_s": {"p99": 0.05}},
    "levers": ["fp8-kv", "router"],
    "seed": 0,
}  # fmt: skip
UNITS = {"candidates searched": 2, "second-seed checks": 1, "levers re-simulated": 2}


def test_every_event_has_its_stage_total_and_the_stages_run_in_order() -> None:
    events: list[Progress] = []
    answer = fleet_plan(plan_request_from_dict(PLAN), events.append, executor="serial")
    assert all(e.total == UNITS[e.unit] and 0 <= e.done <= e.total for e in events), events
    units = list(dict.fromkeys(e.unit for e in events))
    assert units == list(UNITS)  # searched, then checked on a second seed, then the levers
    assert (events[0].done, events[-1].done) == (0, 2)  # from none of the candidates to every lever
    assert events[-1].message == f"simulations: {answer.simulations}"
    sims = [e.message for e in events if "the SLOs" in e.message]
    assert len(sims) == answer.simulations  # one event per simulation, each saying its verdict


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def test_the_web_pages_events_carry_the_stage_totals(client: TestClient) -> None:
    job = client.post("/api/v1/fleet/plan", json={"plan": PLAN}).json()
    snaps = []
    with client.stream("GET", f"/api/v1/jobs/{job['id']}/events") as stream:
        snaps = [json.loads(line[len("data:") :]) for line in stream.iter_lines() if line.startswith("data:")]
    assert snaps[-1]["state"] == "done", snaps[-1]
    progress = [s["progress"] for s in snaps if s["progress"]]
    assert progress  # the last one at least: a job keeps its latest progress
    for p in progress:
        assert p["total"] == UNITS[p["unit"]] and p["message"].startswith("simulations: "), p
    assert progress[-1]["unit"] == "levers re-simulated" and progress[-1]["done"] == 2
