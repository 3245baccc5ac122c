"""Executors by name, and the one function that builds one from user settings."""

from __future__ import annotations

from servecap.distributed.executor import Executor
from servecap.distributed.process_pool import ProcessExecutor
from servecap.distributed.ray_executor import RayExecutor
from servecap.distributed.serial import SerialExecutor
from servecap.errors import ServecapError, did_you_mean

EXECUTORS: dict[str, type] = {"serial": SerialExecutor, "process": ProcessExecutor, "ray": RayExecutor}


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
    if kind == "serial":
        return SerialExecutor()
    if kind == "process":
        return ProcessExecutor(workers, max_retries=max_retries, persistent=persistent)
    return RayExecutor(ray_address, num_cpus=workers, max_retries=max_retries)
