"""``servecap simulate`` and ``servecap capacity`` in-process."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from servecap.cli.main import cli

BASE = ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "4096"]


def test_simulate_json_has_the_issue_keys(tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    res = CliRunner().invoke(
        cli,
        [
            "simulate",
            *BASE,
            "--rate",
            "5",
            "--prompt-tokens",
            "300",
            "--output-tokens",
            "50",
            "--num-requests",
            "100",
            "--seed",
            "1",
            "--ttft-slo-ms",
            "1000",
            "--json",
            "--html",
            str(html),
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_time_s"):
        assert set(d[key]) >= {"p50", "p90", "p99", "mean"}
    assert d["num_requests"] == 100 and d["goodput_req_s"] is not None
    text = html.read_text()
    assert "<script src=" not in text and "Plotly" in text
    # the report shows the 80% intervals --json carries
    p99 = d["interval"]["ttft_s.p99"]
    assert "80% intervals" in text and f"TTFT p99 {p99['low'] * 1e3:,.1f}–{p99['high'] * 1e3:,.1f} ms" in text


def test_simulate_tables_and_workload_errors(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["simulate", *BASE, "--rate", "2", "--num-requests", "20"])
    assert res.exit_code == 0 and "TTFT" in res.stdout
    bad = tmp_path / "w.yaml"
    bad.write_text("arrival: {kind: poisson, rate_per_s: 1}\nprompt_tokens: 10\noutput_tokens: 5\nnum_request: 3\n")
    res = CliRunner().invoke(cli, ["simulate", *BASE, "--workload", str(bad)])
    assert isinstance(res.exception, Exception) and "num_requests" in str(res.exception)


def test_capacity_json() -> None:
    res = CliRunner().invoke(
        cli,
        [
            "capacity",
            *BASE,
            "--rate",
            "--prompt-tokens",
            "200",
            "--output-tokens",
            "100",
            "--num-requests",
            "300",
            "--ttft-slo-ms",
            "500",
            "--tpot-slo-ms",
            "30",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["max_rate_req_s"] > 0 and d["planner_rate_req_s"] > 0
    assert len(d["table"]) >= 4
