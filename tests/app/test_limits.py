"""app/limits.py: each use case sizes its work from the request alone and refuses what exceeds a
limit in one line naming the field, the size, the limit and how to raise it; the CLI's limits are
raised through environment variables."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from servecap.app.limits import API_LIMITS, WorkLimits, check_fleet_work, check_workload, cli_limits
from servecap.errors import ServecapError
from servecap.fleet.file_schema import fleet_from_dict
from servecap.workload import workload_from_dict

LENGTHS = {"prompt_tokens": 100, "output_tokens": 10}


def _refusal(spec: dict[str, object], limits: WorkLimits = API_LIMITS) -> ServecapError:
    with pytest.raises(ServecapError) as info:
        check_workload(workload_from_dict({**LENGTHS, **spec}), limits)
    return info.value


def test_open_loop_requests_are_rate_times_duration() -> None:
    err = _refusal({"arrival": {"kind": "poisson", "rate_per_s": 1_000}, "duration_s": 86_400})
    assert err.field == "workload.duration_s"
    assert "1,000/s x 86,400 s = 86,400,000 requests, over the limit of 200,000 requests" in str(err)
    assert "servecap serve --max-requests" in str(err)
    ok = workload_from_dict({**LENGTHS, "arrival": {"kind": "poisson", "rate_per_s": 2}, "duration_s": 600})
    check_workload(ok, API_LIMITS)  # 1,200 requests


def test_a_request_count_bounds_a_long_duration() -> None:
    spec = {"arrival": {"kind": "poisson", "rate_per_s": 1000}, "duration_s": 86_400, "num_requests": 5000}
    check_workload(workload_from_dict({**LENGTHS, **spec}), API_LIMITS)  # the run stops at 5,000
    err = _refusal({**spec, "num_requests": 1_000_000, "duration_s": 10_000})
    assert err.field == "workload.num_requests" and err.value == 1_000_000


def test_a_schedule_is_sized_by_its_integrated_rate() -> None:
    arrival = {"kind": "schedule", "rate": {"kind": "constant", "rate_per_s": 50}}
    err = _refusal({"arrival": arrival, "duration_s": 86_400})
    assert "4,320,000 requests" in str(err)


def test_closed_loop_users_count_a_cycle_of_at_least_a_second() -> None:
    users = {"count": 100_000, "think_time_s": 0}
    err = _refusal({"users": users, "duration_s": 86_400})
    assert err.field == "workload.users" and "8,640,000,000 requests" in str(err)
    err = _refusal({"users": {"count": 200_000, "think_time_s": 30}, "duration_s": 60})
    assert err.field == "workload.users" and "over the limit of 100,000 chat users" in str(err)
    check_workload(
        workload_from_dict({**LENGTHS, "users": {"count": 100, "think_time_s": 20}, "duration_s": 600}), API_LIMITS
    )


def test_simulated_time_is_bounded() -> None:
    # (past a year the workload schema itself refuses the duration)
    err = _refusal({"arrival": {"kind": "poisson", "rate_per_s": 1e-6}, "duration_s": 3e7})
    assert err.field == "workload.duration_s" and "simulated seconds" in str(err)


def test_fleet_replicas_count_autoscaler_maxima_and_time() -> None:
    pool = {"name": "a", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 2}
    scaled = {**pool, "autoscaler": {"min_replicas": 1, "max_replicas": 5_000}}
    workload = workload_from_dict({**LENGTHS, "arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 100})
    with pytest.raises(
        ServecapError,
        match=r"=5000: over the limit of 4,096 replicas in all pools \(autoscaler maxima counted\); raise it",
    ) as info:
        check_fleet_work(fleet_from_dict({"pools": [scaled]}), workload, API_LIMITS)
    assert info.value.field == "fleet.pools.replicas"
    day = workload_from_dict({**LENGTHS, "arrival": {"kind": "poisson", "rate_per_s": 1}, "duration_s": 86_400})
    with pytest.raises(ServecapError, match=r"1,000 replicas x 86,400 s = 86,400,000 replica-seconds"):
        check_fleet_work(fleet_from_dict({"pools": [{**pool, "replicas": 1000}]}), day, API_LIMITS)
    check_fleet_work(fleet_from_dict({"pools": [pool]}), day, API_LIMITS)


def test_cli_limits_are_raised_through_the_environment() -> None:
    assert cli_limits({}).max_requests == 10_000_000
    assert cli_limits({"SERVECAP_MAX_REQUESTS": "5e7"}).max_requests == 50_000_000
    assert cli_limits({"SERVECAP_MAX_SIMULATED_S": "100.5"}).max_simulated_s == 100.5
    for bad in ("nan", "-1", "inf", "lots"):
        with pytest.raises(ServecapError) as info:
            cli_limits({"SERVECAP_MAX_USERS": bad})
        assert info.value.field == "SERVECAP_MAX_USERS"


def _run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``servecap ARGS`` through the console entry point: (exit code, stderr)."""
    from servecap.cli.main import run

    monkeypatch.setattr("sys.argv", ["servecap", *args])
    with pytest.raises(SystemExit) as info:
        run()
    return int(info.value.code or 0), capsys.readouterr().err


