"""The FastAPI application: routes under ``/api/v1/``, errors in one shape, jobs for long work.

``create_app(settings)`` builds it; ``servecap serve`` mounts the web UI beside it and runs it
with uvicorn. New plans are computed first come first served by the plan worker
(``plan_worker.py``: one thread, or ``--plan-workers`` processes), cached answers straight from
the event loop; the other sync routes (compare, catalogs) run in FastAPI's
thread pool; simulations run as jobs in child processes, so none stalls the event loop. Every
request passes the guard first (api/guard.py); every failure leaves in the one error shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from servecap.api.bodies import (
    CapacityBody,
    CompareBody,
    PlanBody,
    SimulateBody,
    UploadBody,
)
from servecap.api.cache import ResponseCache
from servecap.api.cache_replay_job import cache_replay_job, check_cache_replay_body
from servecap.api.fleet_bodies import FleetPlanBody, FleetSimulateBody
from servecap.api.guard import BodyTooLarge, Guard, GuardSettings
from servecap.api.jobfns import (
    capacity_job,
    check_fleet_body,
    check_fleet_plan_body,
    check_simulate_body,
    fleet_plan_job,
    fleet_simulate_job,
    simulate_job,
)
from servecap.api.jobs import JobFn, JobManager, JobQueueFull
from servecap.api.measure_routes import add_measure_routes
from servecap.api.names import body_model
from servecap.api.plan_compute import plan_json_from_key
from servecap.api.plan_compute import warm as warm_plan_worker
from servecap.api.plan_worker import PlanWorker
from servecap.api.replay_job import ReplayBody, check_replay_body, list_sessions, replay_job
from servecap.api.stored import DamagedRun, check_stored_deployment, stored
from servecap.api.strict_json import BadBody, StrictJsonRoute
from servecap.api.uploads import UploadQuota, store_config
from servecap.app.fleet_plan.lever_lists import LeverLists, lever_lists
from servecap.app.limits import API_LIMITS, WorkLimits
from servecap.app.policies import PolicyLists, policy_lists
from servecap.app.runs import ListRunsRequest
from servecap.errors import ServecapError, from_validation_error

API = "/api/v1"
_V = TypeVar("_V")
_log = logging.getLogger("servecap.api")


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Where the server keeps its files, who it answers, and its limits."""

    data_dir: Path
    db: Path | None = None  # the run store (None: the user's default, as `servecap runs`)
    max_running_jobs: int = 2
    max_queued_jobs: int = 16
    plan_workers: int = 0  # new plans: 0 on one worker thread, N in N worker processes
    guard: GuardSettings = field(default_factory=GuardSettings)  # Host/Origin, token, body size
    upload_quota: UploadQuota = field(default_factory=UploadQuota)
    limits: WorkLimits = API_LIMITS  # the work one job may ask for (app/limits.py)
    job_timeout_s: float = 900.0  # a job still running after this is stopped (failed)
    job_memory_bytes: int | None = 4 * 1024**3  # address space of a job's process (None: unlimited)
    max_result_bytes: int | None = (
        64 * 1024**2
    )  # a job's result, estimated before and capped after (api/result_size.py)

    @property
    def upload_dir(self) -> Path:
        return self.data_dir / "uploads"


def _error(status: int, err: ServecapError) -> JSONResponse:
    value = err.value if isinstance(err.value, str | int | float | bool) or err.value is None else str(err.value)
    if isinstance(value, float) and not math.isfinite(value):
        value = str(value)  # JSON has no NaN or infinity
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        value = str(value)  # beyond what JSON readers hold exactly
    content = {"error": {"message": _text(str(err)), "field": _text(err.field), "value": _text(value)}}
    return JSONResponse(status_code=status, content=content)


def _text(value: _V) -> _V:
    """A string as one line of valid UTF-8 (a lone surrogate from a body is escaped)."""
    if not isinstance(value, str):
        return value
    one_line = " ".join(value.split()) if "\n" in value or "\r" in value else value
    return one_line.encode("utf-8", "backslashreplace").decode("utf-8")  # type: ignore[return-value]


