"""A bounded schemathesis run against servecap's own OpenAPI document (in-process, ASGI):
generated valid and malformed requests to every route never get a 5xx, and every error comes in
the API's one shape (``{"error": {"message", "field", "value"}}``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from servecap.api import ServeSettings, create_app
from servecap.api.guard import GuardSettings

# the test client calls itself "testserver": named as an allowed host, as --allowed-host would
_APP = create_app(
    ServeSettings(
        data_dir=Path("/nonexistent-servecap-upload-dir"), db=None, guard=GuardSettings(allowed_hosts=("testserver",))
    )
)
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)
# jobs start child processes and the runs routes read the user's store: exercised by tests/api/test_api.py
schema = schema.exclude(path_regex=r"^/api/v1/(simulate|capacity|fleet/simulate|fleet/plan|jobs|runs|models/upload)")


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))


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
