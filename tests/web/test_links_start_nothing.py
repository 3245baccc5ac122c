"""A link never starts a job: framed by another page it is not shown at all (X-Frame-Options, CSP
frame-ancestors); opened, it fills the form and waits for the user's Run. Every page runs under the
server's Content-Security-Policy without a violation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest
import yaml
from tests.monitor.test_replay import FLEET, _store
from tests.web.conftest import Page

from servecap.web import PAGES

pytestmark = pytest.mark.browser

SIM = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "max_model_len": "4096", "rate": "5",
       "num_requests": "50", "mode": "simulate"}  # fmt: skip
LINKS = {
    "simulate": SIM,
    "fleet": {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "replicas": "1", "rate": "2", "duration_s": "20"},
    "fleet-plan": {"model": "meta-llama/Llama-3.1-8B", "gpus": "H100-SXM", "peak_rps": "5"},
    "runs": {"seed": "1"},  # + the session the test stores
}


def _jobs(server_url: str) -> int:
    with urlopen(f"{server_url}/api/v1/jobs", timeout=10) as r:
        return len(json.loads(r.read()))


def _runs(server_url: str) -> int:
    with urlopen(f"{server_url}/api/v1/runs?limit=1000", timeout=10) as r:
        return len(json.loads(r.read()))


def test_a_framed_link_starts_no_job(desktop: Page, server_url: str) -> None:
    jobs, runs = _jobs(server_url), _runs(server_url)
    frames = "".join(
        f'<iframe src="{server_url}/{name}?{urlencode(state)}" width="400" height="300"></iframe>'
        for name, state in LINKS.items()
    )
    pg = desktop.page
    pg.set_content(f"<html><body><h1>another site</h1>{frames}</body></html>")
    time.sleep(4.0)  # what a framed page would have started by now
    assert _jobs(server_url) == jobs and _runs(server_url) == runs
    # the browser refused to show the server's pages in the frames
    assert any("frame" in e.lower() for e in desktop.errors), desktop.errors
    for frame in pg.frames[1:]:
        assert frame.evaluate("document.querySelector('#form') === null")


@pytest.mark.parametrize("name", list(LINKS))
def test_an_opened_link_fills_the_form_and_waits_for_run(
    desktop: Page, server_url: str, server_data: Path, name: str
) -> None:
    state = dict(LINKS[name])
    if name == "runs":  # a monitor session to replay
        from servecap.monitor.history import load_history

        db = server_data / "runs.sqlite"
        if not list(json.loads(urlopen(f"{server_url}/api/v1/monitor/sessions", timeout=10).read())):
            _store(db)
        state["session"] = load_history(db).source.rsplit("session ", 1)[1].rstrip(")")
        state["fleet"] = json.dumps(yaml.safe_load(FLEET))
    jobs, runs = _jobs(server_url), _runs(server_url)
    pg = desktop.page
    pg.goto(f"{server_url}/{name}?{urlencode(state)}")
    pg.wait_for_selector("#await-click")
    time.sleep(1.5)
    assert _jobs(server_url) == jobs and _runs(server_url) == runs  # nothing started, nothing stored
    if name != "runs":
        assert pg.input_value("select[name=model]") == "meta-llama/Llama-3.1-8B"
    if name == "simulate":  # the user's click runs it
        pg.click("#form button[type=submit]")
        pg.wait_for_selector("#answer", timeout=120_000)
        assert _jobs(server_url) == jobs + 1
        assert pg.locator("#await-click").count() == 0
    assert desktop.errors == [], desktop.errors


CSP_WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
"""
READY = {  # what each page draws once its default answer is in (plotly's SVG where it plots)
    "plan": "#memory .main-svg",
    "compare": "#answer",
    "simulate": "#curve .main-svg",
    "fleet": "#answer",
    "fleet-plan": "#answer",
    "runs": "#list table, #list p",
}


@pytest.mark.parametrize("name", PAGES)
def test_every_page_runs_under_the_csp_without_a_violation(desktop: Page, server_url: str, name: str) -> None:
    pg = desktop.page
    pg.add_init_script(CSP_WATCH)
    response = pg.goto(f"{server_url}/{name}")
    assert response is not None
    headers = response.headers
    assert headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in headers["content-security-policy"]
    pg.wait_for_selector(READY[name], timeout=120_000)
    pg.mouse.move(300, 400)  # plotly's hover layer
    time.sleep(0.5)
    violations: Any = pg.evaluate("window.__csp")
    assert violations == [], violations
    assert [e for e in desktop.errors if "Content Security Policy" in e] == []
    assert desktop.errors == [], desktop.errors
