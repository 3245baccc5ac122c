"""Plan -> file -> deploy (issue 32, defect 1): `fleet plan -o fleet.yaml` writes the chosen fleet
and its peak window; `fleet simulate` re-runs the plan's p99s within their interval; every
export target reads the file (and `fleet plan --json` itself), each checked by its real schema;
a target that cannot scale ahead says what the plan showed that costs, and what it can do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from export_helpers import validate
from test_kubernetes import _validate_all
from test_ray_serve import _check as _check_ray_serve

from servecap.app.export import ExportOptions, export
from servecap.cli.main import cli

runner = CliRunner()


def _run(args: list[str]) -> str:
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, (res.output, res.exception)
    return res.stdout


def _assert_rerun_inside_interval(fleet: Path, peak: Path, plan: dict[str, Any]) -> None:
    """`fleet simulate` of the plan's fleet file on its peak window: each p99, corrected as the
    plan's own figure is (estimate / model), lies in the plan's interval."""
    sim = json.loads(
        _run(["fleet", "simulate", "--fleet", str(fleet), "--workload", str(peak), "--seed", "0", "--json"])
    )
    for key, metric in (("ttft_p99_s", "ttft_s"), ("tpot_p99_s", "tpot_s")):
        iv = plan["interval"][key]
        rerun = sim["summary"][metric]["p99"]
        assert iv["low"] <= rerun * iv["estimate"] / iv["model"] <= iv["high"], (key, rerun, iv)


def test_fleet_plan_file_re_runs_and_deploys(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    args = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "4096", "--peak-users", "2000", "--levers", "none"]
    out = _run(["fleet", "plan", *args, "-o", str(fleet), "--json"])  # -o FILE: the fleet file
    plan = json.loads(out)
    peak = tmp_path / "fleet.peak.yaml"
    doc = yaml.safe_load(fleet.read_text())
    assert doc["pools"][0]["replicas"] == plan["chosen"]["replicas"] and doc["slo"] == {
        "ttft_ms": 2000.0,
        "tpot_ms": 100.0,
    }
    assert "re-run the plan's evidence: servecap fleet simulate --fleet fleet.yaml --workload fleet.peak.yaml" in (
        fleet.read_text()
    )
    _assert_rerun_inside_interval(fleet, peak, plan)
    _validate_all(list(export("keda", fleet).data))
    _validate_all(list(export("kserve", fleet).data))
    _check_ray_serve(export("ray-serve", fleet).data)
    validate(export("production-stack", fleet).data, "production-stack-values.schema.json")
    lite = export("litellm", fleet, ExportOptions(api_base="http://vllm-{replica}.vllm:8000/v1")).data
    assert len(lite["model_list"]) == plan["chosen"]["replicas"]
    as_json = tmp_path / "fp.json"
    as_json.write_text(out)  # `export keda fp.json` on fleet plan --json was refused
    specs = [[d["spec"] for d in export("keda", f).data] for f in (as_json, fleet)]
    assert specs[0] == specs[1]  # the same deployment (the annotations name each source)


def test_scale_ahead_a_target_cannot_express_names_the_plans_reactive_row(tmp_path: Path) -> None:
    plan = {
        "chosen": {"replicas": 9},
        "levers": [{"name": "scale-ahead", "ttft_p99_s": 92.0, "tpot_p99_s": 0.04, "slo_met": False}],
        "fleet_file": {
            "pools": [
                {
                    "name": "main",
                    "model": "meta-llama/Llama-3.1-8B",
                    "gpu": "H100",
                    "autoscaler": {
                        "preset": "keda-vllm",
                        "min_replicas": 2,
                        "max_replicas": 12,
                        "schedule": [{"at_s": 300, "min_replicas": 6}],
                    },
                }
            ]
        },
    }
    path = tmp_path / "fp.json"
    path.write_text(json.dumps(plan))
    res = export("keda", path)
    _validate_all(list(res.data))
    (warning,) = [w for w in res.warnings if "autoscaler.schedule not written" in w]
    assert "the plan's own lever row 'scale-ahead'" in warning and "misses the SLOs: p99 TTFT 92.0 s" in warning
    assert "KEDA `cron` trigger" in warning and "minReplicaCount 9" in warning


def test_one_infeasible_gpu_is_ruled_out_not_fatal() -> None:
    """Defect 7: `-g H200 -g H100` for 70B FP8 at 8K failed on H100 though H200 is feasible."""
    args = ["fleet", "plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "H200", "-g", "H100", "-w", "fp8", "-l", "8192"]
    out = json.loads(_run([*args, "--peak-users", "300", "--levers", "none", "--json"]))
    assert out["chosen"]["gpu"].startswith("H200")
    (h100,) = [c for c in out["candidates"] if c["gpu"] == "H100"]
    assert h100["replicas"] is None and h100["note"].startswith("ruled out: max_model_len=8192: one request needs")
    text = _run([*args, "--peak-users", "300", "--levers", "none"])
    assert "ruled out" in text and "H100 w-fp8: ruled out: max_model_len=8192" in text
    res = runner.invoke(
        cli,
        [
            "fleet",
            "plan",
            "-m",
            "meta-llama/Llama-3.1-70B",
            "-g",
            "H100",
            "-w",
            "fp8",
            "-l",
            "8192",
            "--peak-users",
            "300",
        ],
    )
    assert res.exit_code != 0 and "max_model_len=8192" in str(res.exception)  # alone, it is still an error


@pytest.mark.slow
def test_a_pd_split_plan_re_runs_and_exports_as_pd(tmp_path: Path) -> None:
    """The P/D round trip: `fleet plan --levers split -o fleet.yaml` writes the split that met the
    SLOs as `fleet.split.yaml`; `fleet simulate` re-runs it on the plan's peak window to the split
    row's p99s and SLOs; `export pd` reads it into per-role server and router commands."""
    import shlex

    fleet = tmp_path / "fleet.yaml"
    workload = Path(__file__).parents[2] / "examples" / "workload-rag-long.yaml"
    args = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "8192", "--peak-rps", "10"]
    args += ["--workload", str(workload), "--slo-ttft-p99-s", "2", "--slo-tpot-p99-s", "0.02", "--levers", "split"]
    plan = json.loads(_run(["fleet", "plan", *args, "-o", str(fleet), "--json"]))
    (row,) = [lv for lv in plan["levers"] if lv["name"] == "split"]
    assert row["slo_met"] and row["fleet_file"] is not None
    assert row["interval"]["replicas"]["model"] == row["replicas"]  # the split's own interval (issue 32)
    split = tmp_path / "fleet.split.yaml"
    doc = yaml.safe_load(split.read_text())
    assert [p["role"] for p in doc["pools"]] == ["prefill", "decode"]
    assert sum(p["replicas"] for p in doc["pools"]) == row["replicas"]
    assert "deploy: servecap export pd fleet.split.yaml" in split.read_text()
    peak = tmp_path / "fleet.peak.yaml"
    sim = json.loads(
        _run(["fleet", "simulate", "--fleet", str(split), "--workload", str(peak), "--seed", "0", "--json"])
    )
    assert sim["summary"]["slo_attainment"] >= 0.99
    for key, metric in (("ttft_p99_s", "ttft_s"), ("tpot_p99_s", "tpot_s")):
        rerun = sim["summary"][metric]["p99"]
        assert abs(rerun / row[key] - 1) < 0.2, (key, rerun, row[key])  # the same window and seed
    pd = yaml.safe_load(_run(["export", "pd", str(split)]))
    servers = pd["servers"]
    assert servers["prefill"]["replicas"] + servers["decode"]["replicas"] == row["replicas"]
    vllm = shlex.split(servers["decode"]["vllm"])
    assert "--kv-transfer-config" in vllm
    router = shlex.split(pd["sglang_router"])
    assert "--pd-disaggregation" in router and router.count("--decode") == servers["decode"]["replicas"]


