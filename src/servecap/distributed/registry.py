"""Executors by name, and the one function that builds one from user settings."""

from __future__ import annotations

import os

from servecap.distributed.executor import Executor
from servecap.distributed.process_pool import ProcessExecutor
from servecap.distributed.ray_executor import RayExecutor
from servecap.distributed.serial import SerialExecutor
from servecap.errors import ServecapError, did_you_mean

EXECUTORS: dict[str, type] = {"serial": SerialExecutor, "process": ProcessExecutor, "ray": RayExecutor}


WORKERS_PER_CPU = 4
"""Most local workers per CPU of this machine: a sweep point is CPU-bound, so workers beyond the
cores only wait (and each holds a process: 100,000 of them exhaust the machine first)."""


def max_workers() -> int:
    """The most ``--workers`` this machine takes: :data:`WORKERS_PER_CPU` per CPU."""
    return WORKERS_PER_CPU * max(1, os.cpu_count() or 1)


def check_workers(workers: int | None) -> None:
    """Refuse a worker count below 1 or above :func:`max_workers`, before any work."""
    if workers is None:
        return
    if workers < 1:
        raise ServecapError("workers", workers, "must be at least 1")
    if workers > max_workers():
        raise ServecapError(
            "workers",
            workers,
            f"more than {WORKERS_PER_CPU} per CPU of this machine ({os.cpu_count()} CPUs: at most {max_workers()}); "
            "a cluster's size comes from --ray-address, not --workers",
        )


def make_executor(
    kind: str = "process",
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    max_retries: int = 1,
    persistent: bool = False,
) -> Executor:
    """``kind`` is one of :data:`EXECUTORS`; ``workers`` sizes a local pool (or a local Ray
    instance's CPUs); ``ray_address`` joins an existing cluster (``"auto"`` or ``"ray://host:port"``)."""
    if kind not in EXECUTORS:
        raise ServecapError("executor", kind, "unknown executor" + did_you_mean(kind, EXECUTORS))
    check_workers(workers)
    if kind == "serial":
        return SerialExecutor()
    if kind == "process":
        return ProcessExecutor(workers, max_retries=max_retries, persistent=persistent)
    return RayExecutor(ray_address, num_cpus=workers, max_retries=max_retries)
