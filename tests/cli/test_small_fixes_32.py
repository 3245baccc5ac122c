"""Issue 32, defect 8: the smaller ones, each with its test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from servecap.errors import ServecapError


def test_a_gpu_typed_with_letter_o_gets_a_did_you_mean() -> None:
    from servecap.catalog import lookup_gpu

    with pytest.raises(ServecapError, match=r"unknown GPU \(did you mean: H100-SXM\?\)"):
        lookup_gpu("H1OO")
    with pytest.raises(ServecapError, match=r"unknown GPU; `servecap gpus`"):
        lookup_gpu("zzz")


def test_web_fleet_plan_defaults_are_the_clis() -> None:
    """The web's fleet plan defaulted to TTFT 1,000 / TPOT 50 ms; the CLI's is 2,000 / 100 (p99)."""
    from servecap.planning.run import DEFAULT_SLO

    html = (Path(__file__).parents[2] / "src/servecap/web/static/fleet-plan.html").read_text()
    ttft = re.search(r'name="ttft_ms"[^>]*value="(\d+)"', html)
    tpot = re.search(r'name="tpot_ms"[^>]*value="(\d+)"', html)
    assert ttft and tpot
    assert DEFAULT_SLO.ttft_s is not None and DEFAULT_SLO.tpot_s is not None
    assert float(ttft.group(1)) == DEFAULT_SLO.ttft_s["p99"] * 1e3
    assert float(tpot.group(1)) == DEFAULT_SLO.tpot_s["p99"] * 1e3


def test_export_does_not_fold_long_commands() -> None:
    from servecap.app.export import YAML_WIDTH

    command = "vllm serve " + " ".join(f"--flag-{i} value-{i}" for i in range(40))
    text = yaml.safe_dump({"args": [command]}, sort_keys=False, width=YAML_WIDTH)
    assert command in text.splitlines()[1]


def test_a_pd_run_is_titled_with_its_pd_router() -> None:
    from servecap.cli.fleet_cmd import fleet_router_name
    from servecap.fleet.file_schema import fleet_from_dict

    pools = [
        {"name": "p", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "role": "prefill"},
        {"name": "d", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "role": "decode"},
    ]
    assert fleet_router_name(fleet_from_dict({"pools": pools})) == "P/D prefill prefix-affinity, decode least-kv"
    assert fleet_router_name(fleet_from_dict({"pools": pools, "pd_router": "sglang"})) == "P/D sglang"
    one = [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}]
    assert fleet_router_name(fleet_from_dict({"pools": one, "router": "least-kv"})) == "least-kv"


def test_replay_of_a_once_session_says_how_to_record() -> None:
    from servecap.app.monitor_replay import history_workload
    from servecap.monitor.history import History

    h = History(
        source="monitor.sqlite", time_s=(0.0,), rate_req_s=(1.0,), replicas=(1,), prompt_tokens=None, output_tokens=None
    )
    with pytest.raises(ServecapError, match=r"holds 1 \(`monitor --once` stores one\): record a session first"):
        history_workload(h)


def test_monitor_table_shows_urls_whole() -> None:
    """The monitor's table cut URLs to `http://127.0.0.1:1800…` on an 80-column terminal."""
    from rich.console import Console

    from servecap.app.monitor import MonitorReport, TargetReport
    from servecap.cli.monitor_cmd import render

    urls = [f"http://127.0.0.1:{18000 + i}/metrics" for i in range(2)]
    targets = [
        TargetReport(url=u, up=True, error=None, down_count=0, engine="vllm", model_name="m", window=None) for u in urls
    ]
    report = MonitorReport(
        time_s=10.0, replicas_up=2, replicas_down=0, targets=targets, fleet=None, headroom=None, notes=[]
    )
    console = Console(width=80, record=True, force_terminal=False)
    console.print(render(report))
    text = "".join(console.export_text().split())  # folded lines joined back
    for u in urls:
        assert u in text


def test_fleet_html_report_shows_load_before_busy(tmp_path: Path) -> None:
    """The fleet HTML report (and the web page) said "utilisation 100%" for a replica at a
    fraction of its capacity: it meant a request was in flight."""
    from click.testing import CliRunner

    from servecap.cli.main import cli

    page = tmp_path / "fleet.html"
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--replicas", "1"]
    res = CliRunner().invoke(cli, [*args, "--rate", "2", "--num-requests", "60", "--html", str(page), "--json"])
    assert res.exit_code == 0, res.output
    html = page.read_text()
    assert "<th>load (req/s)</th><th>busy (a request in flight)</th>" in html and "utilisation" not in html
    js = (Path(__file__).parents[2] / "src/servecap/web/static/fleet.js").read_text()
    assert '"busy (a request in flight)"' in js and '"utilisation"' not in js
