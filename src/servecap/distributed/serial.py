"""The executor that runs every task in this process, one after another."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from servecap.distributed.executor import TaskOutcome, describe, report
from servecap.progress import ProgressFn

T = TypeVar("T")
R = TypeVar("R")


class SerialExecutor:
    name = "serial"

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, progress: ProgressFn | None = None
    ) -> list[TaskOutcome[R]]:
        out: list[TaskOutcome[R]] = []
        for i, item in enumerate(items):
            try:
                out.append(TaskOutcome(index=i, value=fn(item)))
            except Exception as exc:  # a failing task is an outcome, not a crash of the sweep
                out.append(TaskOutcome(index=i, error=describe(exc)))
            report(progress, i + 1, len(items), self.name)
        return out

    def close(self) -> None:
        return None
