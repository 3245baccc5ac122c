"""fleet plan on a process pool (and on Ray) returns the serial plan: the same answer, evidence
and simulation count; the parallel search only runs some counts ahead of need."""

from __future__ import annotations

from typing import Any

import pytest

from servecap.app.fleet_plan import Context, FleetPlanResponse, fleet_plan, plan_request_from_dict
from servecap.errors import ServecapError

WORKLOAD: dict[str, Any] = {
    "arrival": {"kind": "poisson", "rate_per_s": 1},
    "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.5, "max": 2000},
    "output_tokens": {"kind": "lognormal", "median": 100, "sigma": 0.5, "max": 500},
    "duration_s": 600,
}
RAW: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "candidates": [{"gpu": "H100", "max_model_len": 4096}],
    "traffic": {"peak_rps": 60, "workload": WORKLOAD},
    "slo": {"ttft_s": {"p99": 0.5}, "tpot_s": {"p99": 0.03}},
    "tail_samples": 10,
    "levers": ["router"],
}


def _same(a: FleetPlanResponse, b: FleetPlanResponse) -> None:
    assert a.chosen == b.chosen and a.fleet == b.fleet and a.next_cheaper == b.next_cheaper
    assert a.verify == b.verify and a.candidates == b.candidates and a.levers == b.levers
    assert a.simulations == b.simulations and a.fleet_file == b.fleet_file


@pytest.fixture(scope="module")
def serial() -> FleetPlanResponse:
    return fleet_plan(plan_request_from_dict(RAW), executor="serial")


def test_a_process_pool_of_two_gives_the_serial_plan(serial: FleetPlanResponse) -> None:
    _same(fleet_plan(plan_request_from_dict(RAW), executor="process", workers=2), serial)


@pytest.mark.ray
@pytest.mark.usefixtures("local_ray")  # tests/conftest.py: one Ray for the Ray tests in a row
def test_ray_gives_the_serial_plan(serial: FleetPlanResponse) -> None:
    pytest.importorskip("ray")
    _same(fleet_plan(plan_request_from_dict(RAW), executor="ray", workers=2), serial)


def test_bad_executor_settings_are_one_line() -> None:
    with pytest.raises(ServecapError, match="executor"):
        Context(plan_request_from_dict(RAW), None, executor="threads")
    with pytest.raises(ServecapError, match="workers"):
        Context(plan_request_from_dict(RAW), None, executor="process", workers=0)
