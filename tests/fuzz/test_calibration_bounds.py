"""A calibration whose efficiency is 1e-30 crashed the compiled simulator (the clock ran past
the point where a step moves it; the observer sampled one instant until memory ran out), and
capacity divided by zero; a replica MTBF of 1e-9 s made events without end; accuracy applied
another model's calibration (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hostile_cases import CALIBRATION, run_in_process

from servecap.errors import ServecapError

COMMANDS = {
    "simulate": ("simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--rate", "1", "--num-requests", "5"),
    "capacity": ("capacity", "-m", "Qwen/Qwen3-0.6B", "-g", "H100"),
    "validate": ("validate",),
    "plan": ("plan", "-m", "Qwen/Qwen3-0.6B", "-g", "H100"),
}


def _calibration(tmp_path: Path, **coefficients: float) -> Path:
    doc = json.loads(json.dumps(CALIBRATION))
    doc["gpu"] = "H100-SXM"
    doc["coefficients"].update(coefficients)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    ("field", "value"),
    [("bandwidth_efficiency", 1e-30), ("compute_efficiency", 1e-30), ("bandwidth_efficiency", 0.001)],
)
def test_an_efficiency_outside_its_meaning_is_refused(command: str, field: str, value: float, tmp_path: Path) -> None:
    cal = _calibration(tmp_path, **{field: value})
    result = run_in_process([*COMMANDS[command], "--calibration", str(cal)], limit_s=10.0)
    assert result.outcome == "error", f"{result.outcome}: {result.stderr[-1500:]}"
    assert f"coefficients.{field}" in result.stderr and "share of the GPU's spec-sheet" in result.stderr
    assert result.seconds < 5.0


def test_a_plausible_calibration_is_still_accepted(tmp_path: Path) -> None:
    cal = _calibration(tmp_path, bandwidth_efficiency=0.02, compute_efficiency=1.2)
    result = run_in_process([*COMMANDS["plan"], "--calibration", str(cal), "--json"], limit_s=10.0)
    assert result.outcome == "accepted", result.stderr


def test_the_simulator_stops_when_time_would_stand_still() -> None:
    """Below the calibration file (a library caller's Efficiency): the loop's assumption that a
    step moves the clock is checked; the run ends in one error, not in memory exhaustion."""
    from servecap.app.flags import DeploymentFlags, deployment_from_flags
    from servecap.core.plan import plan
    from servecap.sim import engine_setup_from_plan, simulate
    from servecap.specs.perf import Efficiency
    from servecap.workload import WorkloadSpec

    dep, _ = deployment_from_flags(DeploymentFlags(model="Qwen/Qwen3-0.6B", gpu="H100", max_model_len=4096))
    setup = engine_setup_from_plan(plan(dep, efficiency=Efficiency(bandwidth_efficiency=1e-30)))
    spec = WorkloadSpec.model_validate(
        {"arrival": {"kind": "poisson", "rate_per_s": 1}, "prompt_tokens": 100, "output_tokens": 50, "num_requests": 5}
    )
    with pytest.raises(ServecapError, match="simulated time"):
        simulate(setup, spec, np.random.default_rng(0))


def test_a_replica_mtbf_of_a_nanosecond_is_refused(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "pools:\n  - {name: a, model: Qwen/Qwen3-0.6B, gpu: H100, max_model_len: 4096, replicas: 2,"
        " mtbf_s: 1.0e-9, cold_start: instant}\n",
        encoding="utf-8",
    )
    result = run_in_process(["fleet", "simulate", "--fleet", str(fleet), "--rate", "5", "--num-requests", "20"])
    assert result.outcome == "error", f"{result.outcome}: {result.stderr[-1500:]}"
    assert "mtbf_s" in result.stderr and result.seconds < 5.0


def test_accuracy_refuses_another_models_calibration(tmp_path: Path) -> None:
    from servecap.app.accuracy import predicted_summary

    cal = _calibration(tmp_path)  # fitted for Qwen3-0.6B on an H100
    settings = {
        "workload": {
            "arrival": {"kind": "poisson", "rate_per_s": 1},
            "prompt_tokens": 100,
            "output_tokens": 8,
            "num_requests": 3,
        },
        "seed": 1,
    }
    deployment = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096}
    with pytest.raises(ServecapError, match=r"fitted for another deployment: model Qwen/Qwen3-0\.6B"):
        predicted_summary(settings, deployment, cal)
