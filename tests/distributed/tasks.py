"""Top-level task functions the executors' tests ship to worker processes."""

from __future__ import annotations

import os


def square(x: int) -> int:
    return x * x


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"bad item {x}")
    return x * x


def die_on_three(x: int) -> int:
    if x == 3:
        os._exit(17)  # the worker process dies: no exception reaches the pool
    return x * x