def _round_trip(tmp_path: Path, plan_args: list[str]) -> dict[str, object]:
    """plan -> `-o` -> `fleet simulate` on the plan's peak window (each p99, corrected as the
    plan's own figure is, inside the plan's interval) -> every export target, each checked by
    its real schema or parser, from the fleet file and from `fleet plan --json` alike."""
    fleet = tmp_path / "fleet.yaml"
    out = _run(["fleet", "plan", *plan_args, "--levers", "none", "-o", str(fleet), "--json"])
    plan = json.loads(out)
    peak = tmp_path / "fleet.peak.yaml"
    _assert_rerun_inside_interval(fleet, peak, plan)
    as_json = tmp_path / "fp.json"
    as_json.write_text(out)
    replicas = plan["chosen"]["replicas"]
    for source in (fleet, as_json):
        _validate_all(list(export("keda", source).data))
        _validate_all(list(export("kserve", source).data))
        _check_ray_serve(export("ray-serve", source).data)
        validate(export("production-stack", source).data, "production-stack-values.schema.json")
        if plan.get("autoscaler"):  # an autoscaled pool is addressed through its Service
            lite = export("litellm", source, ExportOptions(api_base="http://vllm.vllm:8000/v1")).data
            assert len(lite["model_list"]) == 1
        else:
            lite = export("litellm", source, ExportOptions(api_base="http://vllm-{replica}.vllm:8000/v1")).data
            assert len(lite["model_list"]) == replicas
    return plan


@pytest.mark.slow
def test_a_70b_fp8_plan_round_trips(tmp_path: Path) -> None:
    """Issue 32, Must show: a 70B FP8 plan (H200, 8K context, 300 users at the peak)."""
    plan = _round_trip(
        tmp_path, ["-m", "meta-llama/Llama-3.1-70B", "-g", "H200", "-w", "fp8", "-l", "8192", "--peak-users", "300"]
    )
    assert plan["chosen"]["gpu"].startswith("H200")  # type: ignore[index]


@pytest.mark.slow
def test_the_chat_example_plan_round_trips(tmp_path: Path) -> None:
    """Issue 32, Must show: examples/fleet-plan-chat.yaml (70B FP8 on H200 or 2 x H100, two tenants
    with their own SLOs, a daily curve, keda-vllm) -> its file -> re-run -> every target."""
    example = Path(__file__).parents[2] / "examples" / "fleet-plan-chat.yaml"
    plan = _round_trip(tmp_path, ["--plan", str(example)])
    assert plan["autoscaler"] is not None
