"""The plan, compare and simulate forms take their defaults from the API's schema, which takes
them from the requests (app/): the page shows what ``--help`` shows, written nowhere else."""

from __future__ import annotations

import pytest
from tests.web.conftest import Page, cancel_jobs_since, job_ids

from servecap.app.compare import CompareRequest
from servecap.app.plan import PlanRequest
from servecap.app.simulate_request import SimulateRequest

pytestmark = pytest.mark.browser


def _filled(desktop: Page, url: str, selector: str) -> str:
    pg = desktop.page
    pg.goto(url, wait_until="load")
    pg.wait_for_function(f"() => document.querySelector({selector!r}).value !== ''", timeout=30_000)
    return pg.input_value(selector)


def test_forms_show_the_requests_defaults(desktop: Page, server_url: str) -> None:
    before = job_ids(server_url)
    plan, compare, sim = PlanRequest(), CompareRequest(), SimulateRequest()
    assert _filled(desktop, f"{server_url}/plan", "input[name=turns]") == str(plan.turns)
    assert desktop.page.input_value("input[name=prompt_tokens]") == str(plan.prompt_tokens)
    assert _filled(desktop, f"{server_url}/compare", "input[name=counts]") == ",".join(map(str, compare.counts))
    assert desktop.page.input_value("input[name=kv_dtypes]") == ",".join(compare.kv_dtypes)
    desktop.page.wait_for_function(f"() => document.querySelector('#model').value === {compare.model!r}")
    assert _filled(desktop, f"{server_url}/simulate", "input[name=seed]") == str(sim.seed)
    assert desktop.page.input_value("input[name=output_tokens]") == str(sim.output_tokens)
    assert desktop.page.input_value("input[name=num_requests]") == ""  # the server's 1,000, as the CLI's
    assert desktop.errors == []
    cancel_jobs_since(server_url, before)  # the simulate page's default answer: no test reads it
