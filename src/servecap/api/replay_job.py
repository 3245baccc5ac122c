"""The shadow autoscaler over the HTTP API (the web runs page): the monitor sessions the server's
store holds, and ``monitor replay`` of one of them through a fleet given as a JSON object.

``GET /api/v1/monitor/sessions`` lists the sessions ``servecap monitor --db`` wrote into the
server's results file (newest first); ``POST /api/v1/monitor/replay`` ``{"session", "fleet",
"pool", "seed"}`` runs :func:`servecap.app.monitor_replay.replay_fleet` as a job: its result is
``monitor replay --json`` for the same session and fleet file. The fleet is checked as
``fleet/simulate`` checks its own (names, never paths; the work limits, with the history's
duration as the workload's) before the job is queued.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from servecap.api.bodies import plain_tree
from servecap.app.limits import API_LIMITS, WorkLimits
from servecap.errors import ServecapError
from servecap.progress import Progress

FLEET_NAME = Path("request-body-fleet")  # how the answer names a fleet that came as a body


class ReplayBody(BaseModel):
    """``servecap monitor replay DB --session S --fleet FILE --pool P --seed N``, the fleet file as
    a JSON object (the keys the YAML file takes; docs/fleet.md)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    session: str | None = None  # None: the latest
    fleet: dict[str, object]
    pool: str | None = None
    seed: int = Field(default=0, ge=0, le=2**32 - 1)

    @field_validator("fleet")
    @classmethod
    def _plain(cls, v: dict[str, object], info: ValidationInfo) -> dict[str, object]:
        return plain_tree(v, str(info.field_name))


def list_sessions(db: Path | None) -> list[dict[str, Any]]:
    """The monitor sessions in ``db``, newest first: id, start, URLs and sample count (none when
    the file is missing or holds no monitor tables; a damaged store is one error naming it and
    the row: monitor/history.py)."""
    from servecap.monitor.history import sessions_in_store

    if db is None or not db.is_file():
        return []
    return sessions_in_store(db)


def check_replay_body(body: ReplayBody, db: Path | None, upload_dir: Path, limits: WorkLimits) -> None:
    """Refuse a replay before queueing it: no store, an unknown session, a fleet with paths or bad
    names, or a history longer than the API simulates (app/limits.py)."""
    from servecap.api.names import check_spec
    from servecap.app.limits import check_fleet_work
    from servecap.app.monitor_replay import history_workload
    from servecap.fleet.file_schema import build_fleet, fleet_from_dict
    from servecap.monitor.history import history_from_store

    if db is None or not db.is_file():
        raise ServecapError("session", body.session, "the server's results file has no monitor sessions")
    fleet = fleet_from_dict(dict(body.fleet))
    check_spec(fleet, body.fleet, "fleet", upload_dir)
    fleet = fleet_from_dict(dict(body.fleet))  # with uploads resolved
    check_fleet_work(fleet, history_workload(history_from_store(db, body.session)), limits)
    build_fleet(fleet)


def replay_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    """The job: ``monitor replay --json`` of the session through the body's fleet."""
    from servecap.app.monitor_replay import replay_fleet
    from servecap.fleet.file_schema import fleet_from_dict
    from servecap.monitor.history import history_from_store

    payload.pop("_limits", API_LIMITS)  # checked before queueing (check_replay_body)
    db = Path(str(payload.pop("_db")))
    body = ReplayBody.model_validate(payload)
    progress(Progress("replay", 0, None, "requests", "reading the session"))
    response, _ = replay_fleet(
        history_from_store(db, body.session), fleet_from_dict(dict(body.fleet)), FLEET_NAME, pool=body.pool,
        seed=body.seed, progress=progress,
    )  # fmt: skip
    # the answer names the session, not the server's file
    named = response.model_copy(update={"history": f"monitor session {body.session or 'latest'}"})
    result: dict[str, Any] = json.loads(named.model_dump_json())
    return result
