"""The web UI in a real browser: every page loads clean, forms give the CLI's numbers, a shared
link restores the view, bad input shows the CLI's one-line error, a simulation shows progress."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest
from click.testing import CliRunner
from tests.web.conftest import LABELS_INSIDE, TICK_OVERLAPS, Page, cancel_jobs_since, job_ids, run_from_link

from servecap.cli.main import cli
from servecap.web import PAGES

# half the browser tests (28 of 55, the pages' default answers among them): a browser group of
# their own, so that under `make test` the two halves run on the two workers side by side (one
# browser each), not all 55 one after another on one worker while the other has run out of work
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-pages")]


def _cli(*args: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _users(text: str) -> int:
    return int(text.replace(",", ""))


def _headline_users(data: dict[str, Any]) -> int:
    """The users a page shows: the interval's bias-corrected estimate (issue 32), else the model's."""
    iv = data.get("interval", {}).get("users_served")
    return int(iv["estimate"]) if iv else int(data["users_served"])


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
@pytest.mark.parametrize("name", PAGES)
def test_every_page_loads_without_console_errors(browser: Any, server_url: str, name: str, width: int) -> None:
    before = job_ids(server_url)
    page = Page(browser, width)
    try:
        page.page.goto(f"{server_url}/{name}", wait_until="load")
        page.page.wait_for_function("() => document.querySelector('#model, select[name=kind]').options.length > 1")
        assert page.page.locator("header nav a.current").inner_text()
        page.shot(f"{name}-{'desktop' if width > 800 else 'phone'}")
        assert page.errors == [], page.failed
        # no page is wider than the screen (tables scroll inside their box)
        assert page.page.evaluate("document.documentElement.scrollWidth") <= width
    finally:
        page.close()
        cancel_jobs_since(server_url, before)  # the default answer the page started: no test reads it


def test_plan_form_gives_the_cli_numbers(desktop: Page, server_url: str) -> None:
    pg = desktop.page
    pg.goto(f"{server_url}/plan", wait_until="load")
    want = _cli("plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "H200", "--weights-dtype", "fp8", "-l", "8192")
    pg.select_option("#model", "meta-llama/Llama-3.1-70B")
    pg.select_option("#gpu", want["gpu"])
    pg.select_option("select[name=weights_dtype]", "fp8")
    pg.fill("input[name=max_model_len]", "8192")
    pg.click("button[type=submit]")
    pg.wait_for_selector("#result:not(.stale) #users-served")  # the new answer, not the default one greyed out
    assert _users(pg.inner_text("#users-served")) == _headline_users(want)
    assert f"{want['kv_cache_tokens']:,}" in pg.inner_text("#result")
    assert "model=meta-llama%2FLlama-3.1-70B" in pg.url and "weights_dtype=fp8" in pg.url
    desktop.shot("plan-worked-example")
    assert desktop.errors == []


def test_a_shared_link_restores_the_view(desktop: Page, server_url: str) -> None:
    query = urlencode({"model": "Qwen/Qwen3-8B", "gpu": "L40S", "max_model_len": "16384", "tpot_slo_ms": "50"})
    pg = desktop.page
    pg.goto(f"{server_url}/plan?{query}")
    pg.wait_for_selector("#users-served")
    assert pg.input_value("#model") == "Qwen/Qwen3-8B"
    assert pg.input_value("input[name=tpot_slo_ms]") == "50"
    want = _cli("plan", "-m", "Qwen/Qwen3-8B", "-g", "L40S", "-l", "16384", "--tpot-slo-ms", "50")
    assert _users(pg.inner_text("#users-served")) == _headline_users(want)


def test_bad_input_shows_the_cli_error(desktop: Page, server_url: str) -> None:
    pg = desktop.page
    pg.goto(f"{server_url}/plan?" + urlencode({"model": "meta-llama/Llama-3.1-70B", "gpu": "H100"}))
    pg.wait_for_selector("#error:not(.hidden)")
    text = pg.inner_text("#error")
    assert text.startswith("weights_bytes_per_gpu=") and "try --weights-dtype fp8" in text
    pg.goto(f"{server_url}/plan?" + urlencode({"gpu": "H9000"}))
    pg.wait_for_selector("#error:not(.hidden)")
    assert pg.inner_text("#error").startswith("gpu='H9000': unknown GPU")
    desktop.shot("plan-error")


def test_compare_ranks_like_the_cli(desktop: Page, server_url: str) -> None:
    pg = desktop.page
    query = urlencode(
        {"model": "meta-llama/Llama-3.1-8B", "gpus": "H100,L40S,A100-80GB", "counts": "1", "tpot_slo_ms": "50"}
    )
    pg.goto(f"{server_url}/compare?{query}")
    pg.wait_for_selector("#answer")
    want = _cli(
        "compare",
        "-m",
        "meta-llama/Llama-3.1-8B",
        "--gpus",
        "H100,L40S,A100-80GB",
        "--counts",
        "1",
        "--tpot-slo-ms",
        "50",
    )
    best = want["candidates"][0]
    answer = pg.inner_text("#answer")
    assert best["gpu"] in answer and f"{best['users_served']:,}" in answer
    desktop.shot("compare-result")
    assert desktop.errors == []


def test_a_simulation_shows_progress_then_its_result(desktop: Page, server_url: str) -> None:
    pg = desktop.page
    query = urlencode(
        {
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": "H100-SXM",
            "max_model_len": "8192",
            "rate": "20",
            "num_requests": "4000",
            "seed": "1",
            "mode": "simulate",
        }
    )
    pg.goto(f"{server_url}/simulate?{query}")
    run_from_link(pg)
    pg.wait_for_selector("#progress:not(.hidden)", timeout=30_000)
    pg.wait_for_selector("#answer", timeout=120_000)
    want = _cli(
        "simulate",
        "-m",
        "meta-llama/Llama-3.1-8B",
        "-g",
        "H100",
        "-l",
        "8192",
        "--rate",
        "20",
        "--num-requests",
        "4000",
        "--seed",
        "1",
    )
    answer = pg.inner_text("#answer")
    assert re.search(rf"{want['completed']:,} of {want['num_requests']:,} requests", answer)
    assert f"{want['ttft_s']['p99'] * 1e3:,.1f}" in answer
    # issue 32: the SLO verdict and which figure decides it, as the CLI's
    assert pg.inner_text("#slo-verdict") == want["slo_verdict"]["text"]
    assert "capacity's test" in (pg.get_attribute("#slo-verdict", "title") or "")
    desktop.shot("simulate-result")
    assert desktop.errors == []


def test_a_fleet_run_shows_replicas_scaling(desktop: Page, server_url: str) -> None:
    query = urlencode(
        {
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": "H100-SXM",
            "max_model_len": "8192",
            "replicas": "1",
            "max_replicas": "4",
            "cold_start": "instant",
            "rate": "10",
            "step_rate": "40",
            "step_at_s": "30",
            "duration_s": "120",
            "ttft_ms": "1000",
            "tpot_ms": "50",
        }
    )
    pg = desktop.page
    pg.goto(f"{server_url}/fleet?{query}")
    run_from_link(pg)
    pg.wait_for_selector("#answer", timeout=120_000)
    assert re.search(r"([\d,]+) of \1 requests served", pg.inner_text("#answer"))
    assert pg.locator("#result table tr").count() >= 3  # the header and more than one replica: it scaled up
    desktop.shot("fleet-result")
    assert desktop.errors == []


def test_runs_page_lists_and_opens_a_stored_simulation(desktop: Page, server_url: str) -> None:
    """The simulations above are kept in the run store; the runs page lists one and opens it."""
    pg = desktop.page
    pg.goto(f"{server_url}/runs?kind=simulated")
    pg.wait_for_selector("a[data-run]")
    run_id = pg.get_attribute("a[data-run]", "data-run")
    pg.click("a[data-run]")
    pg.wait_for_selector("#run-id")
    assert pg.inner_text("#run-id") == run_id
    assert f"run={run_id}" in pg.url  # the opened run is in the link too
    pg.wait_for_selector("#scatter .main-svg")
    points = pg.evaluate("document.getElementById('scatter').data[0].x.filter((x) => x !== undefined).length")
    assert points > 0  # one marker per request
    desktop.shot("runs-opened")
    assert desktop.errors == []


def test_capacity_page_headline_is_the_clis(desktop: Page, server_url: str) -> None:
    """Issue 20, defect 4: the headline read `max_load` (the API says `max_rate_req_s`/`max_users`)
    and showed "–", its marker at 0."""
    pg = desktop.page
    args = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "max_model_len": "4096", "rate": "30",
            "ttft_slo_ms": "1000", "tpot_slo_ms": "50", "mode": "capacity"}  # fmt: skip
    pg.goto(f"{server_url}/simulate?{urlencode(args)}")
    run_from_link(pg)
    pg.wait_for_selector("#capacity", timeout=120_000)
    want = _cli("capacity", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "4096", "--rate", "30",
                "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50")  # fmt: skip
    iv = want["interval"]  # the 80% interval next to the headline
    # issue 32, defect 3: the headline is the bias-corrected answer, inside its interval
    assert pg.inner_text("#capacity") == f"{iv['estimate']:,.2f}"
    assert pg.inner_text("#capacity-interval") == (
        f"(80% interval {iv['low']:,.2f}–{iv['high']:,.2f}; servecap's model {want['max_rate_req_s']:,.2f})"
    )
    marker = pg.evaluate("document.getElementById('curve')._fullLayout.shapes.map((s) => s.x0)")
    assert want["max_rate_req_s"] in [round(x, 9) for x in marker] or any(
        abs(x - want["max_rate_req_s"]) < 1e-6 for x in marker
    )
    # issue 32, defect 8: no tick label over another on the log axes, and each SLO line labelled
    assert pg.evaluate(TICK_OVERLAPS, "curve") == []
    shown = pg.evaluate(LABELS_INSIDE, "curve")
    assert "TTFT SLO 1,000 ms" in shown and "TPOT SLO 50 ms" in shown
    desktop.shot("capacity-curve")
    assert desktop.errors == []


def test_plan_page_shows_the_apis_interval_next_to_the_headline(desktop: Page, server_url: str) -> None:
    """Issue 21, item 4: the 80% intervals the API returns (users served, TPOT) beside the numbers."""
    pg = desktop.page
    query = urlencode({"model": "Qwen/Qwen3-8B", "gpu": "L40S", "max_model_len": "16384", "tpot_slo_ms": "50"})
    with pg.expect_response(lambda r: r.url.endswith("/api/v1/plan") and r.request.method == "POST") as answer:
        pg.goto(f"{server_url}/plan?{query}")
    data = answer.value.json()
    pg.wait_for_selector("#users-interval")
    users, tpot = data["interval"]["users_served"], data["interval"]["tpot_s"]
    model = (
        f"; servecap's model {users['model']:,.0f}" if f"{users['model']:,.0f}" != f"{users['estimate']:,.0f}" else ""
    )
    assert pg.inner_text("#users-interval") == f"(80% interval {users['low']:,.0f}–{users['high']:,.0f}{model})"
    assert pg.inner_text("#tpot-interval").startswith(
        f"(80% interval {tpot['low'] * 1e3:,.1f}–{tpot['high'] * 1e3:,.1f}"
    )
    assert pg.get_attribute("#users-interval", "title") == users["note"]
    assert desktop.errors == []


def test_plan_page_headline_lies_inside_its_interval(desktop: Page, server_url: str) -> None:
    """Issue 32, defect 3: the 8B on an H100 showed 987 users beside an interval of 1,012-1,109."""
    pg = desktop.page
    query = urlencode({"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM"})
    with pg.expect_response(lambda r: r.url.endswith("/api/v1/plan") and r.request.method == "POST") as answer:
        pg.goto(f"{server_url}/plan?{query}")
    data = answer.value.json()
    pg.wait_for_selector("#users-interval")
    shown = _users(pg.inner_text("#users-served"))
    iv = data["interval"]["users_served"]
    assert iv["low"] <= shown <= iv["high"] and shown == int(iv["estimate"])
    assert f"servecap's model {data['users_served']:,}" in pg.inner_text("#users-interval")
    # defect 5: the page says the users keep the batch below 100% busy
    assert f"batch {100 * data['busy_fraction']:.0f}% busy" in pg.inner_text("#busy")
    assert desktop.errors == []


# The default request of each page (its form as it loads), as the CLI's flags.
FLEET_DEFAULT = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100-SXM", "-l", "8192", "--replicas", "4",
                 "--router", "least-outstanding", "--rate", "40", "--duration-s", "300", "-p", "1024", "-o", "128",
                 "--ttft-slo-ms", "2000", "--tpot-slo-ms", "100", "--seed", "0"]  # fmt: skip
FLEET_PLAN_DEFAULT: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "candidates": [{"gpu": "H100-SXM", "max_model_len": 8192}, {"gpu": "L40S", "max_model_len": 8192}],
    "traffic": {
        "peak_rps": 20,
        "request_interval_s": 30,
        "workload": {
            "arrival": {"kind": "poisson", "rate_per_s": 1},
            "prompt_tokens": 1024,
            "output_tokens": 128,
            "duration_s": 600,
        },
    },
    "slo": {"ttft_s": {"p99": 2.0}, "tpot_s": {"p99": 0.1}},  # the CLI's default SLO (issue 32)
    "router": "least-outstanding",
    "levers": ["router", "fp8-kv", "cheaper-gpu", "scale-ahead", "warm-pool", "cache", "overflow"],
    "seed": 0,
}


def _jobs_idle(server_url: str) -> None:
    """Wait until the server runs no job (a finished simulation lands in the run store)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with urlopen(f"{server_url}/api/v1/jobs") as answer:
            if all(j["state"] not in ("queued", "running") for j in json.load(answer)):
                return
        time.sleep(0.2)
    raise AssertionError("the server's jobs did not finish")


