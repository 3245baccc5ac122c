"""A plan as the API returns it: ``servecap plan --json``'s bytes for one request body.

Module-level functions of plain arguments, so the server can run them in the event loop's worker
thread or in worker processes alike (:mod:`servecap.api.plan_worker`).
"""

from __future__ import annotations

import json
from pathlib import Path

from servecap.api.bodies import PlanBody
from servecap.api.names import body_model

WARM_BODY: dict[str, object] = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
"""Planned once by each worker process as it starts: the imports and catalog caches are loaded
before the first request rather than on it."""


def plan_json(body: PlanBody, upload_dir: Path) -> bytes:
    """The compact JSON of ``servecap plan --json`` for ``body`` (raises ServecapError)."""
    from servecap.app.plan import plan as run_plan

    request = body.request(body_model(upload_dir, body.model))
    return json.dumps(run_plan(request).to_dict(), separators=(",", ":")).encode()


def plan_json_from_key(key: str, upload_dir: str) -> bytes:
    """:func:`plan_json` of a body the server validated and keyed by its JSON
    (``PlanBody.model_dump_json()``): the key is all a worker process is sent."""
    return plan_json(PlanBody.model_validate_json(key), Path(upload_dir))


def warm(upload_dir: str) -> None:
    """Load the planner in a worker process (imports, catalog caches) by planning one body."""
    plan_json(PlanBody.model_validate(WARM_BODY), Path(upload_dir))
