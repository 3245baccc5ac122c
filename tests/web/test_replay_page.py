"""The shadow autoscaler on the web runs page (issue 20, "shadow": "with a plot in the HTML report
and the web runs page"): a monitor session in the server's results file is listed, a link opens
its replay, and the page's scale events and GPU-hours are `monitor replay --json`'s."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml
from click.testing import CliRunner
from tests.monitor.test_replay import FLEET, _store
from tests.web.conftest import Page, run_from_link

from servecap.cli.main import cli
from servecap.monitor.history import load_history

pytestmark = pytest.mark.browser


def test_runs_page_replays_a_monitor_session(desktop: Page, server_url: str, server_data: Path, tmp_path: Path) -> None:
    db = server_data / "runs.sqlite"
    _store(db)  # what `servecap monitor --db` writes: one replica, a step from 4 to 40 req/s at 300 s
    session = load_history(db).source.rsplit("session ", 1)[1].rstrip(")")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    args = ["monitor", "replay", str(db), "--session", session, "--fleet", str(fleet), "--seed", "3", "--json"]
    want = json.loads(CliRunner().invoke(cli, args).stdout)

    pg = desktop.page
    pg.goto(f"{server_url}/runs")
    pg.wait_for_selector(f"a[data-session='{session}']")
    pg.click(f"a[data-session='{session}']")  # the session's link replays it through the form's fleet
    pg.wait_for_selector("#replay-plot .main-svg", timeout=120_000)
    assert pg.input_value("#session") == session and '"keda-vllm"' in pg.input_value("#fleet")
    # a shared link with the fleet file and seed: the CLI's answer
    link = urlencode({"session": session, "seed": "3", "fleet": json.dumps(yaml.safe_load(FLEET))})
    pg.goto(f"{server_url}/runs?{link}")
    run_from_link(pg, "#replay-form")
    pg.wait_for_selector("#replay-plot .main-svg", timeout=120_000)
    assert int(pg.inner_text("#replay-events")) == len(want["scale_events"]) >= 1
    answer = pg.inner_text("#replay-answer")
    assert f"shadow {want['shadow_gpu_hours']:,.2f} GPU-hours" in answer
    assert f"vs {want['actual_gpu_hours']:,.2f} GPU-hours" in answer
    names = pg.evaluate("document.getElementById('replay-plot').data.map((t) => t.name)")
    assert names[:3] == ["ran", "shadow: ready", "shadow: ready + starting"] and "recorded req/s" in names
    assert f"session={session}" in pg.url and "seed=3" in pg.url  # the link reopens this replay
    desktop.shot("runs-replay")
    assert desktop.errors == [], desktop.errors
