"""`serve` closes a connection whose request does not arrive whole within its read deadline (as
`emulate` does), so half-sent requests cannot keep it from answering `/health`."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.web.conftest import _free_port

from servecap.api import ServeSettings, create_app
from servecap.web import mount_web
from servecap.web.serve_cmd import serve_config


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[str]:
    import uvicorn

    app = create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite"))
    mount_web(app)
    port = _free_port()
    server = uvicorn.Server(serve_config(app, "127.0.0.1", port, request_read_timeout_s=0.5))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


PARTIALS = [
    b"",  # connected, nothing sent
    b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n",  # headers never finished
    b"POST /api/v1/plan HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
]


def test_half_sent_requests_are_closed_at_the_deadline_and_health_answers(served: str) -> None:
    host, port = served.split(":")
    socks = []
    try:
        for i in range(60):  # bounded: 60 half-open connections, 20 of each shape
            s = socket.create_connection((host, int(port)))
            s.sendall(PARTIALS[i % len(PARTIALS)])
            socks.append(s)
        t0 = time.monotonic()
        assert httpx.get(f"http://{served}/api/v1/health", timeout=5).status_code == 200
        assert time.monotonic() - t0 < 1.0
        t0 = time.monotonic()
        for s in socks:  # every one is closed by the server (recv gives b"") soon after 0.5 s
            s.settimeout(5.0)
            assert s.recv(1024) in (b"",), "the server kept a half-sent request open"
        assert time.monotonic() - t0 < 4.0
    finally:
        for s in socks:
            s.close()
