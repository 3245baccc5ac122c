"""Output a person can use: complete tables (never "…"), compare's prices and SLOs, progress
when not on a terminal, HTML reports that carry the answer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table

from servecap.cli.console import print_table, progress_line, progress_reporter
from servecap.cli.main import cli
from servecap.progress import Progress

runner = CliRunner()


def test_narrow_terminal_tables_keep_numbers_whole() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=40, force_terminal=True, color_system=None)
    t = Table()
    t.add_column("GPU")
    t.add_column("users", justify="right")
    t.add_column("$/user/month", justify="right")
    t.add_row("RTX-6000-Ada-Generation-48GB", "1,140,000", "$123,456.78")
    print_table(console, t)
    out = buf.getvalue()
    assert "…" not in out and "1,140,000" in out and "$123,456.78" in out


def test_piped_compare_is_complete_and_names_its_slo_and_prices() -> None:
    result = runner.invoke(
        cli, ["compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "H100,RTX-6000-Ada,RTX-4090", "--counts", "1"]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "…" not in out and "RTX-6000-Ada" in out and "RTX-4090" in out
    assert "TTFT <= 2,000 ms, TPOT <= 100 ms" in out
    assert "unpriced" in out and "--price-per-hour" in out


def test_compare_prices_an_unpriced_gpu() -> None:
    base = ["compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "H100,RTX-6000-Ada", "--counts", "1", "--json"]
    before = json.loads(runner.invoke(cli, base).stdout)
    assert before["unpriced_gpus"] == ["RTX-6000-Ada"]
    assert before["slo"]["source"] == "default"
    ada = [c for c in before["candidates"] if c["gpu"] == "RTX-6000-Ada"]
    assert ada and all(c["usd_per_user_month"] is None for c in ada)  # shown, not dropped
    after = json.loads(runner.invoke(cli, [*base, "--price-per-hour", "RTX-6000-Ada=0.5"]).stdout)
    assert after["unpriced_gpus"] == []
    ranked = [c for c in after["candidates"] if c["gpu"] == "RTX-6000-Ada" and c["usd_per_user_month"]]
    assert ranked and all(c["price_source"] == "request" for c in ranked)
    flat = json.loads(runner.invoke(cli, [*base, "--price-per-hour", "1.5"]).stdout)
    assert all(c["usd_per_hour"] in (None, 1.5) for c in flat["candidates"])


def test_progress_lines_every_few_seconds_when_not_a_terminal() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    now = [0.0]
    with progress_reporter(console, interval_s=5.0, clock=lambda: now[0]) as report:
        for i in range(1, 31):
            now[0] = float(i)
            report(Progress("simulate", i * 100, 3000, "requests"))
    lines = buf.getvalue().splitlines()
    assert len(lines) == 6 and lines[0] == "simulate: 500 / 3,000 requests (17%)"
    assert (
        progress_line(Progress("capacity", 3, None, "simulations", "40 users meets the SLOs"))
        == "capacity: 3 simulations - 40 users meets the SLOs"
    )


def test_capacity_html_carries_the_answer(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    html = tmp_path / "cap.html"
    result = runner.invoke(
        cli,
        [
            "capacity",
            "-m",
            "meta-llama/Llama-3.1-8B",
            "-g",
            "H100",
            "-l",
            "4096",
            "--prompt-tokens",
            "200",
            "--output-tokens",
            "50",
            "--rate",
            "--num-requests",
            "200",
            "--ttft-slo-ms",
            "500",
            "--tpot-slo-ms",
            "30",
            "--html",
            str(html),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    text = html.read_text()
    assert "capacity:" in text and "req/s per replica" in text
    iv = json.loads(result.stdout)["interval"]  # the report shows the interval --json carries
    assert f"(80% interval {iv['low']:,.2f}–{iv['high']:,.2f})" in text and "80% interval" in text
    assert "deployment" in text and "workload" in text and "poisson arrivals" in text
    assert "TTFT SLO 500 ms" in text and "TPOT SLO 30 ms" in text
    assert "latency (ms, log scale)" in text and "offered load (req/s)" in text
    assert "ttft_p50_s" not in text.split("<script")[0]


def test_validation_error_helper_is_one_line() -> None:
    from servecap.app.compare import compare_request
    from servecap.errors import ServecapError

    with pytest.raises(ServecapError, match=r"^counts=\[\]: List should have at least 1 item"):
        compare_request(counts=[])
