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
