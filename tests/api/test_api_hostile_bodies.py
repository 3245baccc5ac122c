"""Hostile bodies (tests/api/hostile.py) on every POST route: never a 5xx, every refusal in the
one error shape on one line, and no refusal that names a file reveals the server's files. Jobs
that pass are not run (their work is not what is tested here)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from tests.api.hostile import hostile_bodies, nested, put

from servecap.api import ServeSettings, create_app
from servecap.api.jobs import CANCELLED, Job, JobManager


async def _not_run(self: JobManager, job: Job, fn: Any) -> None:
    self._finish(job, CANCELLED, error="not run by this test")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(JobManager, "_run", _not_run)
        settings_ = ServeSettings(data_dir=data, db=data / "runs.sqlite", max_queued_jobs=10_000)
        with TestClient(create_app(settings_), base_url="http://127.0.0.1") as c:
            yield c


def _check(client: TestClient, route: str, body: bytes) -> None:
    r = client.post(route, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code < 500, (route, body[:300], r.status_code, r.text[:500])
    if r.status_code >= 400:
        err = r.json()["error"]
        assert set(err) == {"message", "field", "value"}, err
        assert isinstance(err["message"], str) and err["message"] and "\n" not in err["message"], err
        assert "Traceback" not in r.text and "root:" not in err["message"], err
        for secret in ("root:x:0:0", "PATH="):  # /etc/passwd's or /proc/self/environ's content
            assert secret not in r.text, err


@given(case=hostile_bodies())
@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_hostile_bodies_get_the_error_shape_never_a_5xx(client: TestClient, case: tuple[str, bytes]) -> None:
    _check(client, *case)


@pytest.mark.parametrize("depth", [100, sys.getrecursionlimit() - 50, 10_000, 100_000])
def test_deep_nesting_never_exhausts_the_stack(client: TestClient, depth: int) -> None:
    import json

    fleet = {"pools": [{"name": "a", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}]}
    body = put({"fleet": fleet, "workload": {}}, ("workload", "arrival"), nested(min(depth, 300)))
    _check(client, "/api/v1/fleet/simulate", json.dumps(body).encode())
    raw = b'{"plan": ' + b"[" * depth + b"]" * depth + b"}"
    _check(client, "/api/v1/fleet/plan", raw)


def test_bodies_that_are_not_objects(client: TestClient) -> None:
    for raw in (b"", b"null", b"[]", b"1e999", b'"x"', b"\xff\xfe\x00", b'{"model": "\\ud800"}', b"{" * 50):
        for route in ("/api/v1/plan", "/api/v1/fleet/simulate", "/api/v1/models/upload"):
            _check(client, route, raw)
