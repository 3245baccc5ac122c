"""Trace samples on the pages, in a real browser: the simulate and fleet pages replay a shipped
sample (picked from GET /traces) with its time scale and show the prefix-cache hit rate the
trace's block hashes give, the CLI's number for the same flags; a link naming a path sends
``sample:<it>``, refused by name (the server reads shipped samples only)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from tests.web.conftest import Page

from servecap.cli.main import cli

pytestmark = pytest.mark.browser


def _cli(*args: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _pick(pg: Any, sample: str, time_scale: str) -> None:
    pg.wait_for_function("() => document.querySelector('#trace').options.length > 1")
    pg.select_option("#trace", sample)
    pg.fill("[name=time_scale]", time_scale)
    assert "agent sessions" in pg.inner_text("#trace-about")


def test_simulate_replays_a_sample_and_shows_its_hit_rate(desktop: Page, server_url: str) -> None:
    pg = desktop.page
    model, gpu = "meta-llama/Llama-3.1-8B", "H100-SXM"
    pg.goto(f"{server_url}/simulate?mode=simulate&model={model}&gpu={gpu}", wait_until="load")
    pg.wait_for_selector("#await-click")
    _pick(pg, "agentic", "2")
    pg.click("#form button[type=submit]")
    pg.wait_for_selector("#prefix-hit-rate")
    shown = pg.inner_text("#prefix-hit-rate")
    want = _cli("simulate", "-m", model, "-g", gpu, "--trace", "sample:agentic", "--time-scale", "2")
    assert shown == f"{100 * want['prefix_cache_hit_rate']:.1f}%"
    assert want["prefix_cache_hit_rate"] > 0.5  # the sessions resend their context: most blocks hit
    assert "replayed sample:agentic" in pg.inner_text("#result")
    desktop.shot("simulate-trace")
    assert desktop.errors == []


def test_fleet_replays_a_sample_and_a_path_is_refused_by_name(desktop: Page, server_url: str) -> None:
    pg = desktop.page
    pg.goto(f"{server_url}/fleet?replicas=2", wait_until="load")
    pg.wait_for_selector("#await-click")
    _pick(pg, "agentic", "0.5")
    pg.click("#form button[type=submit]")
    pg.wait_for_selector("#prefix-hit-rate")
    hit = float(pg.inner_text("#prefix-hit-rate").rstrip("%"))
    want = _cli(
        "fleet", "simulate", "-m", pg.input_value("[name=model]"), "-g", pg.input_value("[name=gpu]"),
        "--max-model-len", pg.input_value("[name=max_model_len]"), "--router", pg.input_value("[name=router]"),
        "--replicas", "2", "--trace", "sample:agentic", "--time-scale", "0.5", "--seed", "0",
    )  # fmt: skip
    assert hit == pytest.approx(100 * want["summary"]["prefix_cache_hit_rate"], abs=0.05)
    # a link that names a file: the page sends it as a sample's name, and the server refuses it
    pg.goto(f"{server_url}/fleet?trace=%2Fetc%2Fpasswd", wait_until="load")
    pg.wait_for_selector("#await-click")
    pg.wait_for_function("() => document.querySelector('#trace').options.length > 1")
    pg.click("#form button[type=submit]")
    pg.wait_for_selector("#error:not(.hidden)")
    assert "no such sample" in pg.inner_text("#error")


def test_fleet_plan_sizes_the_fleet_for_a_sample(desktop: Page, server_url: str) -> None:
    pg = desktop.page
    pg.goto(f"{server_url}/fleet-plan?gpus=H100-SXM&max_model_len=32768", wait_until="load")  # no levers: none
    pg.wait_for_selector("#await-click")
    _pick(pg, "agentic", "1")
    pg.click("#form button[type=submit]")
    pg.wait_for_selector("#prefix-hit-rate, #error:not(.hidden)")
    assert pg.inner_text("#error") == ""
    want = _cli(
        "fleet", "plan", "-m", pg.input_value("[name=model]"), "-g", "H100-SXM", "-l", pg.input_value("[name=max_model_len]"),
        "--router", pg.input_value("[name=router]"), "--levers", "none", "--slo-ttft-p99-s", "2", "--slo-tpot-p99-s", "0.1",
        "--trace", "sample:agentic",
    )  # fmt: skip
    assert pg.inner_text("#chosen-replicas") == str(want["chosen"]["replicas"])
    assert pg.inner_text("#prefix-hit-rate") == f"{100 * want['fleet']['prefix_cache_hit_rate']:.1f}%"
    assert "replayed sample:agentic" in pg.inner_text("#answer")
    desktop.shot("fleet-plan-trace")
    assert desktop.errors == []
