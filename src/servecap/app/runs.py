"""The ``runs`` use cases: list, show, export and delete stored runs, and what the other
use cases read from a stored run (its deployment, its measured prefix-cache hit rate).

Responses are pydantic models: ``servecap runs --json`` prints ``list_runs(...).model_dump_json()``
(a JSON array), ``servecap runs show`` prints :func:`show_run`'s model.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from servecap.errors import ServecapError
from servecap.json_object import JsonObject

if TYPE_CHECKING:
    from servecap.results.store import StoredRun
    from servecap.specs.deployment import Deployment


class RunInfo(BaseModel):
    """One stored run in a listing (its summary in ``summary_to_json_dict`` form)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    kind: Literal["measured", "simulated"]
    created_at: str
    url: str
    model: str
    mode: str
    label: str
    sweep_id: str | None
    num_requests: int
    num_errors: int
    interrupted: bool
    summary: JsonObject


class RunList(RootModel[list[RunInfo]]):
    pass


class RunDetail(RunInfo):
    settings: JsonObject
    checks: list[JsonObject]
    client: JsonObject
    wall_duration_s: float


class ListRunsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    db: Path | None = None
    limit: int = Field(default=50, ge=1)
    kind: Literal["measured", "simulated"] | None = None


def _info(run: StoredRun) -> JsonObject:
    from servecap.results.store import run_dict

    d = run_dict(run)
    return {k: d[k] for k in RunInfo.model_fields}


def list_runs(req: ListRunsRequest) -> tuple[str, RunList]:
    """The store's path and its runs, newest first (a damaged row is skipped)."""
    path, rows, _damaged = list_runs_checked(req)
    return path, rows


def list_runs_checked(req: ListRunsRequest) -> tuple[str, RunList, list[str]]:
    """The store's path, its readable runs newest first, and one line per damaged row
    (``run <id>: <problem>``) for the interface to report."""
    from servecap.results.store import RunStore

    store = RunStore(req.db)
    runs, damaged = store.list_runs_checked(req.limit, req.kind)
    notes = [f"run {rid} is damaged and skipped: {problem}" for rid, problem in damaged]
    return str(store.path), RunList([RunInfo.model_validate(_info(r)) for r in runs]), notes


def show_run(run: str, db: Path | None = None) -> RunDetail:
    from servecap.results.store import RunStore, run_dict

    row = run_dict(RunStore(db).get_run(run))
    return RunDetail.model_validate({k: v for k, v in row.items() if k in RunDetail.model_fields})


def export_run(run: str, fmt: str, db: Path | None = None) -> str:
    """A run with every request: JSON (settings, summary, requests) or CSV (requests)."""
    from servecap.results.store import RunStore, export_csv, export_json

    if fmt not in ("json", "csv"):
        raise ServecapError("format", fmt, "must be json or csv")
    store = RunStore(db)
    row = store.get_run(run)
    requests = store.get_requests(row.run_id)
    return export_json(row, requests) if fmt == "json" else export_csv(requests)


def delete_run(run: str, db: Path | None = None) -> str:
    from servecap.results.store import RunStore

    return RunStore(db).delete_run(run)


def deployment_from_settings(settings: Mapping[str, object]) -> tuple[Deployment, list[str], bool]:
    """(Deployment, notes on defaults, prefix caching on) from a run's stored ``settings["deployment"]``."""
    from servecap.app.flags import DeploymentFlags, deployment_from_flags

    if not isinstance(settings, dict):
        raise ServecapError("deployment", settings, "must be a mapping of the flags of `servecap plan`")
    try:
        dep, notes = deployment_from_flags(DeploymentFlags.from_settings(settings))
    except (TypeError, ValueError, AttributeError, KeyError) as err:  # a stored or received one of the wrong types
        raise ServecapError(
            "deployment", settings, f"is not a valid deployment ({type(err).__name__}: {err})"
        ) from None
    return dep, notes, bool(settings.get("enable_prefix_caching", True))


def stored_deployment(run: StoredRun) -> JsonObject:
    """A measured run's stored deployment settings (an error says how to store one)."""
    if run.kind != "measured":
        raise ServecapError("run", run.run_id, f"is a {run.kind} run, not a measurement")
    dep = run.settings.get("deployment")
    if not isinstance(dep, dict):
        raise ServecapError(
            "run",
            run.run_id,
            "has no stored deployment: bench it with --gpu and the "
            "deployment flags of `servecap plan` (automatic against `servecap emulate`)",
        )
    return dep
