"""The plan ``fleet plan`` asks for, from its flags (servecap.app.fleet_plan.flags)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.app.fleet_plan.flags import FleetPlanFlags, plan_request_from_flags
from servecap.errors import ServecapError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_gpu_flags_make_one_candidate_each_and_levers_none_an_empty_table() -> None:
    flags = FleetPlanFlags(model="meta-llama/Llama-3.1-8B", gpus=("H100", "H200"), tp=2, peak_rps=4, levers="none")
    request = plan_request_from_flags(flags)
    assert [(c.gpu, c.tp, c.kv_cache_dtype) for c in request.candidates] == [("H100", 2, "auto"), ("H200", 2, "auto")]
    assert request.levers == []
    assert request.traffic.peak_rps == 4


def test_peak_users_replace_the_plan_files_peak_and_lengths_become_lognormal() -> None:
    flags = FleetPlanFlags(
        plan_file=EXAMPLES / "fleet-plan-chat.yaml", peak_users=100, prompt_tokens=500, prompt_sigma=0.5
    )
    request = plan_request_from_flags(flags)
    assert (request.traffic.peak_users, request.traffic.peak_rps) == (100, None)
    w = request.traffic.workload
    assert w is not None
    assert w.prompt_tokens is not None and w.prompt_tokens.model_dump(exclude_none=True) == {
        "kind": "lognormal",
        "median": 500,
        "sigma": 0.5,
        "min": 1,
    }


def test_the_slo_in_ms_is_read_at_p99_in_seconds() -> None:
    request = plan_request_from_flags(FleetPlanFlags(gpus=("H100",), peak_rps=1, ttft_slo_ms=250))
    assert request.slo is not None and request.slo.ttft_s == {"p99": 0.25}


def test_no_gpu_and_no_plan_file_is_one_line_error() -> None:
    with pytest.raises(ServecapError, match=r"gpu=None: give at least one candidate GPU"):
        plan_request_from_flags(FleetPlanFlags(peak_rps=1))
