"""The executor seam and the value each task comes back as."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from servecap.progress import Progress, ProgressFn

T = TypeVar("T")
R = TypeVar("R")

WORKER_DIED = "worker died"


@dataclass(frozen=True, slots=True)
class TaskOutcome(Generic[R]):
    """The outcome of item ``index``: its ``value``, or an ``error`` line (exception type and
    message, or ``"worker died"``); ``attempts`` counts the runs it took."""

    index: int
    value: R | None = None
    error: str | None = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(Protocol):
    """Applies a picklable top-level function to items, in parallel where it can."""

    name: str

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, progress: ProgressFn | None = None
    ) -> list[TaskOutcome[R]]:
        """One outcome per item, in the items' order; never raises for a failing item."""
        ...

    def close(self) -> None:
        """Release workers (idempotent)."""
        ...


def describe(exc: BaseException) -> str:
    """One line for a task's exception: ``TypeName: message``."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def report(progress: ProgressFn | None, done: int, total: int, executor: str) -> None:
    if progress is not None:
        progress(Progress(stage="sweep", done=done, total=total, unit="tasks", message=executor))
