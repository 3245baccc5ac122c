"""The front door read as the RFCs read it: one Host of a host and a port (RFC 9110 7.2, RFC 3986),
one Origin matched exactly (RFC 6454), no framing, redirects to the app's own paths, tokens that
survive a header, and bodies that are UTF-8 JSON with every key once (RFC 8259)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.api.guard import GuardSettings
from servecap.errors import ServecapError
from servecap.web import mount_web
from servecap.web.serve_cmd import start_settings

PLAN = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
TOKEN = "s3cret-token-for-the-tests"


def _client(tmp_path: Path, **guard: Any) -> TestClient:
    app = create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite", guard=GuardSettings(**guard)))
    mount_web(app)
    return TestClient(app, base_url="http://127.0.0.1:8080", follow_redirects=False)


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path) as c:
        yield c


def _is_error(r: Any, status: int, field: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["field"] == field and set(err) == {"message", "field", "value"} and "\n" not in err["message"]


# -- Host ---------------------------------------------------------------------------------------

MALFORMED_HOSTS = [
    "localhost:56223@evil.example",  # userinfo-looking tail: Host has no userinfo
    "[::1]evil.example",  # text after an IP literal
    "localhost:99999",  # port past 65535
    "localhost:0",  # port 0 is no port to connect to
    "localhost:",  # an empty port
    "localhost:8080:80",
    "localhost/evil",
    "local host",
    "[::1",
    "[fe80::1%25eth0]",  # a zone id: RFC 6874, not HTTP's Host
    "[v1.evil]",  # IPvFuture
    "",
    "evil.example\\@localhost",
]


@pytest.mark.parametrize("host", MALFORMED_HOSTS)
def test_a_malformed_host_is_refused_as_a_bad_request(client: TestClient, host: str) -> None:
    _is_error(client.get("/api/v1/gpus", headers={"Host": host}), 400, "host")
    _is_error(client.post("/api/v1/simulate", json={**PLAN, "rate": 1}, headers={"Host": host}), 400, "host")
    assert client.get("/api/v1/jobs").json() == []


def test_two_host_headers_are_refused_even_when_the_first_is_ours(client: TestClient) -> None:
    for pair in (("localhost", "evil.example"), ("evil.example", "localhost"), ("localhost", "localhost")):
        r = client.get("/api/v1/gpus", headers=[("Host", pair[0]), ("Host", pair[1])])
        _is_error(r, 400, "host")


def test_well_formed_hosts_are_parsed_as_the_rfc_reads_them(client: TestClient) -> None:
    from servecap.api.guard import parse_authority

    assert parse_authority("LocalHost:8080") == ("localhost", 8080)
    assert parse_authority("[::1]:65535") == ("::1", 65535)
    assert parse_authority("127.0.0.1") == ("127.0.0.1", None)
    for ok in ("localhost", "localhost:1", "[::1]", "127.0.0.1:8080", "localhost:65535"):
        assert client.get("/api/v1/health", headers={"Host": ok}).status_code == 200, ok
    _is_error(client.get("/api/v1/health", headers={"Host": "evil.example:8080"}), 403, "host")


# -- Origin -------------------------------------------------------------------------------------


def test_two_origin_headers_are_refused(client: TestClient) -> None:
    own = "http://127.0.0.1:8080"
    for pair in ((own, "http://evil.example"), (own, own)):
        r = client.post("/api/v1/plan", json=PLAN, headers=[("Origin", pair[0]), ("Origin", pair[1])])
        _is_error(r, 400, "origin")


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:8080/",  # an origin has no path
        "http://127.0.0.1:8080@evil.example",
        "http://evil.example#@127.0.0.1:8080",
        "http://127.0.0.1:8080.evil.example",
        "ftp://127.0.0.1:8080",
        "http://127.0.0.1:8081",
        "http://127.0.0.1",
    ],
)
def test_an_origin_is_matched_exactly(client: TestClient, origin: str) -> None:
    _is_error(client.post("/api/v1/plan", json=PLAN, headers={"Origin": origin}), 403, "origin")


def test_origins_parse_as_rfc_6454_serialises_them() -> None:
    from servecap.api.guard import parse_origin

    assert parse_origin("http://127.0.0.1:8080") == ("http", "127.0.0.1", 8080)
    assert parse_origin("https://[::1]") == ("https", "::1", None)
    assert parse_origin("null") is None and parse_origin("http://a/") is None


# -- framing, redirects ---------------------------------------------------------------------------


def test_every_response_forbids_framing(client: TestClient) -> None:
    for r in (
        client.get("/plan"),
        client.get("/api/v1/health"),
        client.get("/static/servecap.js"),
        client.get("/api/v1/gpus", headers={"Host": "evil.example"}),  # a refusal too
        client.get("/nowhere"),
    ):
        assert r.headers["x-frame-options"] == "DENY", r.url
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, csp
        assert r.headers["x-content-type-options"] == "nosniff"


def test_the_token_redirect_stays_on_this_server(tmp_path: Path) -> None:
    with _client(tmp_path, token=TOKEN) as c:
        for path, expected in (
            ("//evil.example/", "/evil.example/"),
            ("///evil.example", "/evil.example"),
            ("/%5Cevil.example", "/%5Cevil.example"),
            ("/%2F%2Fevil.example", "/evil.example"),
            ("/plan%0d%0aSet-Cookie:x=1", "/plan%0D%0ASet-Cookie:x=1"),
        ):
            r = c.get(f"http://127.0.0.1:8080{path}?token={TOKEN}")
            assert r.status_code == 303, (path, r.status_code)
            location = r.headers["location"]
            assert location == expected, (path, location)
            assert not location.startswith(("//", "/\\")) and "\r" not in location


def test_a_trailing_encoded_slash_does_not_redirect(client: TestClient) -> None:
    for path in ("/static/plan.html%2f", "/static/plan.html%2F", "/plan/", "/api/v1/health/"):
        r = client.get(path)
        assert r.status_code == 404 and "location" not in r.headers, (path, r.status_code, r.headers)


# -- tokens ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [" " * 16, "abcdefghijklmnop\n", "abcdefgh ijklmnop", "\tabcdefghijklmnopq", "short-token", "abcdefghijklmnop;x",
     "abcdéfghijklmnopq", ""],
)  # fmt: skip
def test_a_token_must_be_16_visible_characters(tmp_path: Path, token: str) -> None:
    with pytest.raises(ServecapError) as err:
        start_settings(host="127.0.0.1", port=8080, data_dir=tmp_path, token=token)
    assert err.value.field == "token" and "\n" not in str(err.value)
    assert not token.strip() or token not in str(err.value)  # the token is never echoed


def test_a_good_token_is_kept(tmp_path: Path) -> None:
    start = start_settings(host="0.0.0.0", port=8080, data_dir=tmp_path, token="A-b_c.d~e+f/g=h!1234")
    assert start.settings.guard.token == "A-b_c.d~e+f/g=h!1234"  # type: ignore[attr-defined]


# -- bodies ---------------------------------------------------------------------------------------


def test_a_duplicate_key_is_refused_naming_it(client: TestClient) -> None:
    body = b'{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "gpu": "H200"}'
    r = client.post("/api/v1/plan", content=body, headers={"Content-Type": "application/json"})
    _is_error(r, 400, "body")
    assert r.json()["error"]["value"] == "gpu"
    nested = b'{"fleet": {"pools": [{"name": "a", "name": "b"}]}, "workload": {}}'
    _is_error(
        client.post("/api/v1/fleet/simulate", content=nested, headers={"Content-Type": "application/json"}), 400, "body"
    )


def test_a_body_must_be_utf8_json(client: TestClient) -> None:
    text = '{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}'
    for raw in (text.encode("utf-16"), text.encode("utf-16-le"), text.encode("utf-32"), b"\xef\xbb\xbf" + text.encode(),
                text.encode("latin-1").replace(b"H100", b"H\xe9100")):  # fmt: skip
        _is_error(client.post("/api/v1/plan", content=raw, headers={"Content-Type": "application/json"}), 400, "body")
    assert (
        client.post("/api/v1/plan", content=text.encode(), headers={"Content-Type": "application/json"}).status_code
        == 200
    )


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                     "application/json; charset=utf-16", "application/json; charset=latin-1"]
)  # fmt: skip
def test_a_body_needs_the_json_content_type(client: TestClient, content_type: str | None) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    r = client.post("/api/v1/plan", content=b'{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}', headers=headers)
    _is_error(r, 415, "content-type")
    ok = client.post("/api/v1/plan", json=PLAN, headers={"Content-Type": "application/json; charset=UTF-8"})
    assert ok.status_code == 200
