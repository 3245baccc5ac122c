"""Predictive scale-ahead: floors from a known rate curve, by hand and in a run."""

from __future__ import annotations

import numpy as np
import pytest

from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
from servecap.errors import ServecapError
from servecap.fleet.file_schema import fleet_from_dict
from servecap.fleet.predictive import scale_ahead_schedule
from servecap.workload import workload_from_dict


def test_floors_by_hand() -> None:
    # 10 req/s until 300 s, then 45 req/s; 10 req/s per replica; 100 s lead; 60-s steps
    def rate(t: np.ndarray) -> np.ndarray:
        return np.where(t < 300.0, 10.0, 45.0)

    got = scale_ahead_schedule(rate, req_s_per_replica=10.0, lead_s=100.0, horizon_s=600.0, step_s=60.0)
    # the step at t looks at [t, t + lead + step] = [t, t + 160]: at t = 120 that ends at 280 s,
    # before the rise (floor ceil(10 / 10) = 1); at t = 180 it reaches 45 req/s: ceil(4.5) = 5
    assert got == ((0.0, 1), (180.0, 5))
    with pytest.raises(ServecapError, match="req_s_per_replica"):
        scale_ahead_schedule(rate, req_s_per_replica=0.0, lead_s=1.0, horizon_s=10.0)


def _run(predictive: bool) -> float:
    auto: dict[str, object] = {"preset": "keda-waiting", "interval_s": 10, "min_replicas": 1, "max_replicas": 8}
    if predictive:
        auto["predictive"] = {"req_s_per_replica": 12.0, "step_s": 30.0}
    fleet = fleet_from_dict(
        {
            "pools": [
                {
                    "model": "meta-llama/Llama-3.1-8B",
                    "gpu": "H100",
                    "max_model_len": 4096,
                    "max_num_seqs": 8,
                    "cold_start": {
                        "provisioning": 60,
                        "image_pull": 0,
                        "compile": 0,
                        "warmup": 0,
                        "load_bandwidth_gb_s": 1000,
                    },
                    "autoscaler": auto,
                }
            ],
            "router": "least-outstanding",
        }
    )
    wl = workload_from_dict(
        {
            "arrival": {
                "kind": "schedule",
                "rate": {
                    "kind": "piecewise",
                    "steps": [{"start_s": 0, "rate_per_s": 5}, {"start_s": 150, "rate_per_s": 35}],
                },
            },
            "prompt_tokens": 256,
            "output_tokens": 64,
            "duration_s": 250,
        }
    )
    response, res = fleet_simulate(FleetSimulateRequest(fleet=fleet, workload=wl, seed=1))
    if predictive:
        assert any("predictive" in n for n in response.notes)
    c = res.columns
    late = c.arrival_s[(c.first_token_s - c.arrival_s) > 1.0]
    return float(late.max() - late.min()) if len(late) else 0.0


def test_predictive_scale_ahead_shortens_the_violation_window() -> None:
    reactive, ahead = _run(False), _run(True)
    assert reactive > 30.0
    assert ahead < 0.3 * reactive
