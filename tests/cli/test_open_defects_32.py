"""Issue 32: the smaller defects still open after the first pass, each with its test."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from servecap.cli.main import cli

ROOT = Path(__file__).parents[2]


def test_export_pd_keeps_each_command_on_one_line() -> None:
    """`export pd` folded the long vLLM, SGLang and router commands across YAML lines (width 200)."""
    res = CliRunner().invoke(cli, ["export", "pd", str(ROOT / "examples/fleet-pd.yaml")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    data = yaml.safe_load(res.stdout)
    commands = [data["sglang_router"], data["vllm_router"]]
    for role in data["servers"].values():
        commands += [role["vllm"], role["sglang"]]
    for command in commands:
        assert any(line.endswith(command) for line in lines), command


def test_pd_replicas_are_measured_against_their_roles_capacity() -> None:
    """P/D replicas were shown "of ~32.8" req/s, the co-located replica's rate, for both roles."""
    import json

    args = ["fleet", "simulate", "--fleet", str(ROOT / "examples/fleet-pd.yaml"), "--rate", "5"]
    res = CliRunner().invoke(cli, [*args, "--num-requests", "200", "--json"])
    assert res.exit_code == 0, res.output
    caps = {r["pool"]: r["capacity_req_s"] for r in json.loads(res.stdout)["replicas"]}
    one = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--rate", "5"]
    both = CliRunner().invoke(cli, [*one, "--num-requests", "200", "--json"])
    co_located = json.loads(both.stdout)["replicas"][0]["capacity_req_s"]
    # prefill: 8,192-token steps of 1,024-token prompts; decode: pure decode steps, no prefill stalls
    assert caps["prefill"] != pytest.approx(co_located, rel=0.05)
    assert caps["decode"] > 2 * co_located


def test_an_autoscaled_run_reports_its_steady_window_beside_the_ramp() -> None:
    """The keda-vllm repro's whole-run p99 TTFT missed the SLO with no word: the start at the
    minimum queues for the scale-up's cold start. The steady window (arrivals after the 600 s
    ramp) is reported beside the whole run, with the minimum that avoids the backlog."""
    import json

    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--autoscaler", "keda-vllm"]
    args += ["--min-replicas", "1", "--max-replicas", "4", "--rate", "40", "--num-requests", "50000"]
    args += ["--ttft-slo-ms", "2000", "--tpot-slo-ms", "100"]
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    steady = out["steady"]
    assert steady["start_s"] == 600.0
    assert steady["summary"]["ttft_s"]["p99"] < 2.0 < out["summary"]["ttft_s"]["p99"]
    assert steady["summary"]["slo_attainment"] > 0.99 > out["summary"]["slo_attainment"]
    assert steady["settled_replicas"] > 1
    assert not any(f["flapping"] for f in out["flapping"])
    note = next(n for n in out["notes"] if n.startswith("warm-up:"))
    assert f"--min-replicas {steady['settled_replicas']}" in note


def test_every_failing_lever_row_says_why() -> None:
    """A lever row read "-" / "no" with no reason: the reactive-only row's note (why it fails) and
    a row where no count met the SLOs were not printed (only the P/D split's were)."""
    from servecap.planning.levers import _row
    from servecap.planning.model import LeverOut
    from servecap.report.fleet_plan_text import lever_notes

    failed = _row("router", "prefix-affinity routing instead of least-outstanding", None, 7)
    assert failed.replicas is None and not failed.slo_met
    assert failed.note == "no count up to the search's bound meets the SLOs (7 simulated)"
    reactive = LeverOut(
        name="scale-ahead",
        change="without the scheduled scale-ahead (reactive autoscaler only)",
        replicas=None,
        usd_per_month=1000.0,
        ttft_p99_s=92.0,
        tpot_p99_s=0.05,
        slo_met=False,
        simulations=1,
        note="the reactive autoscaler alone scales on what it observes, so each rise waits out a cold start",
    )
    met = failed.model_copy(update={"name": "fp8-kv", "replicas": 3, "slo_met": True, "note": "x"})
    assert lever_notes([failed, reactive, met]) == [
        "router: no count up to the search's bound meets the SLOs (7 simulated)",
        f"scale-ahead: {reactive.note}",
    ]


def test_fleet_plans_shape_line_prints_the_medians_it_labels_medians() -> None:
    """`fleet plan --prompt-sigma` printed the log-normal means under the label "medians"."""
    from types import SimpleNamespace

    from servecap.cli.fleet_plan_cmd import shape_text
    from servecap.workload.spec_parts import LogNormalDist

    w = SimpleNamespace(
        prompt_tokens=LogNormalDist(median=1024, sigma=1.0),
        output_tokens=LogNormalDist(median=128, sigma=0.5),
        tenants=None,
        arrival=None,
    )
    t = SimpleNamespace(workload=w, peak_users=None, request_interval_s=30.0)
    text = shape_text(SimpleNamespace(traffic=t))  # type: ignore[arg-type]
    # the means would be 1,024 x e^0.5 = 1,688 and 128 x e^0.125 = 145
    assert text.startswith("request shape: 1,024 prompt + 128 output tokens (log-normal medians, sigma 1 / 0.5)")
