"""A long simulation stops on the first Ctrl-C: exit 130 with one line, within a second or two."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest


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
        time.sleep(2.5)  # started and simulating (the run would take minutes)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=20)
        assert time.monotonic() - t0 < 5.0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "interrupted"
