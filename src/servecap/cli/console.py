"""Rich consoles and tables that never cut a number or an id.

On a terminal tables take the terminal's width and wrap text (never numbers: a right-aligned
column is as wide as its widest cell; other cells fold rather than end in "…"). Piped or
redirected, output is plain (no colour) and unbounded in width, so every cell is complete.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from servecap.progress import Progress, ProgressFn

PIPED_WIDTH = 100_000


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr): the terminal's width, or no limit when piped."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPED_WIDTH, no_color=True, highlight=False)


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` with no cell truncated: numbers keep their width, text folds."""
    for column in table.columns:
        column.overflow = "fold"
        if column.justify == "right":
            cells = [Measurement.get(console, console.options, cell).maximum for cell in column.cells]
            column.min_width = max(cells, default=0)
            column.no_wrap = True
    console.print(table)


PROGRESS_INTERVAL_S = 5.0


def progress_line(event: Progress) -> str:
    """``simulate: 12,000 / 50,000 requests (24%)``, with the event's message if any."""
    count = f"{event.done:,}" + (f" / {event.total:,}" if event.total else "") + f" {event.unit}"
    if event.fraction is not None:
        count += f" ({event.fraction:.0%})"
    return f"{event.stage}: {count}" + (f" - {event.message}" if event.message else "")


@contextmanager
def progress_reporter(
    console: Console, *, interval_s: float = PROGRESS_INTERVAL_S, clock: Callable[[], float] = time.monotonic
) -> Iterator[ProgressFn]:
    """A :data:`~servecap.progress.ProgressFn` that draws a rich bar on a terminal and, when
    stderr is not one (CI, a log file), prints a plain line every ``interval_s`` seconds."""
    if console.is_terminal:
        from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        with Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[line]}"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("", total=None, line="")

            def draw(event: Progress) -> None:
                bar.update(
                    task,
                    description=event.stage,
                    completed=event.done,
                    total=event.total,
                    line=progress_line(event).split(": ", 1)[1],
                )

            yield draw
        return
    last = [clock()]

    def log(event: Progress) -> None:
        now = clock()
        if now - last[0] >= interval_s:
            last[0] = now
            console.print(progress_line(event), markup=False, highlight=False)

    yield log