def create_app(settings: ServeSettings) -> FastAPI:
    jobs_holder: dict[str, JobManager] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        jobs()
        await plan_worker.start()
        try:
            yield
        finally:
            await jobs_holder["jobs"].shutdown()
            plan_worker.shutdown()

    app = FastAPI(
        title="servecap",
        summary="How many users can this GPU or fleet serve, at what latency and cost.",
        version=_version(),
        lifespan=lifespan,
    )

    app.router.route_class = StrictJsonRoute  # UTF-8 JSON bodies, every key once (api/strict_json.py)
    app.router.redirect_slashes = False  # no redirect the path did not ask for (/static/plan.html%2f: 404)
    app.add_middleware(Guard, settings=settings.guard)

    def jobs() -> JobManager:
        """The job manager, made at start-up (or on first use by a host that skips the lifespan)."""
        if "jobs" not in jobs_holder:
            jobs_holder["jobs"] = JobManager(
                max_running=settings.max_running_jobs,
                max_queued=settings.max_queued_jobs,
                timeout_s=settings.job_timeout_s,
                memory_bytes=settings.job_memory_bytes,
                max_result_bytes=settings.max_result_bytes,
            )
        return jobs_holder["jobs"]

    @app.exception_handler(ServecapError)
    async def on_servecap_error(_request: Request, exc: ServecapError) -> JSONResponse:
        if isinstance(exc, JobQueueFull):
            return _error(429, exc)
        if isinstance(exc, DamagedRun):
            return _error(422, exc)
        if isinstance(exc, BadBody):
            return _error(exc.status, exc)
        missing = exc.field == "job_id" or (exc.field == "run" and exc.problem.startswith(("no such", "no runs")))
        return _error(404 if missing else 400, exc)

    @app.exception_handler(Exception)
    async def on_unforeseen(request: Request, exc: Exception) -> JSONResponse:
        """A bug: one line for the client (no traceback), the traceback in the server's log."""
        _log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        text = " ".join(str(exc).split())[:200]
        problem = f"internal error: {type(exc).__name__}" + (f" ({text})" if text else "")
        return _error(500, ServecapError("request", f"{request.method} {request.url.path}", problem))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc, BodyTooLarge):  # cut off while reading: close the connection, read no more
            response = _error(413, ServecapError("body", f"over {exc.limit:,} bytes", "is larger than the limit"))
            response.headers["Connection"] = "close"
            return response
        value: str | None
        field, value = ("method", request.method) if exc.status_code == 405 else ("path", request.url.path)
        if exc.status_code == 400:  # FastAPI could not read the body (too deeply nested JSON, say)
            field, value = "body", None
        body = {"error": {"message": f"{field}={value!r}: {exc.detail}", "field": field, "value": value}}
        return JSONResponse(status_code=exc.status_code, content=body, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":  # not JSON: FastAPI's location is the byte offset
            where = first.get("loc", ("body", "?"))[-1]
            problem = f"not valid JSON ({first.get('ctx', {}).get('error', 'decode error')} at byte {where})"
            return _error(400, ServecapError("body", None, problem))
        err = from_validation_error(exc)
        # FastAPI prefixes the location with "body"/"query"; the CLI's message names the field alone
        field = err.field.removeprefix("body.").removeprefix("query.")
        return _error(400, ServecapError(field if field != "body" else "body", err.value, err.problem))

    # -- catalogs -------------------------------------------------------------------------------

    @app.get(f"{API}/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": _version()}

    @app.get(f"{API}/gpus")
    def gpus(q: str | None = Query(default=None, max_length=100)) -> list[dict[str, object]]:
        """The GPU catalog (``servecap gpus --json``), optionally searched by name."""
        from servecap.app.catalog import gpu_rows

        return gpu_rows(query=q)

    @app.get(f"{API}/models")
    def models(q: str | None = Query(default=None, max_length=100)) -> Sequence[Mapping[str, object]]:
        """The model catalog (``servecap models --json``), optionally searched by name."""
        from servecap.app.catalog import model_rows

        return model_rows(query=q)

    @app.get(f"{API}/policies")
    def policies() -> PolicyLists:
        """The registered routers, autoscaler policies and presets, with their defaults."""
        return policy_lists()

    @app.get(f"{API}/traces")
    def traces() -> list[dict[str, object]]:
        """The shipped trace samples (the only traces the server reads): name them as a trace's
        ``path`` (``sample:<name>``) in simulate, fleet simulate and fleet plan bodies."""
        from servecap.app.trace_samples import trace_sample_rows

        return [dict(r) for r in trace_sample_rows()]

    @app.post(f"{API}/models/upload")
    def upload(body: UploadBody) -> dict[str, Any]:
        """Keep a ``config.json``; plan with the returned ``model`` name (``upload:<id>``)."""
        name, _path = store_config(settings.upload_dir, body.config, settings.upload_quota, settings.limits.max_layers)
        return {"model": name}

    # -- closed-form ----------------------------------------------------------------------------

    plans = ResponseCache(maxsize=4096)
    upload_dir = str(settings.upload_dir)
    plan_worker = PlanWorker(
        partial(plan_json_from_key, upload_dir=upload_dir),
        settings.plan_workers,
        warm=partial(warm_plan_worker, upload_dir),
    )

    @app.post(f"{API}/plan", response_class=JSONResponse)
    async def plan(body: PlanBody) -> Response:
        """``servecap plan --json`` for the same flags (docs/json-schema.md). Answers are cached by
        body (a plan is a pure function of it); a new one is computed by the plan worker (a thread, or
        ``plan_workers`` processes), first come first served."""
        key = body.model_dump_json()
        content = plans.get(key)
        if content is None:
            content = plans.put(key, await plan_worker.compute(key))
        return Response(content=content, media_type="application/json")

    compares = ResponseCache(maxsize=64)  # an answer holds every candidate: up to about 0.5 MB

    @app.post(f"{API}/compare", response_class=JSONResponse)
    def compare(body: CompareBody) -> Response:
        """``servecap compare --json``: GPUs x counts x dtypes ranked by $/user. Answers are cached by
        body, as plans (a comparison is a pure function of it; an upload is named by its content)."""
        from servecap.app.compare import compare as run_compare

        request = body.model_copy(update={"model": body_model(settings.upload_dir, body.model)})
        key = request.model_dump_json()
        content = compares.get(key)
        if content is None:
            content = compares.put(key, run_compare(request).model_dump_json(by_alias=True).encode())
        return Response(content=content, media_type="application/json")

    # -- jobs -----------------------------------------------------------------------------------

    check_slot = asyncio.Semaphore(1)

    async def checked(check: Callable[..., None], *args: Any) -> None:
        """Run a body's check in a thread, one at a time: a check is pure Python (it holds the
        interpreter lock while it runs), so with one at a time the event loop takes the lock back
        every switch interval and answers /health between its slices."""
        async with check_slot:
            await asyncio.to_thread(check, *args)

    def accepted(kind: str, fn: JobFn, payload: dict[str, Any]) -> JSONResponse:
        """Queue a job; 202 with its snapshot and where to follow it."""
        job = jobs().submit(kind, fn, payload)
        return JSONResponse(status_code=202, content=job.snapshot(), headers={"Location": f"{API}/jobs/{job.id}"})

    def engine_payload(body: SimulateBody | CapacityBody) -> dict[str, Any]:
        """A single-engine job's body, with an uploaded model resolved to its file."""
        payload = body.model_dump()
        payload["_model_path"] = body_model(settings.upload_dir, body.model)
        payload["_limits"] = settings.limits
        return payload

    @app.post(f"{API}/simulate", status_code=202)
    async def simulate(body: SimulateBody) -> JSONResponse:
        """Start ``servecap simulate`` as a job; its result is ``simulate --json`` plus the time series."""
        # every check off the event loop (a thread): /health answers while a body is sized
        await checked(check_simulate_body, body, settings.limits)  # capacity's probes: in the job
        payload = engine_payload(body)
        payload["_db"] = str(settings.db) if settings.db is not None else None  # the run is stored
        return accepted("simulate", simulate_job, payload)

    @app.post(f"{API}/capacity", status_code=202)
    async def capacity(body: CapacityBody) -> JSONResponse:
        """Start ``servecap capacity`` as a job; its result is ``capacity --json``."""
        return accepted("capacity", capacity_job, engine_payload(body))

    @app.post(f"{API}/fleet/simulate", status_code=202)
    async def fleet_simulate(body: FleetSimulateBody) -> JSONResponse:
        """Start ``servecap fleet simulate`` as a job; its result is ``fleet simulate --json``
        (``fidelity: cache-replay``: ``fleet simulate --fidelity cache-replay --json`` of a trace
        sample, api/cache_replay_job.py)."""
        if body.fidelity == "cache-replay":
            await checked(check_cache_replay_body, body, settings.upload_dir, settings.limits)
            return accepted("fleet-cache-replay", cache_replay_job, {**body.model_dump(), "_limits": settings.limits})
        await checked(check_fleet_body, body, settings.upload_dir, settings.limits, settings.max_result_bytes)
        return accepted("fleet-simulate", fleet_simulate_job, {**body.model_dump(), "_limits": settings.limits})

    @app.get(f"{API}/fleet/plan/levers")
    def fleet_plan_levers() -> LeverLists:
        """The planner's levers, and those a plan without ``levers`` runs."""
        return lever_lists()

    @app.post(f"{API}/fleet/plan", status_code=202)
    async def fleet_plan(body: FleetPlanBody) -> JSONResponse:
        """Start ``servecap fleet plan`` as a job; its result is ``fleet plan --json``."""
        await checked(check_fleet_plan_body, body, settings.upload_dir, settings.limits)
        return accepted("fleet-plan", fleet_plan_job, {**body.model_dump(), "_limits": settings.limits})

    @app.get(f"{API}/monitor/sessions")
    def monitor_sessions() -> list[dict[str, Any]]:
        """The monitor sessions in the server's results file, newest first (api/replay_job.py)."""
        return list_sessions(settings.db)

    @app.post(f"{API}/monitor/replay", status_code=202)
    async def monitor_replay(body: ReplayBody) -> JSONResponse:
        """Start ``servecap monitor replay`` of a session through a fleet as a job."""
        # the history is read and sized in a thread: a long recording never holds the event loop
        await checked(check_replay_body, body, settings.db, settings.upload_dir, settings.limits)
        return accepted("monitor-replay", replay_job, {**body.model_dump(), "_db": str(settings.db)})

    @app.get(f"{API}/jobs")
    async def list_jobs() -> list[dict[str, Any]]:
        return [{**j.snapshot(), "result": None} for j in jobs().list()]

    @app.get(f"{API}/jobs/{{job_id}}", response_class=JSONResponse)
    async def get_job(job_id: str) -> Response:
        return Response(content=jobs().get(job_id).snapshot_json(), media_type="application/json")

    @app.delete(f"{API}/jobs/{{job_id}}")
    async def cancel_job(job_id: str) -> dict[str, Any]:
        return jobs().cancel(job_id).snapshot()

    @app.get(f"{API}/jobs/{{job_id}}/events")
    async def job_events(job_id: str) -> StreamingResponse:
        """Server-sent events: one ``progress`` event per change, then ``done``/``failed``/``cancelled``."""
        manager = jobs()
        manager.get(job_id)  # 404 before the stream starts

        async def stream() -> AsyncIterator[bytes]:
            job = manager.get(job_id)
            async for snap in manager.events(job_id):
                kind = snap["state"] if snap["state"] in ("done", "failed", "cancelled") else "progress"
                data = job.snapshot_json() if kind == "done" else json.dumps({**snap, "result": None}).encode()
                yield f"event: {kind}\ndata: ".encode() + data + b"\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    # -- stored runs ----------------------------------------------------------------------------

    @app.get(f"{API}/runs")
    def runs(
        kind: Literal["measured", "simulated"] | None = None,
        limit: int = Query(default=ListRunsRequest.model_fields["limit"].default, ge=1, le=1000),
    ) -> list[dict[str, Any]]:
        """Stored runs, newest first (``servecap runs --json``)."""
        from servecap.app.runs import list_runs

        _path, listing = stored(
            "runs", None, lambda: list_runs(ListRunsRequest(db=settings.db, limit=limit, kind=kind))
        )
        return [json.loads(r.model_dump_json()) for r in listing.root]

    @app.get(f"{API}/runs/{{run_id}}")
    def run(run_id: str) -> dict[str, Any]:
        """One run with its settings and checks (``servecap runs show --json``)."""
        from servecap.app.runs import show_run

        detail: dict[str, Any] = json.loads(
            stored("run", run_id, lambda: show_run(run_id, settings.db)).model_dump_json()
        )
        return detail

    @app.get(f"{API}/runs/{{run_id}}/requests")
    def run_requests(run_id: str) -> dict[str, Any]:
        """Every request of a run with its token times (``servecap runs export --format json``)."""
        from servecap.app.runs import export_run

        exported: dict[str, Any] = json.loads(stored("run", run_id, lambda: export_run(run_id, "json", settings.db)))
        return exported

    @app.get(f"{API}/runs/{{run_id}}/sketches")
    def run_sketches(run_id: str) -> dict[str, Any]:
        """A streamed run's percentiles from its stored sketches, per group (run, pool, tenant,
        class) and per time window (``servecap runs show --sketches``; the raw buckets stay in
        the CLI's ``--json``)."""
        from dataclasses import asdict

        from servecap.app.sketch_report import sketch_report
        from servecap.results.store import RunStore

        raw = stored("run", run_id, lambda: RunStore(settings.db).get_sketches(run_id))
        if raw is None:
            raise ServecapError("run", run_id, "was stored with its records, not sketches (its requests show them)")
        return asdict(stored("run", run_id, lambda: sketch_report(raw)))

    @app.get(f"{API}/runs/{{run_id}}/accuracy")
    def run_accuracy(run_id: str) -> dict[str, Any]:
        """A measured run next to the simulator's prediction (``servecap accuracy --json``)."""
        from servecap.app.accuracy import AccuracyRequest, accuracy
        from servecap.app.runs import show_run

        detail = stored("run", run_id, lambda: show_run(run_id, settings.db))
        check_stored_deployment(detail.settings.get("deployment"), settings.upload_dir)
        response = stored("run", run_id, lambda: accuracy(AccuracyRequest(run=run_id, db=settings.db)))
        result: dict[str, Any] = json.loads(response.model_dump_json())
        return result

    add_measure_routes(app, API, settings.upload_dir, settings.db, accepted)
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("servecap")
    except PackageNotFoundError:
        return "0+unknown"
