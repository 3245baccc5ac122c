"""Issue 32: the defects left after the second pass, each with a test that fails on the code
before it: a streamed run's replica table without the capacity its load is measured against."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from servecap.cli.main import cli

ROOT = Path(__file__).parents[2]


def test_a_streamed_autoscaled_run_shows_each_replicas_load_of_its_capacity() -> None:
    """ "load req/s (of capacity)" lost the capacity whenever the run streamed into sketches
    (`--sketch`, `--records`, or above 1,000,000 requests: a day of autoscaled traffic), P/D
    or co-located: only the exact path read the pools' service rates."""
    one = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--rate", "5", "--num-requests", "300"]
    args = [*one, "--autoscaler", "keda-vllm", "--min-replicas", "1", "--max-replicas", "3"]
    runner = CliRunner()
    exact = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)["replicas"]
    res = runner.invoke(cli, [*args, "--sketch", "--json"])
    assert res.exit_code == 0, res.output
    sketched = json.loads(res.stdout)["replicas"]
    assert sketched and all(r["capacity_req_s"] == exact[0]["capacity_req_s"] > 0 for r in sketched)
    ready = [r for r in sketched if r["load_req_s"] is not None]
    assert ready and all(r["load_req_s"] > 0 for r in ready)
    text = runner.invoke(cli, [*args, "--sketch"]).stdout
    assert f"(of ~{exact[0]['capacity_req_s']:,.1f}, " in text
    pd = ["fleet", "simulate", "--fleet", str(ROOT / "examples/fleet-pd.yaml"), "--rate", "5"]
    pd_rows = json.loads(runner.invoke(cli, [*pd, "--num-requests", "200", "--sketch", "--json"]).stdout)["replicas"]
    assert {r["pool"] for r in pd_rows if r["capacity_req_s"]} == {r["pool"] for r in pd_rows}


def test_the_split_lever_row_has_an_interval_of_its_own() -> None:
    """The P/D split row showed its replica count and rent with no interval (only the chosen
    co-located fleet had one): a split that met the SLOs carries its own count, rent and p99
    intervals, by the chosen fleet's rule, in JSON, the lever table and the web page."""
    from servecap.planning.levers import with_own_interval
    from servecap.planning.model import LeverOut
    from servecap.planning.run import Closed, fleet_intervals
    from servecap.report.fleet_plan_text import interval_cells

    cf = Closed(1, 2.69, 30.0, 5.0, 60.0, engine="vllm", gpu_family="H100")
    row = LeverOut(name="split", change="split prefill/decode: 2 prefill + 5 decode replicas", replicas=7,
                   usd_per_month=13_749.0, ttft_p99_s=0.8, tpot_p99_s=0.015, slo_met=True, simulations=4)  # fmt: skip
    own = with_own_interval(row, cf)
    assert own.interval["replicas"] == fleet_intervals(7, 13_749.0, cf)["replicas"]
    n = own.interval["replicas"]
    assert n["low"] <= 7 <= n["high"] or n["low"] <= n["estimate"] <= n["high"]  # type: ignore[operator]
    assert {"replicas", "usd_per_month", "ttft_p99_s", "tpot_p99_s"} <= own.interval.keys()
    assert interval_cells(own) == (f"{n['low']:,.0f}–{n['high']:,.0f}", interval_cells(own)[1])  # type: ignore[index]
    failed = row.model_copy(update={"slo_met": False})
    assert with_own_interval(failed, cf).interval == {}  # a failing row has no count to bound
    js = (ROOT / "src/servecap/web/static/fleet-plan.js").read_text()
    assert "x.interval && x.interval.replicas" in js


def test_the_fleets_own_figures_live_in_fleet_and_a_replica_row_is_one_conversion() -> None:
    """`pool_capacities` and `with_predictive_floors` (fleet-file arithmetic) sat in the use case
    app/fleet_simulate.py, and ReplicaOut copied ReplicaStats field by field there: they are the
    fleet's (fleet/role_capacity.py, fleet/predictive_floors.py) and a row is ReplicaOut.of."""
    import dataclasses

    from servecap.app.fleet_simulate import ReplicaOut
    from servecap.fleet.file_schema import load_fleet_file
    from servecap.fleet.predictive_floors import with_predictive_floors
    from servecap.fleet.role_capacity import pool_capacities
    from servecap.fleet.run_result import ReplicaStats
    from servecap.workload import load_workload

    ff = load_fleet_file(ROOT / "examples/fleet-pd.yaml")
    wl = load_workload(ROOT / "examples/workload-chat-short.yaml")
    caps = pool_capacities(ff, wl)
    assert set(caps) == {p.name for p in ff.pools} and all(v > 0 for v in caps.values())
    assert callable(with_predictive_floors)
    stats = ReplicaStats(3, "decode", "ready", 0.0, 10.0, None, 40, 38, 9.0, 0.45, None, 1.0, 20.0, 20.0, 110.0, 0.38)
    row = ReplicaOut.of(stats, 12.5)
    shared = {f.name for f in dataclasses.fields(ReplicaStats)} & set(ReplicaOut.model_fields)
    assert all(getattr(row, k) == getattr(stats, k) for k in shared) and row.capacity_req_s == 12.5
    assert "load_req_s" in shared
