"""``servecap sweep``: points from axes, identical results on every executor, one-line errors."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.app.fleet_sweep import run_sweep, sweep_from_dict, sweep_points
from servecap.cli.main import cli
from servecap.distributed import make_executor
from servecap.errors import ServecapError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLEET = {
    "pools": [
        {"name": "main", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096, "replicas": 2}
    ],
    "router": "round-robin",
}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 10},
    "prompt_tokens": 256,
    "output_tokens": 32,
    "num_requests": 150,
}


def _sweep(**kw: Any) -> dict[str, Any]:
    return {
        "fleet": FLEET,
        "workload": WORKLOAD,
        "axes": {"fleet.router": ["round-robin", "least-outstanding"], "workload.arrival.rate_per_s": [10, 20]},
        **kw,
    }


def test_grid_and_zip_points() -> None:
    grid = sweep_points(sweep_from_dict(_sweep()))
    assert [p.values for p in grid] == [
        {"fleet.router": "round-robin", "workload.arrival.rate_per_s": 10},
        {"fleet.router": "round-robin", "workload.arrival.rate_per_s": 20},
        {"fleet.router": "least-outstanding", "workload.arrival.rate_per_s": 10},
        {"fleet.router": "least-outstanding", "workload.arrival.rate_per_s": 20},
    ]
    assert grid[3].fleet["router"] == "least-outstanding" and grid[3].workload["arrival"]["rate_per_s"] == 20
    assert FLEET["router"] == "round-robin"  # the base is not changed
    z = sweep_points(sweep_from_dict(_sweep(mode="zip")))
    assert [p.values["workload.arrival.rate_per_s"] for p in z] == [10, 20]


def test_serial_and_process_pool_give_identical_results() -> None:
    points = sweep_points(sweep_from_dict(_sweep()))
    serial = run_sweep(points, make_executor("serial"))
    ex = make_executor("process", workers=2)
    try:
        pool = run_sweep(points, ex)
    finally:
        ex.close()
    assert not serial.errors and not pool.errors
    for a, b in zip(serial.results, pool.results, strict=True):
        assert a is not None and b is not None
        assert a.row == b.row
        assert a.records == b.records


@pytest.mark.parametrize(
    ("axes", "field"),
    [
        ({"fleet.pools.3.replicas": [1]}, "axes.fleet.pools.3.replicas"),
        ({"fleet.nope.x": [1]}, "axes.fleet.nope.x"),
        ({"pools.0.replicas": [1]}, "axes.pools.0.replicas"),
        ({"fleet.router": ["round-robn"]}, "router"),
        ({"workload.arrival.rate_per_s": [-3]}, "workload.arrival"),
    ],
)
def test_bad_axes_name_the_field(axes: dict[str, Any], field: str) -> None:
    with pytest.raises(ServecapError) as err:
        sweep_points(sweep_from_dict(_sweep(axes=axes)))
    assert err.value.field.startswith(field), err.value


def test_unknown_key_and_zip_lengths() -> None:
    with pytest.raises(ServecapError) as err:
        sweep_from_dict(_sweep(axis={}))
    assert err.value.field.startswith("sweep")
    with pytest.raises(ServecapError) as err2:
        sweep_points(
            sweep_from_dict(
                _sweep(mode="zip", axes={"fleet.router": ["random"], "workload.arrival.rate_per_s": [1, 2]})
            )
        )
    assert err2.value.field == "sweep.axes"


def test_cli_stores_every_point_and_writes_json_and_csv(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(_sweep(label="demo")), encoding="utf-8")
    db = tmp_path / "runs.db"
    out_csv = tmp_path / "rows.csv"
    out_html = tmp_path / "sweep.html"
    args = ["sweep", str(path), "--executor", "serial", "--db", str(db), "--csv", str(out_csv)]
    res = CliRunner().invoke(cli, [*args, "--html", str(out_html), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert len(d["points"]) == 4 and all(p["error"] is None for p in d["points"])
    assert all(p["requests"] == 150 for p in d["points"])
    assert len(out_csv.read_text(encoding="utf-8").strip().splitlines()) == 5
    page = out_html.read_text(encoding="utf-8")
    assert page.count("<tr>") == 5 and "plotly" in page and "4 points on the serial executor" in page
    for p in d["points"]:  # every point's p99 TTFT, in ms, in its row
        assert f"{p['ttft_p99_s'] * 1e3:.4g}" in page
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT sweep_id, label FROM runs").fetchall()
    assert len(rows) == 4 and len({r[0] for r in rows}) == 1
    assert sorted(r[1] for r in rows) == [f"demo #{i}" for i in range(4)]


def test_example_sweep_file_is_valid() -> None:
    from servecap.app.fleet_sweep import load_sweep_file

    points = sweep_points(load_sweep_file(EXAMPLES / "sweep-fleet.yaml"), EXAMPLES)
    assert len(points) == 8


def test_table_shows_cost_per_hour_and_per_million_tokens(tmp_path: Path) -> None:
    """Issue 20, defect 12: the table's cost was per run length, not comparable across points."""
    import yaml

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(_sweep()), encoding="utf-8")
    res = CliRunner().invoke(cli, ["sweep", str(path), "--executor", "serial", "--no-store"])
    assert res.exit_code == 0, res.output
    assert "$/hour" in res.stdout and "$/M tokens" in res.stdout and "cost ($)" not in res.stdout
    d = json.loads(CliRunner().invoke(cli, ["sweep", str(path), "--executor", "serial", "--no-store", "--json"]).stdout)
    for p in d["points"]:
        assert p["usd_per_hour"] > p["cost_usd"] > 0  # runs of minutes: an hour costs more than the run
