"""A real server (uvicorn on 127.0.0.1, a free port) and a real headless browser (Debian's
chromium driven by Playwright) for the web UI's tests. Screenshots go to
``$SERVECAP_ARTIFACTS`` (default ``build/artifacts``) for a person to look at."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("SERVECAP_ARTIFACTS", Path(__file__).parents[2] / "build" / "artifacts"))


def _require_browser() -> Any:
    """Playwright's sync API, or a skip (a failure under CI, which installs both)."""
    missing = []
    try:
        from playwright import sync_api
    except ImportError:
        missing.append("the playwright package")
        sync_api = None
    if not shutil.which(CHROMIUM):
        missing.append(f"{CHROMIUM} (Debian's chromium package)")
    if missing:
        message = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sync_api


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def server_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test server's data folder; its run store is ``runs.sqlite`` in it."""
    return tmp_path_factory.mktemp("web")


@pytest.fixture(scope="session")
def server_url(server_data: Path) -> Iterator[str]:
    import uvicorn

    from servecap.api import ServeSettings, create_app
    from servecap.web import mount_web

    data = server_data
    app = create_app(ServeSettings(data_dir=data, db=data / "runs.sqlite"))
    mount_web(app)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the web server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One browser per test module: Playwright's sync API holds an event loop while it runs, which
    must be gone before other modules' asyncio tests start."""
    sync_api = _require_browser()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


class Page:
    """A browser page that records console errors and failed requests."""

    def __init__(self, browser: Any, width: int, height: int = 900) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.page.set_default_timeout(90_000)  # generous: CI machines have two busy cores
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        # the URL of every failed request, beside the console's "Failed to load resource" line
        # (which does not name it): a test that sees an unexpected error says which call failed
        self.failed: list[str] = []
        self.page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.page.close()


# the tick labels of one plotly axis that overlap another's box, or repeat another's text (a ",d"
# format over fractional ticks: "1", "1", "1"), on the chart with this id
TICK_OVERLAPS = """(plot) => {
  const id = CSS.escape(plot);
  const out = [];
  for (const g of document.querySelectorAll(`#${id} .xaxislayer-above, #${id} .yaxislayer-above`)) {
    for (const cls of new Set([...g.children].map((c) => c.getAttribute("class")))) {
      const labels = [...g.querySelectorAll(`:scope > g.${cls} text`)].filter((t) => t.textContent.trim());
      const boxes = labels.map((t) => t.getBoundingClientRect());
      for (let i = 0; i < boxes.length; i += 1) for (let j = i + 1; j < boxes.length; j += 1) {
        const a = boxes[i], b = boxes[j], [p, q] = [labels[i].textContent, labels[j].textContent];
        if (p === q || (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)) out.push(`${cls}: ${p} / ${q}`);
      }
    }
  }
  return out;
}"""

# the texts drawn inside a plotly chart's plot area (a shape's label, an annotation), not cut off
# at its edge, on the chart with this id
LABELS_INSIDE = """(plot) => {
  const id = CSS.escape(plot);
  const areas = [...document.querySelectorAll(`#${id} .nsewdrag`)].map((r) => r.getBoundingClientRect());
  return [...document.querySelectorAll(`#${id} .shapelayer text, #${id} .annotation text`)].filter((t) => {
    const b = t.getBoundingClientRect();
    return areas.some((a) => b.left >= a.left - 1 && b.right <= a.right + 1 && b.top >= a.top - 1 && b.bottom <= a.bottom + 1);
  }).map((t) => t.textContent);
}"""


def job_ids(server_url: str) -> set[str]:
    """The ids of the jobs the server holds."""
    with urlopen(f"{server_url}/api/v1/jobs", timeout=30) as answer:
        return {job["id"] for job in json.load(answer)}


def cancel_jobs_since(server_url: str, before: set[str]) -> None:
    """Cancel the jobs started since ``before`` that still run: the simulate, fleet and fleet-plan
    pages run their default answer as they load, and a test that only looks at the page leaves
    that job behind; left running, it takes a core from the tests after it (two such jobs at a
    time, each a whole capacity search or fleet plan) for minutes. No test reads those jobs (a test
    that wants a page's answer waits for it), and a cancelled job stores no run."""
    with urlopen(f"{server_url}/api/v1/jobs", timeout=30) as answer:
        left = [j["id"] for j in json.load(answer) if j["id"] not in before and j["state"] in ("queued", "running")]
    for job_id in left:
        with urlopen(Request(f"{server_url}/api/v1/jobs/{job_id}", method="DELETE"), timeout=30):
            pass


def run_from_link(pg: Any, form: str = "#form") -> None:
    """A page opened from a link with state fills its form and waits: the user's click runs it."""
    pg.wait_for_selector("#await-click")
    pg.click(f"{form} button[type=submit]")


@pytest.fixture()
def desktop(browser: Any) -> Iterator[Page]:
    page = Page(browser, 1280)
    yield page
    page.close()
