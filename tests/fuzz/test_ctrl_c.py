"""A long simulation stops on the first Ctrl-C: exit 130 with one line, within a second or two."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest


def _first_progress_line(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    """What the process wrote to stderr up to its first progress line ("simulate: 1,234 / ...")."""
    assert proc.stderr is not None
    fd, seen, deadline = proc.stderr.fileno(), b"", time.monotonic() + timeout_s
    while re.search(rb"^[\w ]+: [\d,]+ ", seen, re.MULTILINE) is None:
        left = deadline - time.monotonic()
        assert left > 0, f"no progress line in {timeout_s:.0f} s: {seen.decode(errors='replace')}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)  # the raw pipe: nothing left in a buffer for communicate()
            assert chunk, f"exited before its first progress line: {seen.decode(errors='replace')}"
            seen += chunk
    return seen


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--rate", "50", "--num-requests", "2000000"],
        ["fleet", "simulate", "--rate", "50", "--replicas", "4", "--num-requests", "2000000"],
    ],
    ids=["simulate", "fleet simulate"],
)
def test_the_first_ctrl_c_stops_a_long_run(argv: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "servecap", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's foreground job
    )
    try:
        # simulating (the run would take minutes): its first progress line says so (stderr is not a
        # terminal: a plain line every 5 s). A fixed sleep raced the interpreter's start on a busy
        # machine: the signal could land before the run, or even the handler, had begun
        head = _first_progress_line(proc, timeout_s=120.0)
        assert proc.poll() is None, head
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=20)
        assert time.monotonic() - t0 < 5.0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = head + err
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "interrupted"
