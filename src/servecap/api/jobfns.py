"""The functions jobs run (in a child process): a JSON payload in, a JSON result out.

The payload is the request body as validated by the API (with an uploaded model already
resolved to its file), so a job repeats exactly what ``servecap simulate``/``capacity --json``
would print for the same flags.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from servecap.api.bodies import CapacityBody, FleetPlanBody, FleetSimulateBody, SimulateBody
from servecap.progress import Progress


def simulate_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.inputs import slo_from_ms
    from servecap.app.simulate import build, simulate

    model_path = payload.pop("_model_path", None)
    db = payload.pop("_db", None)
    body = SimulateBody.model_validate(payload)
    slo = slo_from_ms(body.ttft_slo_ms, body.tpot_slo_ms)
    built = build(
        deployment=body.flags(model_path),
        calibration=None,
        workload=None,
        rate=body.rate,
        users=body.users,
        think_time_s=body.think_time_s,
        stream=body.stream(),
        duration_s=body.duration_s,
        num_requests=body.num_requests,
        slo=slo,
        no_prefix_caching=body.no_prefix_caching,
        max_waiting=body.max_waiting,
        policy=body.policy,
        turns=body.turns,
    )
    has_slo = body.ttft_slo_ms is not None or body.tpot_slo_ms is not None
    response, result = simulate(built, seed=body.seed, slo=slo if has_slo else None, progress=progress)
    data: dict[str, Any] = json.loads(response.model_dump_json())
    data["run_id"] = _store(db, body, result)
    data["timeseries"] = _timeseries(result)
    return data


def capacity_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.capacity import capacity_from_flags

    model_path = payload.pop("_model_path", None)
    body = CapacityBody.model_validate(payload)
    response, _built, _slo = capacity_from_flags(
        deployment=body.flags(model_path),
        calibration=None,
        workload=None,
        closed=body.closed_loop,
        target=body.target,
        think_time_s=body.think_time_s,
        turns=body.turns,
        stream=body.stream(),
        duration_s=body.duration_s,
        num_requests=body.num_requests,
        seed=body.seed,
        ttft_slo_ms=body.ttft_slo_ms,
        tpot_slo_ms=body.tpot_slo_ms,
        no_prefix_caching=body.no_prefix_caching,
        policy=body.policy,
        progress=progress,
    )
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result


def _store(db: str | None, body: SimulateBody, result: Any) -> str:
    """Keep the simulation in the run store (kind "simulated"), as the runs page lists it."""
    from pathlib import Path

    from servecap.results.store import RunStore, new_run_id

    settings = body.model_dump()
    settings["deployment"] = body.flags().to_settings()
    return RunStore(Path(db) if db else None).save_simulated(
        run_id=new_run_id(),
        model=body.model or "",
        mode="open" if body.users is None else "chat users",
        settings=settings,
        records=result.records(),
        summary=result.summary,
        label="web",
    )


def _timeseries(result: Any) -> dict[str, Any] | None:
    """The run's sampled gauges (time, KV usage, queue depth, batch) for the page's plots."""
    ts = result.summary.timeseries
    return None if ts is None else dict(ts.to_dict())


def check_fleet_body(body: FleetSimulateBody, max_requests: int) -> None:
    """Refuse a fleet body before queueing it: the files' own one-line errors, no server file
    paths, and at most ``max_requests`` simulated requests."""
    from servecap.app.fleet import build_fleet, fleet_from_dict
    from servecap.app.simulate import expected_requests
    from servecap.errors import ServecapError
    from servecap.workload import integrated_rate, workload_from_dict
    from servecap.workload.schedule_spec import ScheduleArrival

    fleet = fleet_from_dict(dict(body.fleet))
    for pool in fleet.pools:
        if pool.calibration is not None:
            raise ServecapError(
                f"fleet.pools.{pool.name}.calibration", pool.calibration, "file paths are not accepted over HTTP"
            )
    build_fleet(fleet)  # router names, pool settings, deployments: their one-line errors now
    workload = workload_from_dict(dict(body.workload))
    n = expected_requests(workload)
    if isinstance(workload.arrival, ScheduleArrival) and workload.num_requests is None and workload.duration_s:
        n = round(integrated_rate(workload.arrival, 0.0, workload.duration_s))
    if workload.users is None and (n <= 0 or n > max_requests):
        raise ServecapError(
            "workload.num_requests", n or None, f"give num_requests (or rate x duration_s) up to {max_requests:,}"
        )
    if workload.users is not None and (workload.duration_s is None or workload.duration_s > 86_400):
        raise ServecapError("workload.duration_s", workload.duration_s, "chat users need a duration up to 86,400 s")


def fleet_simulate_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.fleet import FleetSimulateRequest, fleet_from_dict, fleet_simulate
    from servecap.workload import workload_from_dict

    body = FleetSimulateBody.model_validate(payload)
    request = FleetSimulateRequest(
        fleet=fleet_from_dict(dict(body.fleet)), workload=workload_from_dict(dict(body.workload)), seed=body.seed
    )
    response, _result = fleet_simulate(request, progress=progress)
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result


def check_fleet_plan_body(body: FleetPlanBody, max_requests: int) -> None:
    """Refuse a plan body before queueing it: its one-line errors (unknown keys, no candidates,
    unknown GPUs or models, bad traffic) and a peak window of at most ``max_requests``."""
    from servecap.app.fleet_plan import plan_request_from_dict
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.errors import ServecapError

    request = plan_request_from_dict(dict(body.plan))
    if not request.candidates:
        raise ServecapError("plan.candidates", [], "give at least one candidate pool")
    for c in [*request.candidates, *([request.cheaper_gpu] if request.cheaper_gpu else [])]:
        lookup_gpu(c.gpu)
        resolve_model(c.model or request.model)
    if request.max_window_requests > max_requests:
        raise ServecapError(
            "plan.max_window_requests", request.max_window_requests, f"at most {max_requests:,} over HTTP"
        )


def fleet_plan_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.fleet_plan import plan_request_from_dict
    from servecap.app.fleet_planner import fleet_plan

    body = FleetPlanBody.model_validate(payload)
    response = fleet_plan(plan_request_from_dict(dict(body.plan)), progress=progress)
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result
