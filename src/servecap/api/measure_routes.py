"""The HTTP routes of the measuring and configuration use cases that are safe to serve: pure
computations on the body or on the server's own run store.

- ``POST /api/v1/validate`` (a job): the corpus rows planned and simulated
  (``servecap validate --json``); the body is
  :class:`~servecap.app.validate.ValidateRequest` without a calibration file.
- ``POST /api/v1/calibrate``: the step-time coefficients fitted to runs in the server's own
  store (``servecap calibrate --json``); the body is
  :class:`~servecap.app.calibrate.CalibrateRequest` without a file to write or a store to read
  (the answer's ``output`` is null), and each run's stored deployment is checked as
  ``/runs/{id}/accuracy`` checks it (catalog names only, no file).
- ``POST /api/v1/export/monitoring``: a Grafana dashboard or Prometheus alert rules for a plan
  object (``servecap export grafana|alerts PLAN.json --json``).
- ``POST /api/v1/export``: a fleet file's or plan's text in, one target's configuration out
  (``servecap export TARGET --json``). The body is the use case's request
  (:class:`~servecap.export.request.ExportRequest`); its ``name`` is a label (its suffix
  gives the format), never opened. A fleet file naming a file (``gpu_file``, a model's
  ``config.json``) is refused: the server reads no files for a client.

Not served: ``bench`` and ``monitor``, which connect to a URL the user gives; a server doing
that for any client would reach whatever its network reaches. They stay CLI commands.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import field_validator

from servecap.api.jobs import JobFn
from servecap.app.calibrate import CalibrateRequest, CalibrateResponse
from servecap.app.export.monitoring import MonitoringExportRequest, MonitoringExportResponse
from servecap.app.validate_request import ValidateRequest
from servecap.errors import ServecapError
from servecap.export.request import ExportRequest, ExportResponse

if TYPE_CHECKING:
    from servecap.results.store import RunStore, StoredRun

Accept = Callable[[str, JobFn, dict[str, Any]], JSONResponse]
"""Queue a job and answer 202 (``create_app``'s ``accepted``)."""


class ValidateBody(ValidateRequest):
    """``servecap validate``'s request, less the calibration file (the server opens no path a
    client names)."""

    @field_validator("calibration")
    @classmethod
    def _no_file(cls, v: Path | None) -> Path | None:
        if v is not None:
            raise ValueError("file paths are not accepted by the server")
        return v


class CalibrateBody(CalibrateRequest):
    """``servecap calibrate``'s request on the server's store, writing no file."""

    output: Path | None = None

    @field_validator("output", "db")
    @classmethod
    def _no_path(cls, v: Path | None) -> Path | None:
        if v is not None:
            raise ValueError("file paths are not accepted by the server")
        return v


def refuse_control_characters(field: str, text: str) -> None:
    """A name written into a comment line of the output holds no line break (or other control
    character) that would end the comment."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ServecapError(field, text, "must not hold control characters (line breaks, tabs, ...)")


def _stored_run(store: RunStore, name: str) -> StoredRun:
    """A run named as ``calibrate`` names them (an id, a unique prefix, or ``last``)."""
    from servecap.app.calibrate import last_usable_run

    return last_usable_run(store)[0] if name == "last" else store.get_run(name)


def check_export_body(body: ExportRequest, upload_dir: Path) -> None:
    """Refuse, by name alone, every file a fleet file in the body would make the server read
    (file fields, models that are not catalog names); a plan holds numbers only."""
    from servecap.api.names import check_spec
    from servecap.export.source import PLAN_SCHEMA_PREFIX
    from servecap.files import decode_text, format_of, parse_document
    from servecap.fleet.file_schema import FleetFile, fleet_from_dict

    refuse_control_characters("name", body.name)
    fmt = format_of(body.name, "name", ("json", "yaml"))
    raw: dict[str, object] = parse_document(
        decode_text(body.content, "content", body.name), fmt, "content", body.name, mapping=True
    )
    schema = raw.get("schema")
    if (isinstance(schema, str) and schema.startswith(PLAN_SCHEMA_PREFIX)) or "pools" not in raw:
        return  # a plan, or not a fleet file (the use case says which)
    if "gateway" not in FleetFile.model_fields:
        raw.pop("gateway", None)  # read by the export itself (export/source.py)
    fleet = fleet_from_dict(raw)
    resolved = copy.deepcopy(raw)
    check_spec(fleet, resolved, "content", upload_dir)
    if resolved != raw:
        raise ServecapError("content", body.name, "names an uploaded model (upload:<id>): export takes catalog models")


def add_measure_routes(app: FastAPI, api: str, upload_dir: Path, db: Path | None, accepted: Accept) -> None:
    """Add this module's routes under ``api`` (``/api/v1``); ``db`` is the server's run store
    (None: the user's default), kept as ``app.state.run_db`` for whoever fills it."""
    app.state.run_db = db

    @app.post(f"{api}/calibrate", response_model=CalibrateResponse)
    def calibrate(body: CalibrateBody) -> Response:
        """``servecap calibrate --json`` on stored runs of one deployment; no file is written."""
        from servecap.api.stored import check_stored_deployment, stored
        from servecap.app.calibrate import calibrate as run_calibrate
        from servecap.results.store import RunStore

        store = RunStore(db)
        for name in body.runs:
            row = stored("run", name, partial(_stored_run, store, name))
            check_stored_deployment(row.settings.get("deployment"), upload_dir)
        request = CalibrateRequest.model_validate({**body.model_dump(), "output": None, "db": db})
        response = stored("runs", ",".join(body.runs), lambda: run_calibrate(request))
        # as `calibrate --json` prints it (a fit's NaN, say an r2 of constant steps, is null)
        return Response(content=response.model_dump_json(), media_type="application/json")

    @app.post(f"{api}/validate", status_code=202)
    async def validate(body: ValidateBody) -> JSONResponse:
        """Start ``servecap validate`` as a job; its result is ``validate --json``."""
        from servecap.api.measure_jobs import validate_job

        return accepted("validate", validate_job, body.model_dump(mode="json"))

    @app.post(f"{api}/export/monitoring")
    def export_monitoring(body: MonitoringExportRequest) -> MonitoringExportResponse:
        """``servecap export grafana|alerts PLAN.json --json``: the dashboard or rules for a plan
        (``POST /api/v1/plan``'s answer); ``source`` names it in the output."""
        from servecap.app.export.monitoring import monitoring_export

        refuse_control_characters("source", body.source)
        return monitoring_export(body)

    @app.post(f"{api}/export")
    def export(body: ExportRequest) -> ExportResponse:
        """``servecap export TARGET --json``: the target's configuration (provenance header, YAML)
        and the settings it cannot express, for a fleet file's or plan's text."""
        from servecap.app.export import export_file

        check_export_body(body, upload_dir)
        return export_file(body)
