"""Partial requests are cut off at the read deadline; full ones are served as before; one log
line names at most 10 ignored fields."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.request

import pytest

from servecap.emulator.protocol import CompletionRequest
from servecap.emulator.server import ServerThread, fixed_state


def _closed_within(sock: socket.socket, limit_s: float) -> float:
    t0 = time.monotonic()
    sock.settimeout(limit_s)
    data = sock.recv(1024)  # b"" when the server closes the connection
    assert data == b"", data
    return time.monotonic() - t0


@pytest.mark.parametrize(
    "partial",
    [
        b"",  # connected, nothing sent
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n",  # headers never finished
        b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"model"',  # body short
    ],
)
def test_a_partial_request_is_disconnected_at_the_deadline(partial: bytes) -> None:
    with ServerThread(fixed_state(0.001, 0.001, model_name="m"), request_read_timeout_s=0.5) as srv:
        with socket.create_connection((srv.host, srv.port)) as sock:
            sock.sendall(partial)
            assert _closed_within(sock, 5.0) < 3.0
        with urllib.request.urlopen(srv.url + "/v1/models", timeout=5) as resp:  # still answering
            assert json.loads(resp.read())["data"][0]["id"] == "m"


def test_a_slow_stream_is_not_cut_by_the_read_deadline() -> None:
    """The deadline covers reading the request, not writing the answer."""
    with ServerThread(fixed_state(0.05, 0.05, model_name="m"), request_read_timeout_s=0.3) as srv:
        body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 12, "stream": True}).encode()
        req = urllib.request.Request(
            srv.url + "/v1/completions", data=body, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:  # ~0.6 s of streaming, past 0.3 s
            text = resp.read().decode()
        assert text.rstrip().endswith("data: [DONE]")


def test_ignored_fields_are_logged_in_one_bounded_line(caplog: pytest.LogCaptureFixture) -> None:
    extra = {f"field_{i:05d}": i for i in range(10_000)}
    with caplog.at_level(logging.WARNING):
        CompletionRequest.model_validate({"model": "m", "prompt": "x", **extra})
    [line] = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert "'field_00009'" in line and "'field_00010'" not in line and "and 9,990 more" in line
    assert len(line) < 400
