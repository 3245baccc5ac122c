"""The cyclic garbage collector paused for the length of a simulation.

A simulation allocates millions of short-lived objects (steps, requests, records) and frees them
by reference counting; it builds no reference cycles on its hot path. CPython's collector still
runs a young-generation pass every 700 net allocations and, as the surviving objects pile up
(the records of a long run), full passes over all of them — 10–25% of a large fleet run's wall
time in our measurements (``benchmarks/fleet_speed.py``). Pausing it changes no result; whatever
cyclic garbage a run leaves is collected when the collector resumes, at the end of the run.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block (restored as it was, even on an error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
