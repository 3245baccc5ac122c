"""The jobs of the measuring use cases (run in a child process): the request's JSON in, the
response's JSON out, equal to the CLI's ``--json`` for the same request."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from servecap.progress import Progress


def validate_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    """``servecap validate --json``: every selected corpus row planned and simulated."""
    from servecap.app.validate import validate_request
    from servecap.app.validate_request import ValidateRequest

    def rows(done: int, total: int) -> None:
        progress(Progress("validate", done, total, "rows"))

    response = validate_request(ValidateRequest.model_validate(payload), progress=rows)
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result
