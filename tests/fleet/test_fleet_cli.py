"""``servecap fleet simulate`` in-process: flags, fleet files, JSON, HTML, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.errors import ServecapError
from servecap.fleet.file_schema import build_fleet, fleet_from_dict, load_fleet_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = ["--num-requests", "200", "--prompt-tokens", "256", "--output-tokens", "32", "--seed", "1"]


def test_simple_flags_json_and_html(tmp_path: Path) -> None:
    html = tmp_path / "fleet.html"
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--max-model-len", "4096"]
    args += ["--replicas", "3", "--router", "least-outstanding", "--rate", "30", "--ttft-slo-ms", "500"]
    res = CliRunner().invoke(cli, [*args, *SMALL, "--json", "--html", str(html)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["outcomes"] == {"ok": 200}
    assert len(d["replicas"]) == 3 and sum(r["routed"] for r in d["replicas"]) == 200
    assert d["summary"]["slo_attainment"] is not None and d["cost_usd"] > 0
    assert {"time_s", "arrival_rate_req_s", "ready", "starting", "queue_depth", "p99_ttft_s"} <= set(d["timeseries"])
    page = html.read_text(encoding="utf-8")
    assert "Rolling p99 TTFT (ms)" in page and "TTFT SLO 500 ms" in page and "simulated time (s)" in page
    table = CliRunner().invoke(cli, [*args, *SMALL])
    assert table.exit_code == 0 and "fleet latency (least-outstanding)" in table.output


@pytest.mark.parametrize("name", ["fleet-simple.yaml", "fleet-autoscaled.yaml"])
def test_example_files_build(name: str) -> None:
    spec, _ = build_fleet(load_fleet_file(EXAMPLES / name))
    assert spec.pools and spec.router in ("least-outstanding", "prefix-affinity")


def test_fleet_file_run_with_router_override(tmp_path: Path) -> None:
    f = tmp_path / "f.json"
    f.write_text(
        json.dumps(
            {
                "pools": [
                    {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096, "replicas": 2},
                ],
                "router": {"name": "random"},
            }
        )
    )
    res = CliRunner().invoke(
        cli, ["fleet", "simulate", "--fleet", str(f), "--router", "power-of-two", "--rate", "10", *SMALL, "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["outcomes"] == {"ok": 200}


@pytest.mark.parametrize(
    ("raw", "start"),
    [
        ({"pools": []}, "fleet.pools=[]"),
        (
            {"pools": [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replica": 2}]},
            "fleet.pools[0]='replica': unknown key (did you mean: replicas?)",
        ),
        ({"pools": [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 0}]}, "pools.main.replicas=0"),
        (
            {
                "pools": [
                    {
                        "model": "meta-llama/Llama-3.1-8B",
                        "gpu": "H100",
                        "autoscaler": {"min_replicas": 5, "max_replicas": 2},
                    }
                ]
            },
            "autoscaler.min_replicas=5",
        ),
        ({"pools": [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}], "router": "lest-kv"}, "router='lest-kv'"),
        (
            {
                "pools": [
                    {
                        "model": "meta-llama/Llama-3.1-8B",
                        "gpu": "H100",
                        "autoscaler": {"max_replicas": 2, "downscale_stabilization_s": -5},
                    }
                ]
            },
            "fleet.pools[0].autoscaler.downscale_stabilization_s=-5",
        ),
        (
            {"pools": [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "cold_start": {"compile": -1}}]},
            "cold_start.compile=-1",
        ),
        ({"pools": [{"gpu": "H100"}]}, "fleet.pools[0].model=None: is required"),
    ],
)
def test_bad_fleet_files_name_the_field(raw: dict[str, object], start: str) -> None:
    with pytest.raises(ServecapError) as e:
        build_fleet(fleet_from_dict(raw))
    assert str(e.value).startswith(start)


def test_bad_file_is_one_line_and_exit_2(tmp_path: Path, servecap_cli: Callable[..., Any]) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("pools:\n  - model: meta-llama/Llama-3.1-8B\n    gpu: H100\n    replicas: 0\n")
    proc = servecap_cli("fleet", "simulate", "--fleet", str(f), "--rate", "5")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: pools.main.replicas=0: a pool without an autoscaler needs at least 1 replica"
    ]
