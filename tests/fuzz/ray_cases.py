"""Distributed sweeps given an unusable cluster (issue 33): a Ray address that is malformed,
empty, or has nothing behind it, and a worker count no machine runs -- each refused in one line
within 10 s, before any work."""

from __future__ import annotations

import json
from collections.abc import Iterator

from hostile_cases import SWEEP, Case

_SWEEP = json.dumps(SWEEP).encode()
_ARGS = ("sweep", "{f}", "--no-store")

RAY_ARGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ray://127.0.0.1:1 (nothing listens)", ("--executor", "ray", "--ray-address", "ray://127.0.0.1:1")),
    ("an empty address", ("--executor", "ray", "--ray-address", "")),
    ("a GCS address with nothing behind it", ("--executor", "ray", "--ray-address", "127.0.0.1:1")),
    ("port 70000", ("--executor", "ray", "--ray-address", "ray://127.0.0.1:70000")),
    ("a URL with a path", ("--executor", "ray", "--ray-address", "ray://127.0.0.1:10001/x?y")),
    ("a host with a space", ("--executor", "ray", "--ray-address", "ray://bad host:10001")),
    ("http scheme", ("--executor", "ray", "--ray-address", "http://127.0.0.1:8265")),
    ("--workers 100000 (ray)", ("--executor", "ray", "--workers", "100000")),
    ("--workers 100000 (process)", ("--executor", "process", "--workers", "100000")),
)


def ray_cases() -> Iterator[Case]:
    for what, extra in RAY_ARGS:
        yield Case(f"sweep --executor: {what}", (*_ARGS, *extra), {"f": _SWEEP}, True)
