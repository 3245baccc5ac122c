"""Progress on stderr (issue 32, defect 6): `fleet simulate` says what it runs and how far it is
(it was silent for minutes), and `monitor` off a terminal logs every tick (a live display there
printed only its last frame)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from servecap.app.monitor import HeadroomReport, MonitorReport, WindowReport
from servecap.cli import console
from servecap.cli.main import cli
from servecap.cli.monitor_cmd import tick_line


def test_fleet_simulate_prints_its_header_and_progress_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    kwdefaults = console.progress_reporter.__wrapped__.__kwdefaults__  # type: ignore[attr-defined]
    monkeypatch.setitem(kwdefaults, "interval_s", 0.0)  # a line per event, not every 5 s
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--replicas", "2"]
    res = CliRunner().invoke(cli, [*args, "--rate", "10", "--num-requests", "2000", "--json"])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0] == (
        "fleet simulate: main: meta-llama/Llama-3.1-8B on H100, 2 replica(s); router least-outstanding; "
        "10 req/s (poisson), 2,000 requests; 1,024 prompt + 128 output tokens; seed 0"
    )
    assert any(ln.startswith("simulate: ") and "/ 2,000 requests" in ln for ln in lines[1:])
    assert res.stdout.lstrip().startswith("{")  # the JSON alone on stdout


def test_monitor_tick_line() -> None:
    w = WindowReport(
        window_s=60.0,
        running=24.0,
        waiting=2.0,
        kv_usage=0.4,
        request_rate_per_s=12.5,
        prompt_tok_s=None,
        generation_tok_s=None,
        preemptions_per_s=None,
        prefix_hit_rate=None,
        latency_s={"ttft": {"p50": 0.1, "p99": 0.42}},
    )
    hr = HeadroomReport(
        replicas_up=2,
        load_per_replica=6.25,
        capacity_per_replica=8.0,
        capacity_source="engine model",
        limited_by="ttft",
        utilization=0.78,
        traffic_headroom=0.29,
        queueing=False,
        summary="",
    )
    r = MonitorReport(time_s=30.0, replicas_up=2, replicas_down=0, targets=[], fleet=w, headroom=hr, notes=[])
    assert tick_line(r) == (
        "monitor: t=30 s, 2/2 up, 12.50 req/s, 24 running, 2 waiting, p99 TTFT 420 ms, headroom +29% traffic"
    )