def test_the_cli_refuses_before_work_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.perf_counter()
    args = ["simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--rate", "1000", "--duration-s", "86400"]
    code, err = _run_cli(args, monkeypatch, capsys)
    assert time.perf_counter() - started < 5
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "86,400,000 requests" in lines[0] and "raise it with SERVECAP_MAX_REQUESTS" in lines[0]
    monkeypatch.setenv("SERVECAP_MAX_REQUESTS", "100")
    small = ["simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--rate", "5", "--num-requests", "200"]
    code, err = _run_cli(small, monkeypatch, capsys)
    assert code == 2 and "over the limit of 100 requests" in err


def test_a_sweep_point_past_the_limits_is_refused_naming_its_point() -> None:
    from servecap.app.fleet_sweep import sweep_from_dict, sweep_points

    sf = sweep_from_dict(
        {
            "fleet": {"pools": [{"name": "a", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 1}]},
            "workload": {**LENGTHS, "arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 10},
            "axes": {"fleet.pools.0.replicas": [1, 2, 5000]},
        }
    )
    with pytest.raises(ServecapError, match=r"over the limit of 4,096 replicas.*\(sweep point 2: ") as info:
        sweep_points(sf, limits=API_LIMITS)
    assert info.value.field == "fleet.pools.replicas"


def test_capacity_sizes_its_probes_from_the_plan() -> None:
    from servecap.app.capacity import capacity_from_request
    from servecap.app.simulate_request import CapacityRequest

    with pytest.raises(ServecapError, match=r"over the limit of 200,000 requests") as info:
        capacity_from_request(
            CapacityRequest(model="meta-llama/Llama-3.1-8B", gpu="H100", closed_loop=False, duration_s=86_400),
            limits=replace(API_LIMITS),
        )
    assert info.value.field == "duration_s"
    assert "the search's probes reach about twice the planner's" in str(info.value)


def test_a_streaming_run_has_its_own_limit_and_the_api_one_limit() -> None:
    """The CLI bounds a streaming fleet run by max_streamed_requests (raised by its own variable);
    the API has one request limit, so raising ``--max-requests`` raises both."""
    day = workload_from_dict({**LENGTHS, "arrival": {"kind": "poisson", "rate_per_s": 400}, "duration_s": 86_400})
    cli = WorkLimits(knobs=cli_limits().knobs)
    with pytest.raises(ServecapError, match="SERVECAP_MAX_REQUESTS"):
        check_workload(day, cli)  # 34,560,000 requests kept one by one: over 10M
    check_workload(day, cli, streaming=True)  # streamed: within 100M
    with pytest.raises(ServecapError, match="SERVECAP_MAX_STREAMED_REQUESTS"):
        check_workload(day, replace(cli, max_streamed_requests=1_000_000), streaming=True)
    raised = replace(API_LIMITS, max_requests=50_000_000)
    check_workload(day, raised, streaming=True)
    with pytest.raises(ServecapError, match="servecap serve --max-requests"):
        check_workload(day, API_LIMITS, streaming=True)