def _plan_default(pg: Any, tmp: Path, data: Path) -> None:
    pg.wait_for_selector("#users-served")
    assert _users(pg.inner_text("#users-served")) == _headline_users(_cli("plan"))  # the built-in example


def _compare_default(pg: Any, tmp: Path, data: Path) -> None:
    pg.wait_for_selector("#answer")
    want = _cli("compare")
    best = next(c for c in want["candidates"] if not c["problem"] and c["usd_per_user_month"] is not None)
    label = f"{best['num_gpus']}× {best['gpu']} {best['weights_dtype']}/{best['kv_cache_dtype']}"
    answer = pg.inner_text("#answer")
    assert f"Cheapest: {label} — {best['users_served']:,} users at ${best['usd_per_user_month']:,.2f}" in answer, answer


def _simulate_default(pg: Any, tmp: Path, data: Path) -> None:
    pg.wait_for_selector("#capacity")  # `servecap capacity` with no flags (simulate needs a load)
    want = _cli("capacity")
    assert pg.input_value("select[name=mode]") == "capacity"
    # the corrected answer, whole users rounded down as the page does
    assert pg.inner_text("#capacity") == f"{math.floor(want['interval']['estimate']):,}"


def _fleet_default(pg: Any, tmp: Path, data: Path) -> None:
    pg.wait_for_selector("#answer")
    want = _cli(*FLEET_DEFAULT)["summary"]
    answer = pg.inner_text("#answer")
    assert f"{want['completed']:,} of {want['num_requests']:,} requests served" in answer, answer
    assert f"p99 TTFT {want['ttft_s']['p99'] * 1e3:,.1f} ms" in answer, answer


