"""Job functions the job manager's tests run in child processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from servecap.errors import ServecapError
from servecap.progress import Progress


def count(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    n = int(payload["n"])
    for i in range(1, n + 1):
        time.sleep(float(payload.get("sleep_s", 0.0)))
        progress(Progress(stage="count", done=i, total=n))
    return {"total": n * (n + 1) // 2}


def refuse(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    raise ServecapError("rate", payload.get("rate"), "must be positive")


def forever(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    while True:
        time.sleep(0.01)
        progress(Progress(stage="forever", done=0))


def allocate(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    """Ask for ``bytes`` of memory at once (a job past the server's memory limit)."""
    block = bytearray(int(payload["bytes"]))
    return {"allocated": len(block)}


def big(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    """A result of ``n`` time-series samples (time_s and one gauge)."""
    n = int(payload["n"])
    return {"timeseries": {"time_s": [0.05 * i for i in range(n)], "kv": [0.5] * n}, "n": n}
