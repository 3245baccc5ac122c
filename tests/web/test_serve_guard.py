"""`servecap serve` as a real process and a real socket: bound beyond loopback it prints a URL with
a generated token and answers nothing without it; a 1 GB streamed body is cut off at the limit
without the server holding it."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.web.conftest import _free_port


def _local_address() -> str | None:
    """A non-loopback address of this machine (the route's source address; a UDP connect sends
    nothing), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        addr = str(s.getsockname()[0])
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def _free_port_on(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def serve_beyond_loopback(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`servecap serve --host <this machine's address>`: (its base URL, the URL it printed)."""
    addr = _local_address()
    if addr is None:
        pytest.skip("this machine has no non-loopback address")
    port = _free_port_on(addr)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    env.pop("SERVECAP_TOKEN", None)
    cmd = [sys.executable, "-m", "servecap", "serve", "--host", addr, "--port", str(port)]
    cmd += ["--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.sqlite"), "--plan-workers", "0"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        base = f"http://{addr}:{port}"
        deadline = time.monotonic() + 30
        while True:  # the line is printed just before the socket opens
            try:
                httpx.get(f"{base}/api/v1/health", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"servecap serve did not start: {first}") from None
                time.sleep(0.1)
        yield base, first
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_bound_beyond_loopback_it_answers_only_with_the_printed_token(serve_beyond_loopback: tuple[str, str]) -> None:
    base, line = serve_beyond_loopback
    found = re.search(r"\?token=([A-Za-z0-9_\-]+)", line)
    assert found is not None, line
    token = found.group(1)
    body = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
    r = httpx.post(f"{base}/api/v1/plan", json=body, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["field"] == "token"
    assert httpx.get(f"{base}/api/v1/runs", timeout=10).status_code == 401
    assert httpx.get(f"{base}/plan", timeout=10).status_code == 401
    ok = httpx.post(f"{base}/api/v1/plan", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert ok.status_code == 200 and ok.json()["model"]
    with httpx.Client(base_url=base, timeout=10) as browser:  # the printed URL sets the cookie
        page = browser.get(f"/plan?token={token}", follow_redirects=True)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert browser.post("/api/v1/plan", json=body).status_code == 200


def test_a_gigabyte_streamed_body_is_cut_off_at_the_limit(tmp_path: Path) -> None:
    """Chunked (no Content-Length), so only counting while reading can stop it; the server (in
    this process) must not grow by anything like the bytes offered."""
    import resource

    import uvicorn

    from servecap.api import ServeSettings, create_app
    from servecap.api.guard import GuardSettings

    limit = 2 * 1024 * 1024
    app = create_app(ServeSettings(data_dir=tmp_path, guard=GuardSettings(max_body_bytes=limit)))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        rss_before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        offered, chunk = 1_000_000_000, b"9" * 65_536
        sent = 0
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                b"POST /api/v1/models/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
            try:
                while sent < offered:
                    s.sendall(frame)
                    sent += len(chunk)
            except OSError:  # the server answered and closed: the rest is never read
                pass
            answer = b""
            try:
                while b"\r\n\r\n" not in answer or b"}}" not in answer:
                    part = s.recv(65_536)
                    if not part:
                        break
                    answer += part
            except OSError:
                pass
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before_kb) / 1024
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b'"field":"body"' in answer
        assert sent < 100 * 1024 * 1024, f"{sent:,} bytes were taken before the cut-off"
        assert grown_mb < 64, f"the server process grew by {grown_mb:.0f} MB"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