def _fleet_plan_default(pg: Any, tmp: Path, data: Path) -> None:
    pg.wait_for_selector("#answer")
    (tmp / "plan.json").write_text(json.dumps(FLEET_PLAN_DEFAULT))
    want = _cli("fleet", "plan", "--plan", str(tmp / "plan.json"))
    assert pg.inner_text("#chosen-gpu") == want["chosen"]["name"]
    assert _users(pg.inner_text("#chosen-replicas")) == want["chosen"]["replicas"]
    assert pg.inner_text("#chosen-usd") == f"${want['fleet']['usd_per_month']:,.0f}"
    # issue 32, defect 1: the page offers the chosen fleet as a fleet file, as `fleet plan --out` writes it
    from urllib.parse import unquote

    href = pg.get_attribute("#fleet-file", "href")
    assert href is not None and href.startswith("data:application/json")
    assert json.loads(unquote(href.split(",", 1)[1])) == want["fleet_file"]


def _runs_default(pg: Any, tmp: Path, data: Path) -> None:
    pg.wait_for_selector("#list table, #list p")
    want = _cli("runs", "--db", str(data / "runs.sqlite"))
    shown = pg.eval_on_selector_all("a[data-run]", "(links) => links.map((a) => a.dataset.run)")
    assert shown == [r["run_id"] for r in want]


DEFAULT_ANSWERS = {"plan": _plan_default, "compare": _compare_default, "simulate": _simulate_default,
                   "fleet": _fleet_default, "fleet-plan": _fleet_plan_default, "runs": _runs_default}  # fmt: skip


@pytest.mark.parametrize("name", PAGES)
def test_every_page_shows_the_clis_default_answer_before_a_submit(
    desktop: Page, server_url: str, server_data: Path, tmp_path: Path, name: str
) -> None:
    """Issue 20, defect 4: the simulate, fleet and fleet-plan pages showed nothing until the first
    submit. Opened with nothing in the link, each page shows the answer to its form as it loads,
    and that headline is the CLI's ``--json`` for the same request."""
    assert set(DEFAULT_ANSWERS) == set(PAGES)  # a new page comes with its default answer
    _jobs_idle(server_url)  # the run list is steady while the runs page and the CLI read it
    pg = desktop.page
    pg.goto(f"{server_url}/{name}")
    DEFAULT_ANSWERS[name](pg, tmp_path, server_data)
    assert pg.locator("#error").is_hidden()
    assert desktop.errors == []
