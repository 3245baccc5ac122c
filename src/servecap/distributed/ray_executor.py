"""The executor on a Ray cluster: a local one it starts, or one at an address.

Each item becomes one Ray task (``ray.remote``) with Ray's own retry of tasks whose worker died
(``max_retries``); application exceptions are not retried (they would fail again). Results are
collected as they finish (``ray.wait``), so progress is live and a task that fails for good
costs only its own outcome. Ray is an optional dependency: ``pip install 'servecap[distributed]'``.
Ray's documentation: "Fault tolerance — tasks" (``max_retries``, ``retry_exceptions``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from servecap.distributed.executor import WORKER_DIED, TaskOutcome, describe, report
from servecap.errors import ServecapError
from servecap.progress import ProgressFn

T = TypeVar("T")
R = TypeVar("R")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ServecapError("executor", "ray", "needs Ray: pip install 'servecap[distributed]'") from exc
    return ray


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None, max_retries: int = 1) -> None:
        if num_cpus is not None and num_cpus < 1:
            raise ServecapError("num_cpus", num_cpus, "must be at least 1")
        if max_retries < 0:
            raise ServecapError("max_retries", max_retries, "must be 0 or more")
        self.address = address
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self._started = False

    def _ensure_started(self) -> Any:
        ray = _import_ray()
        if ray.is_initialized():
            return ray
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if self.address:
            kwargs["address"] = self.address
        elif self.num_cpus is not None:
            kwargs["num_cpus"] = self.num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ServecapError(
                "ray_address", self.address or "local", f"cannot start or reach Ray: {describe(exc)}"
            ) from exc
        self._started = True
        return ray

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, progress: ProgressFn | None = None
    ) -> list[TaskOutcome[R]]:
        ray = self._ensure_started()
        remote = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(fn)
        index_of = {}
        for i, item in enumerate(items):
            index_of[remote.remote(item)] = i
        outcomes: dict[int, TaskOutcome[R]] = {}
        waiting = list(index_of)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for ref in ready:
                i = index_of[ref]
                outcomes[i] = self._collect(ray, ref, i)
            report(progress, len(outcomes), len(items), self.name)
        return [outcomes[i] for i in range(len(items))]

    def _collect(self, ray: Any, ref: Any, i: int) -> TaskOutcome[R]:
        try:
            return TaskOutcome(index=i, value=ray.get(ref))
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError):
            return TaskOutcome(index=i, error=WORKER_DIED, attempts=self.max_retries + 1)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            return TaskOutcome(index=i, error=describe(cause))

    def close(self) -> None:
        if self._started:
            ray = _import_ray()
            ray.shutdown()
            self._started = False
