"""A bounded schemathesis run against the emulator's own OpenAPI document, over real HTTP:
generated valid and invalid requests to every operation never get a 5xx, and every error
comes in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from servecap.emulator.openapi import openapi_schema
from servecap.emulator.server import ServerThread, fixed_state


def _document() -> dict[str, object]:
    app = fixed_state(0.0005, 0.0005, model_name="m").driver_app()
    return openapi_schema(app.api)


schema = schemathesis.openapi.from_dict(_document())


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    st = fixed_state(0.0005, 0.0005, model_name="m", max_model_len=64)
    st.vocab_size = 50_000
    with ServerThread(st) as srv:
        yield srv


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_openai_errors(case: schemathesis.Case[Any], server: ServerThread) -> None:
    response = case.call(base_url=server.url, timeout=10)
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400:
        err = response.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}, err
        assert err["code"] == response.status_code and isinstance(err["message"], str)


def test_document_has_both_completion_routes() -> None:
    doc = _document()
    paths = doc["paths"]
    assert isinstance(paths, dict)
    for path in ("/v1/completions", "/v1/chat/completions"):
        assert "400" in paths[path]["post"]["responses"]
    assert "/servecap/stats/reset" not in paths  # control endpoints are off by default
