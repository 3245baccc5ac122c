"""The front door (api/guard.py) in-process: Host and Origin allow-lists against DNS rebinding and
cross-site requests, the token, and the body limit counted while the body arrives."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servecap.api import ServeSettings, create_app
from servecap.api.guard import GuardSettings

PLAN = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
TOKEN = "s3cret-token-for-the-tests"


def _client(tmp_path: Path, base_url: str = "http://127.0.0.1:8080", **guard: Any) -> TestClient:
    app = create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite", guard=GuardSettings(**guard)))
    return TestClient(app, base_url=base_url, follow_redirects=False)


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path) as c:
        yield c


def _is_error(r: Any, status: int, field: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["field"] == field and set(err) == {"message", "field", "value"} and "\n" not in err["message"]


def test_a_foreign_host_is_refused(client: TestClient) -> None:
    r = client.post("/api/v1/simulate", json={**PLAN, "rate": 1}, headers={"Host": "rebind.attacker.example"})
    _is_error(r, 403, "host")
    assert client.get("/api/v1/jobs").json() == []  # nothing was started
    _is_error(client.get("/api/v1/gpus", headers={"Host": "rebind.attacker.example:8080"}), 403, "host")
    _is_error(client.get("/api/v1/health", headers={"Host": "192.0.2.7"}), 403, "host")  # not ours, though an IP
    for ok in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST", "127.0.0.2"):
        assert client.get("/api/v1/health", headers={"Host": ok}).status_code == 200, ok


def test_allowed_hosts_extend_the_list_and_every_interface_takes_ip_literals(tmp_path: Path) -> None:
    with _client(tmp_path, allowed_hosts=("capacity.example.org",)) as c:
        assert c.get("/api/v1/health", headers={"Host": "capacity.example.org"}).status_code == 200
        _is_error(c.get("/api/v1/health", headers={"Host": "other.example.org"}), 403, "host")
    with _client(tmp_path, bind_host="0.0.0.0", token=TOKEN) as c:
        assert c.get("/api/v1/health", headers={"Host": "192.0.2.7:8080"}).status_code == 200
        _is_error(c.get("/api/v1/health", headers={"Host": "rebind.attacker.example"}), 403, "host")


def test_cross_site_state_changes_are_refused(client: TestClient) -> None:
    for origin in ("http://evil.example", "null", "http://localhost:9999", "file://", "http://[", "http://[::1"):
        _is_error(client.post("/api/v1/plan", json=PLAN, headers={"Origin": origin}), 403, "origin")
    r = client.delete("/api/v1/jobs/1-abc", headers={"Origin": "http://evil.example"})
    _is_error(r, 403, "origin")
    _is_error(client.post("/api/v1/plan", json=PLAN, headers={"Sec-Fetch-Site": "cross-site"}), 403, "origin")
    # the server's own pages (same origin) and scripts without an Origin pass
    assert client.post("/api/v1/plan", json=PLAN, headers={"Origin": "http://127.0.0.1:8080"}).status_code == 200
    assert client.post("/api/v1/plan", json=PLAN).status_code == 200
    assert client.get("/api/v1/gpus", headers={"Origin": "http://evil.example"}).status_code == 200  # reads: CORS


def test_the_token_is_required_when_set(tmp_path: Path) -> None:
    with _client(tmp_path, token=TOKEN) as c:
        r = c.post("/api/v1/plan", json=PLAN)
        _is_error(r, 401, "token")
        assert r.headers["www-authenticate"] == "Bearer" and TOKEN not in r.text
        _is_error(c.post("/api/v1/plan", json=PLAN, headers={"Authorization": "Bearer wrong"}), 401, "token")
        for odd in ("Bearer \u00e9t\u00e9".encode("latin-1"), b"Bearer \xff\xfe", b"Basic abc"):
            _is_error(c.post("/api/v1/plan", json=PLAN, headers={"Authorization": odd}), 401, "token")
        _is_error(c.get("/api/v1/gpus?token=%C3%A9t%C3%A9"), 401, "token")
        _is_error(c.get("/api/v1/gpus", headers={"Cookie": 'servecap_token="\\xff"; bad'}), 401, "token")
        assert c.post("/api/v1/plan", json=PLAN, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert c.get("/api/v1/health").status_code == 200  # for load balancers
        assert c.post(f"/api/v1/plan?token={TOKEN}", json=PLAN).status_code == 200
        # a page opened from the start-up URL: the token becomes a cookie and leaves the URL
        r = c.get(f"/plan?token={TOKEN}&model=x")
        assert r.status_code == 303 and r.headers["location"] == "/plan?model=x"
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert c.post("/api/v1/plan", json=PLAN).status_code == 200  # the cookie from the redirect
        c.cookies.clear()
        c.cookies.set("servecap_token", "wrong")
        _is_error(c.get("/api/v1/gpus"), 401, "token")


def test_a_declared_length_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    with _client(tmp_path, max_body_bytes=1000) as c:
        r = c.post("/api/v1/models/upload", content=b"x" * 5000, headers={"Content-Type": "application/json"})
        _is_error(r, 413, "body")
        assert "5,000 bytes" in r.text and "1,000" in r.text
        assert c.post("/api/v1/plan", json=PLAN).status_code == 200


def test_a_streamed_body_is_cut_off_at_the_limit_without_reading_the_rest(tmp_path: Path) -> None:
    """A 1 GB chunked body (no Content-Length), offered 64 KiB at a time: the server stops asking
    for chunks just past the limit and answers 413 in the one error shape."""
    limit, chunk, total = 1_000_000, 65_536, 1_000_000_000
    app = create_app(ServeSettings(data_dir=tmp_path, guard=GuardSettings(max_body_bytes=limit)))
    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += chunk
        return {"type": "http.request", "body": b" " * chunk, "more_body": pulled < total}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/models/upload",
        "raw_path": b"/api/v1/models/upload",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 413
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert b'"field":"body"' in body
    assert pulled <= limit + chunk  # at most one chunk past the limit was read: not the gigabyte


_HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=60)


@given(host=_HEADER_TEXT, origin=_HEADER_TEXT, auth=_HEADER_TEXT, cookie=_HEADER_TEXT, query=_HEADER_TEXT)
@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_hostile_headers_get_a_4xx_in_the_error_shape(
    guarded: TestClient, host: str, origin: str, auth: str, cookie: str, query: str
) -> None:
    texts = {"Host": host or "x", "Origin": origin, "Authorization": auth, "Cookie": cookie}
    headers = {k: v.encode("latin-1") for k, v in texts.items()}  # any byte a header may carry
    r = guarded.post("/api/v1/plan", params={"token": query}, json=PLAN, headers=headers)
    assert r.status_code in (400, 401, 403), (r.status_code, r.text)
    _is_error(r, r.status_code, r.json()["error"]["field"])


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with _client(tmp_path_factory.mktemp("guarded"), token=TOKEN) as c:
        yield c
