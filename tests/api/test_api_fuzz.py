"""A bounded schemathesis run against servecap's own OpenAPI document (in-process, ASGI):
generated valid and malformed requests to every route (jobs accepted but not run) never get a
5xx, and every error comes in the API's one shape (``{"error": {"message", "field", "value"}}``).
Hostile values dropped into valid bodies are tests/api/test_api_hostile_bodies.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from servecap.api import ServeSettings, create_app
from servecap.api.guard import GuardSettings
from servecap.api.jobs import CANCELLED, Job, JobManager

# the test client calls itself "testserver": named as an allowed host, as --allowed-host would
_APP = create_app(
    ServeSettings(
        data_dir=Path("/nonexistent-servecap-upload-dir"), db=None, guard=GuardSettings(allowed_hosts=("testserver",))
    )
)
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)


async def _not_run(self: JobManager, job: Job, fn: Any) -> None:
    """Accepted jobs are not run: what is fuzzed is the API's validation, not the simulator."""
    self._finish(job, CANCELLED, error="not run by this test")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # the runs routes read the user's store
    monkeypatch.setattr(JobManager, "_run", _not_run)


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_one_error_shape(case: schemathesis.Case[Any]) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:500])
    if response.status_code >= 400:
        body = response.json()
        assert "error" in body, (case.method, case.path, response.status_code, body)
        err = body["error"]
        assert set(err) == {"message", "field", "value"}, err
        assert isinstance(err["message"], str) and err["message"]
