"""The functions jobs run (in a child process): a JSON payload in, a JSON result out.

The payload is the request body as validated by the API (with an uploaded model already
resolved to its file), so a job repeats exactly what ``servecap simulate``/``capacity --json``
would print for the same flags.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servecap.api.bodies import CapacityBody, SimulateBody
from servecap.api.fleet_bodies import FleetPlanBody, FleetSimulateBody
from servecap.app.limits import API_LIMITS, WorkLimits, check_fleet_plan_work, check_fleet_work, check_workload
from servecap.progress import Progress


def simulate_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.simulate import simulate_request

    model_path = payload.pop("_model_path", None)
    db = payload.pop("_db", None)
    limits = payload.pop("_limits", API_LIMITS)
    body = SimulateBody.model_validate(payload)
    response, _built, result = simulate_request(body, model_path=model_path, progress=progress, limits=limits)
    data: dict[str, Any] = json.loads(response.model_dump_json())
    data["run_id"] = _store(db, body, result)
    data["timeseries"] = _timeseries(result)
    return data


def capacity_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.capacity import capacity_from_request

    model_path = payload.pop("_model_path", None)
    limits = payload.pop("_limits", API_LIMITS)
    body = CapacityBody.model_validate(payload)
    response, _built, _slo = capacity_from_request(body, model_path=model_path, progress=progress, limits=limits)
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result


_LOCAL_ONLY = frozenset({"gpu_file", "calibration", "workload"})  # always None over HTTP


def _store(db: str | None, body: SimulateBody, result: Any) -> str:
    """Keep the simulation in the run store (kind "simulated"), as the runs page lists it."""
    from servecap.results.store import RunStore, new_run_id

    settings = body.model_dump(exclude=set(_LOCAL_ONLY))
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


def check_simulate_body(body: SimulateBody, limits: WorkLimits) -> None:
    """Refuse a single-engine body whose workload exceeds ``limits`` before queueing it (rate x
    duration_s, users x duration_s / think time)."""
    from servecap.app.simulate import workload_from_options

    if body.trace is not None and not body.trace.path.startswith("sample:"):
        # a trace over HTTP is a shipped sample (sample:<name>); the server opens no other file
        from servecap.api.names import refuse_file_field

        refuse_file_field("trace.path", body.trace.path)
    spec = workload_from_options(body.load(), body.stream(), trace=body.trace)
    _check_trace_sample(spec, body_field="trace")
    check_workload(spec, limits, where="")  # the body's own field names


def _check_trace_sample(spec: Any, *, body_field: str | None = None) -> None:
    """A workload's trace sample read now (the server reads samples only, and they are small): its
    name, its window and its format, so that a bad one is a 400 naming the field, as the CLI's exit
    2, rather than a failed job. ``body_field`` renames ``workload.arrival`` in the error."""
    from servecap.errors import ServecapError
    from servecap.workload.generate import session_graph, trace_arrays
    from servecap.workload.spec import TraceArrival

    arrival = spec.arrival
    if not isinstance(arrival, TraceArrival) or not arrival.path.startswith("sample:"):
        return
    try:
        if session_graph(spec) is None:
            trace_arrays(arrival, num_requests=spec.num_requests, duration_s=spec.duration_s)
    except ServecapError as err:
        if body_field is None:
            raise
        field = err.field.replace("workload.arrival", body_field, 1)
        raise ServecapError(field.removeprefix("workload."), err.value, err.problem) from None


def check_fleet_body(
    body: FleetSimulateBody, upload_dir: Path, limits: WorkLimits, max_result_bytes: int | None = None
) -> None:
    """Refuse a fleet body before queueing it: the files' own one-line errors, any file path or
    non-catalog model (``upload:<id>`` names rewritten to the uploads' files in ``body``), and
    work past the API's limits (app/limits.py)."""
    from servecap.api.names import check_spec
    from servecap.fleet.file_schema import build_fleet, fleet_from_dict
    from servecap.workload import workload_from_dict

    fleet = fleet_from_dict(dict(body.fleet))
    check_spec(fleet, body.fleet, "fleet", upload_dir)
    workload = workload_from_dict(dict(body.workload))
    check_spec(workload, body.workload, "workload", upload_dir)
    _check_trace_sample(workload)
    fleet = fleet_from_dict(dict(body.fleet))  # with uploads resolved
    check_fleet_work(fleet, workload, limits)
    _check_fleet_result(fleet, max_result_bytes)
    build_fleet(fleet)  # router names, pool settings, deployments: their one-line errors now


def _check_fleet_result(fleet: Any, max_result_bytes: int | None) -> None:
    """A fleet job's result estimated before it runs (api/result_size.py): a row per replica it may
    run, downsampled time series per pool."""
    from servecap.api.result_size import check_result_bytes, estimate_fleet_result_bytes

    replicas = 0
    for p in fleet.pools:
        most = p.replicas if p.replicas is not None else 1
        replicas += max(most, p.autoscaler.max_replicas) if p.autoscaler is not None else most
    estimate = estimate_fleet_result_bytes(replicas, 1 + len(fleet.pools))
    check_result_bytes(estimate, max_result_bytes, "fleet.pools.replicas", replicas)


def fleet_simulate_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.fleet_simulate import fleet_simulate

    limits = payload.pop("_limits", API_LIMITS)
    body = FleetSimulateBody.model_validate(payload)
    response, _result = fleet_simulate(body.request(), progress=progress, limits=limits)
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result


def check_fleet_plan_body(body: FleetPlanBody, upload_dir: Path, limits: WorkLimits) -> None:
    """Refuse a plan body before queueing it: its one-line errors (unknown keys, no candidates,
    unknown GPUs or models, file paths, bad traffic) and work past the API's limits."""
    from servecap.api.names import check_spec
    from servecap.app.fleet_plan import check_lever_names, plan_request_from_dict
    from servecap.catalog import resolve_model
    from servecap.errors import ServecapError

    request = plan_request_from_dict(dict(body.plan))
    check_spec(request, body.plan, "plan", upload_dir)
    request = plan_request_from_dict(dict(body.plan))  # with uploads resolved
    if not request.candidates:
        raise ServecapError("plan.candidates", [], "give at least one candidate pool")
    check_lever_names(request)
    if request.traffic.workload is not None:
        _check_trace_sample(request.traffic.workload)
    for c in request.candidates:
        resolve_model(c.model or request.model)  # a catalog name or an upload's file (checked above)
    check_fleet_plan_work(request, limits)


def fleet_plan_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.fleet_plan import fleet_plan

    limits = payload.pop("_limits", API_LIMITS)
    body = FleetPlanBody.model_validate(payload)
    response = fleet_plan(body.request(), progress=progress, limits=limits, executor="serial")
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result
