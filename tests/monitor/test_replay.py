"""The shadow autoscaler: `monitor replay` over a recorded history (issue 20, "shadow")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
from servecap.app.monitor_replay import history_workload, replay
from servecap.errors import ServecapError
from servecap.fleet.file_schema import load_fleet_file
from servecap.monitor.history import load_history
from servecap.monitor.store import MonitorStore
from servecap.monitor.window import WindowStats
from servecap.workload import WorkloadSpec

FLEET = """
pools:
  - name: h100
    model: meta-llama/Llama-3.1-8B
    gpu: H100
    max_model_len: 4096
    price_per_gpu_hour: 2.5
    cold_start:
      provisioning: {mean_s: 30, cv: 0.0}
      warmup: 5
    autoscaler: {preset: keda-waiting, target: 5, interval_s: 15, min_replicas: 1, max_replicas: 8,
                 downscale_stabilization_s: 120}
router: least-outstanding
slo: {ttft_ms: 1000, tpot_ms: 50}
"""


def _store(db: Path, *, low: float = 4.0, high: float = 40.0, step_at_s: float = 300.0, ticks: int = 60) -> None:
    """What `servecap monitor` writes for one replica every 10 s: a rate step at ``step_at_s``."""
    s = MonitorStore(db, ["http://a/metrics"])
    for i in range(1, ticks + 1):
        t = 10.0 * i
        rate = low if t - 10.0 < step_at_s else high
        for url in ("http://a/metrics", "fleet"):
            s.add_up(WindowStats(url, 10.0, 5, 0, 0.1, rate, rate * 1024, rate * 128, 0.0, 0.0, {}), t)
    s.close()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    db, fleet = tmp_path / "m.sqlite", tmp_path / "fleet.yaml"
    _store(db)
    fleet.write_text(FLEET, encoding="utf-8")
    return db, fleet


def test_history_from_the_monitor_store(files: tuple[Path, Path]) -> None:
    h = load_history(files[0])
    assert h.time_s[0] == 0.0 and h.step_s == 10.0 and len(h.time_s) == 60
    assert h.rate_req_s[29] == 4.0 and h.rate_req_s[30] == 40.0  # the step at 300 s
    assert set(h.replicas) == {1.0} and h.prompt_tokens == 1024.0 and h.output_tokens == 128.0
    w = history_workload(h)
    steps = w.arrival.rate.steps  # type: ignore[union-attr]
    assert [(s.start_s, s.rate_per_s) for s in steps] == [(0.0, 4.0), (300.0, 40.0)]  # equal neighbours merged
    assert w.duration_s == 600.0


def test_replay_reproduces_fleet_simulates_scale_events(files: tuple[Path, Path]) -> None:
    db, fleet = files
    r, _ = replay(load_history(db), fleet, seed=3)
    # the same autoscaler and step through `fleet simulate`, written by hand
    workload = WorkloadSpec.model_validate(
        {
            "arrival": {
                "kind": "schedule",
                "rate": {
                    "kind": "piecewise",
                    "steps": [{"start_s": 0, "rate_per_s": 4}, {"start_s": 300, "rate_per_s": 40}],
                },
            },
            "prompt_tokens": 1024,
            "output_tokens": 128,
            "duration_s": 600,
        }
    )
    f = load_fleet_file(fleet).model_copy(update={"timeseries_interval_s": 10.0})
    out, _ = fleet_simulate(FleetSimulateRequest(fleet=f, workload=workload, seed=3), base_dir=fleet.parent)
    assert r.scale_events == out.scale_events and len(r.scale_events) >= 1
    assert r.scale_events[0]["time_s"] > 300 and r.scale_events[0]["to"] > r.scale_events[0]["from"]
    # what ran: one replica for 600 s = 1/6 GPU-hour at 2.5 $/GPU-hour
    assert r.actual_gpu_hours == pytest.approx(600 / 3600) and r.actual_cost_usd == pytest.approx(2.5 / 6)
    assert r.shadow_gpu_hours == pytest.approx(out.gpu_hours)
    assert len(r.minutes) == 10 and r.minutes[0].rate_req_s == 4.0 and r.minutes[6].rate_req_s == 40.0
    # one replica at 40 req/s is past the engine model's SLO rate (26.85 req/s at 1,024/128)
    assert r.break_rate_req_s == pytest.approx(26.85, rel=0.02)
    assert r.minutes[6].actual_at_risk and not r.minutes[0].actual_at_risk
    assert r.cold_start_gap_minutes >= 1 and r.minutes[5].cold_start_gap


def test_history_from_a_prometheus_export(tmp_path: Path) -> None:
    body = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"instance": "a"}, "values": [[1000, "2"], [1060, "3"], [1120, "4"]]},
                {"metric": {"instance": "b"}, "values": [[1060, "5"], [1120, "6"]]},
            ],
        },
    }
    path = tmp_path / "rate.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    h = load_history(path)
    assert h.time_s == (0.0, 60.0, 120.0) and h.rate_req_s == (2.0, 8.0, 10.0) and h.replicas == (1.0, 2.0, 2.0)
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": {"resultType": "vector", "result": []}}', encoding="utf-8")
    with pytest.raises(ServecapError, match="query_range"):
        load_history(bad)


def test_cli_replay_table_json_html_and_errors(files: tuple[Path, Path], tmp_path: Path) -> None:
    from servecap.cli.main import cli

    db, fleet = files
    page = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["monitor", "replay", str(db), "--fleet", str(fleet), "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert "shadow autoscaler of pool 'h100'" in res.stdout and "minute by minute" in res.stdout
    text = page.read_text(encoding="utf-8")
    assert "minute of the history" in text and "shadow: ready" in text and "recorded req" in text
    data = json.loads(CliRunner().invoke(cli, ["monitor", "replay", str(db), "--fleet", str(fleet), "--json"]).stdout)
    assert data["pool"] == "h100" and len(data["minutes"]) == 10
    res = CliRunner().invoke(cli, ["monitor", "replay", str(db)])
    assert res.exit_code != 0 and "--fleet" in str(res.exception)
