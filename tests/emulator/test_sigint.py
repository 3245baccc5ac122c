"""SIGINT stops a multi-replica `emulate` started in the background (issue 20, defect 16): a
shell's background job inherits SIGINT ignored, and the parent then never saw it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import httpx

from servecap.emulator.server import free_port


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a non-interactive shell


def test_sigint_stops_every_replica() -> None:
    port = free_port("127.0.0.1")
    args = ["emulate", "--fixed-ttft-s", "0.01", "--fixed-itl-s", "0.01", "--replicas", "2", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "servecap", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_ignore_sigint,  # the point of the test
        start_new_session=True,  # its own group: a failed test still takes the replicas down
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port + 1}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        for p in (port, port + 1):
            try:
                httpx.get(f"http://127.0.0.1:{p}/health", timeout=0.5)
                raise AssertionError(f"replica on {p} still answers")
            except httpx.HTTPError:
                pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the parent and its replicas, if any is left
        proc.wait()
