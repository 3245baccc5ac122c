"""``fleet plan --trace``: the planner sizes the fleet for a replayed trace (the trace itself is
the window, every request scored, its rate the busiest minute at its time scale), with the trace
flags ``simulate`` and ``fleet simulate`` share; bad values end in one line naming the flag."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.errors import ServecapError
from servecap.fleet.plan_window import busiest_rate

BASE = ["fleet", "plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--levers", "none"]
AZURE = ["--trace", "sample:azure-code-2023"]


def _plan(*extra: str) -> Any:
    out = CliRunner().invoke(cli, [*BASE, *AZURE, *extra, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_busiest_rate_by_hand() -> None:
    assert busiest_rate(np.array([0.0, 1.0, 2.0, 100.0])) == pytest.approx(3 / 60)  # 3 in [0, 60)
    assert busiest_rate(np.array([0.0, 5.0, 10.0])) == pytest.approx(3 / 10)  # span 10 s < 60 s
    with pytest.raises(ServecapError, match="at least 2"):
        busiest_rate(np.array([1.0]))


def test_the_trace_is_the_window_and_a_faster_replay_needs_more_replicas() -> None:
    slow = _plan()
    fast = _plan("--time-scale", "0.1")  # ten times the rate
    # the shipped 40 Azure rows: all scored, no warm-up; the peak is the busiest minute (40 in 34.3 s)
    for r, scale in ((slow, 1.0), (fast, 0.1)):
        w = r["window"]
        assert w["scored_requests"] == 40 and w["warmup_s"] == 0
        assert w["tail_samples"] == 0  # 40 x (1 - 0.99) = 0.4: no whole sample beyond p99
        assert r["peak_rps"] == pytest.approx(40 / (34.2844 * scale), rel=1e-3)
        assert r["daily_curve"] is False
        assert r["peak_workload"]["arrival"]["kind"] == "trace"
    assert slow["chosen"]["replicas"] == 1
    assert fast["chosen"]["replicas"] > slow["chosen"]["replicas"]
    assert any("replayed trace" in n for n in fast["notes"])
    assert slow["fleet"]["prefix_cache_hit_rate"] == 0.0  # the Azure rows carry no block hashes


def test_a_window_of_the_trace_is_planned_alone() -> None:
    # the rows before 1 s of the trace's clock: 03.980 to 04.679 (7 rows; the 8th is at 1.016 s)
    r = _plan("--trace-start-s", "0", "--trace-end-s", "1")
    assert r["window"]["scored_requests"] == 7


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ([*AZURE, "--time-scale", "0"], "--time-scale=0"),
        ([*AZURE, "--time-scale", "-1"], "--time-scale=-1"),
        ([*AZURE, "--time-scale", "1e300"], "--time-scale=1e+300"),
        ([*AZURE, "--trace-start-s", "9", "--trace-end-s", "3"], "--trace-end-s=3"),
        ([*AZURE, "--trace-start-s", "1e6"], "falls in the window"),
        (["--trace", "/no/such.jsonl"], "no such file"),
        (["--trace", "sample:nope"], "no such sample"),
        (["--trace-end-s", "3"], "needs --trace"),
        ([*AZURE, "--peak-rps", "3"], "--peak-rps"),
        ([*AZURE, "--prompt-tokens", "300"], "--prompt-tokens"),
        ([*AZURE, "--workload", "w.yaml"], "not both"),
    ],
)
def test_bad_trace_flags_name_the_flag(flags: list[str], match: str) -> None:
    out = CliRunner().invoke(cli, [*BASE, *flags])
    assert out.exit_code != 0
    assert isinstance(out.exception, ServecapError), out.output
    assert match in str(out.exception)


def test_a_trace_in_a_plan_file_refuses_a_peak() -> None:
    from servecap.app.fleet_plan import plan_request_from_dict
    from servecap.planning.run import traffic_workload

    raw = {
        "model": "meta-llama/Llama-3.1-8B",
        "candidates": [{"gpu": "H100"}],
        "traffic": {"peak_rps": 5, "workload": {"arrival": {"kind": "trace", "path": "sample:azure-code-2023"}}},
    }
    with pytest.raises(ServecapError, match=r"traffic\.peak_rps"):
        traffic_workload(plan_request_from_dict(raw))


def test_a_bad_trace_line_and_nan_are_one_line_on_stderr_exit_2(
    tmp_path: Path, servecap_cli: Callable[..., Any]
) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": -5}\n')
    for flags, named in ((["--trace", str(bad)], "t.jsonl:2"), ([*AZURE, "--time-scale", "nan"], "--time-scale")):
        p = servecap_cli(*BASE, *flags)  # the console entry point in this process (tests/conftest.py)
        assert p.returncode == 2 and p.stdout == ""
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert named in p.stderr


def test_a_trace_longer_than_the_window_limit_is_refused_by_name(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("model: meta-llama/Llama-3.1-8B\ncandidates: [{gpu: H100}]\nmax_window_requests: 100\nlevers: []\n")
    out = CliRunner().invoke(cli, ["fleet", "plan", "--plan", str(plan), "--trace", "sample:agentic"])
    assert isinstance(out.exception, ServecapError), out.output
    assert "traffic.workload.arrival='387 requests'" in str(out.exception) and "--trace-end-s" in str(out.exception)


def test_routing_by_blocks_plans_a_smaller_fleet_for_the_agentic_sample() -> None:
    """At ten times its rate (20.2 req/s in its busiest minute) the agentic sample needs 4 H100s
    routed least-outstanding (hit rate 0.62) and 2 routed to the replica holding the blocks (0.81)."""
    base = ["--trace", "sample:agentic", "--time-scale", "0.1", "--json"]
    plans = {}
    for router in ("least-outstanding", "precise-prefix"):
        out = CliRunner().invoke(cli, [*BASE, *base, "--router", router])
        assert out.exit_code == 0, out.output
        plans[router] = json.loads(out.stdout)
    lo, pp = plans["least-outstanding"], plans["precise-prefix"]
    assert pp["chosen"]["replicas"] < lo["chosen"]["replicas"]
    assert pp["fleet"]["prefix_cache_hit_rate"] > lo["fleet"]["prefix_cache_hit_rate"] + 0.1
    assert pp["fleet"]["usd_per_month"] < lo["fleet"]["usd_per_month"]
