"""The monitor against a real emulator on 127.0.0.1 (bounded: a few requests, two scrapes, ~10 s),
a target that is down, bad input, and the SQLite time series."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servecap.app.monitor import MonitorSettings, run_monitor
from servecap.emulator.server import ServerThread, engine_state, free_port
from servecap.monitor.store import read_samples


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=2048)
    with ServerThread(engine_state(plan(dep), model_name="m")) as srv:
        for _ in range(4):
            r = httpx.post(
                srv.url + "/v1/completions", json={"model": "m", "prompt": "abcd " * 20, "max_tokens": 8}, timeout=30
            )
            r.raise_for_status()
        yield srv.url


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port('127.0.0.1')}"


def test_live_once_with_one_target_down(emulator: str, tmp_path: Path) -> None:
    dead = _dead_url()
    db = tmp_path / "runs.sqlite"
    reports = []
    settings = MonitorSettings(urls=(emulator, dead), interval_s=0.2, window_s=1.0, once=True, db=db, timeout_s=1.0)
    last = asyncio.run(run_monitor(settings, reports.append))
    assert len(reports) == 1 and last.replicas_up == 1 and last.replicas_down == 1
    up, down = last.targets
    assert up.up and up.engine == "vllm" and up.model_name == "m" and up.window is not None
    assert up.window.request_rate_per_s == 0.0 and up.window.running == 0.0
    assert not down.up and down.down_count == 2 and down.error
    assert last.headroom is not None and last.headroom.capacity_source == "cache_config_info"
    # the time series: one session, the live target, the down one and the fleet
    con = sqlite3.connect(db)
    (session,) = con.execute("SELECT session_id FROM monitor_sessions").fetchone()
    rows = read_samples(db, session)
    assert {(r["url"], r["up"]) for r in rows} == {(up.url, 1), (dead + "/metrics", 0), ("fleet", 1)}
    assert con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'monitor_samples'").fetchone() == (1,)


def test_live_traffic_shows_rates(emulator: str) -> None:
    async def go() -> object:
        async def load() -> None:
            async with httpx.AsyncClient(timeout=30) as c:
                for _ in range(6):
                    await c.post(
                        emulator + "/v1/completions", json={"model": "m", "prompt": "x " * 50, "max_tokens": 4}
                    )

        settings = MonitorSettings(urls=(emulator,), interval_s=1.0, window_s=2.0, once=True, store=False)
        task = asyncio.create_task(load())
        last = await run_monitor(settings, lambda r: None)
        await task
        return last

    last = asyncio.run(go())
    w = last.targets[0].window  # type: ignore[attr-defined]
    assert w.prompt_tok_s > 0 and w.generation_tok_s > 0
    assert w.latency_s["ttft"]["p50"] is not None


def test_cli_once_json_against_the_emulator(emulator: str, tmp_path: Path, servecap_cli: Callable[..., Any]) -> None:
    res = servecap_cli(
        "monitor",
        emulator,
        "--once",
        "--json",
        "--interval-s",
        "0.2",
        "--db",
        str(tmp_path / "m.sqlite"),
        "-m",
        "meta-llama/Llama-3.1-8B",
        "-g",
        "H100",
        "-l",
        "2048",
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    # no request finished in the window: the mix (and so the engine model's headroom) is unknown
    assert data["replicas_up"] == 1 and data["headroom"] is None
    assert any("no headroom yet" in n for n in data["notes"])


def test_cli_every_target_down_exits_non_zero(servecap_cli: Callable[..., Any]) -> None:
    dead = _dead_url()
    res = servecap_cli("monitor", dead, "--once", "--interval-s", "0.1", "--timeout-s", "0.5", "--no-store")
    assert res.returncode == 1
    assert res.stderr.strip().count("\n") == 0 and dead in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["ftp://nowhere"], "url="),
        (["http://"], "url="),
        (["http://127.0.0.1:8000", "--interval-s", "-1"], "interval_s="),
        (["http://127.0.0.1:8000", "--window-s", "0.5", "--interval-s", "2"], "window_s="),
        (["http://127.0.0.1:99999"], "url="),
    ],
)
def test_cli_bad_input_is_one_line(args: list[str], field: str, servecap_cli: Callable[..., Any]) -> None:
    res = servecap_cli("monitor", *args, "--once", "--no-store")
    assert res.returncode == 2
    assert res.stderr.startswith("error: " + field) and res.stderr.count("\n") == 1


def test_cli_live_dashboard_bounded(emulator: str, tmp_path: Path, servecap_cli: Callable[..., Any]) -> None:
    res = servecap_cli(
        "monitor",
        emulator,
        "--interval-s",
        "0.3",
        "--window-s",
        "1",
        "--duration-s",
        "1.2",
        "--db",
        str(tmp_path / "m.sqlite"),
    )
    assert res.returncode == 0, res.stderr
    assert "servecap monitor" in res.stdout
    # off a terminal, one progress line per tick; how many ticks fit in 1.2 s depends on the
    # machine's load (on a busy one, the first alone), what they give does not: the headroom from
    # the second tick on (the first only starts the rate windows), and every tick after the first
    # adds a row for the emulator and one for the fleet to the store
    ticks = [line for line in res.stderr.splitlines() if line.startswith("monitor: t=")]
    assert 1 <= len(ticks) <= 5, res.stderr  # 1.2 s at 0.3 s a tick: bounded
    assert ("headroom" in res.stdout) == (len(ticks) >= 2), (res.stdout, res.stderr)
    rows = sqlite3.connect(tmp_path / "m.sqlite").execute("SELECT count(*) FROM monitor_samples").fetchone()
    assert rows[0] == 2 * (len(ticks) - 1)


FLEET = """\
pools:
  - name: h100
    model: meta-llama/Llama-3.1-8B
    gpu: H100
    autoscaler: {preset: keda-waiting, min_replicas: 1, max_replicas: 4}
  - name: fixed
    model: meta-llama/Llama-3.1-8B
    gpu: H100
"""


def test_cli_fleet_autoscaler_advice(emulator: str, tmp_path: Path, servecap_cli: Callable[..., Any]) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    common = [emulator, "--once", "--interval-s", "0.2", "--no-store", "--fleet", str(fleet)]
    res = servecap_cli("monitor", *common, "--pool", "h100", "--json")
    assert res.returncode == 0, res.stderr
    a = json.loads(res.stdout)["autoscaler"]
    # the emulator is idle: 0 waiting -> 0 recommended, floored at min_replicas 1
    assert (a["pool"], a["signal"], a["target"], a["current_replicas"]) == ("h100", "num_requests_waiting", 5.0, 1)
    assert (a["value"], a["recommended_replicas"], a["desired_replicas"]) == (0.0, 0, 1)
    assert a["summary"] == (
        f"with the autoscaler of pool 'h100' in {fleet}: 1 → 1 replicas now "
        "(num_requests_waiting 0.0 per replica vs target 5; 0 recommended, floored at min_replicas 1)"
    )
    table = servecap_cli("monitor", *common, "--pool", "h100")
    assert table.returncode == 0, table.stderr
    assert "with the autoscaler of pool 'h100'" in " ".join(table.stdout.split())
    bad = servecap_cli("monitor", *common, "--pool", "fixed")
    assert bad.returncode == 2 and bad.stderr.startswith("error: pools.fixed.autoscaler=None:")
    assert bad.stderr.count("\n") == 1
