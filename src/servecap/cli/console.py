"""Rich consoles and tables that never cut a number or an id.

On a terminal tables take the terminal's width and wrap text (never numbers: a right-aligned
column is as wide as its widest cell; other cells wrap between words, never inside one, rather
than end in "…"). A table that cannot fit that way (13 columns on an 80-column terminal) is
printed as one block per row, ``header: value`` pairs wrapped to the width, instead of columns
one letter wide. Piped or redirected, output is plain (no colour) and unbounded in width, so
every cell is complete.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from servecap.progress import Progress, ProgressFn

PIPED_WIDTH = 100_000


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` is a terminal (one seam: tests stand a terminal in for it)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr): the terminal's width, or no limit when piped."""
    stream = sys.stderr if stderr else sys.stdout
    if is_terminal(stream):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPED_WIDTH, no_color=True, highlight=False)


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _min_width(console: Console, column: Column) -> int:
    """A right-aligned or ``no_wrap`` column: its widest cell (a number or a flag never wraps);
    text: its longest word; either way at least the header's longest word (a header may wrap
    between words)."""
    cells = list(column.cells)
    header = max((len(w) for w in _plain(column.header).split()), default=1)
    if column.justify == "right" or column.no_wrap:
        return max([header, *(Measurement.get(console, console.options, c).maximum for c in cells)])
    words = [w for c in cells for w in _plain(c).split()]
    return max([header, *(len(w) for w in words)])


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` with no cell truncated: numbers keep their width, text wraps between
    words; a table too wide for that is printed as one block per row (module docstring)."""
    mins = [_min_width(console, c) for c in table.columns]
    # each column: its cells plus 2 of padding and 1 of border, and the closing border
    if sum(mins) + 3 * len(mins) + 1 > console.width:
        _print_blocks(console, table)
        return
    for column, width in zip(table.columns, mins, strict=True):
        column.overflow = "fold"
        column.min_width = width
    console.print(table)


def _print_blocks(console: Console, table: Table) -> None:
    """Each row as ``header: value`` pairs, wrapped between pairs to the console's width."""
    if table.title:
        console.print(Text(_plain(table.title), style="bold"))
    headers = [_plain(c.header) for c in table.columns]
    columns = [list(c.cells) for c in table.columns]
    rows = max((len(c) for c in columns), default=0)
    for i in range(rows):
        pairs = [f"{h}: {_plain(col[i])}" for h, col in zip(headers, columns, strict=True) if _plain(col[i]).strip()]
        line, out = "", []
        for p in pairs:
            if line and len(line) + 3 + len(p) > console.width:
                out.append(line)
                line = "  " + p
            else:
                line = (line + " · " + p) if line else p
        out.append(line)
        console.print(Text("\n".join(out)))


PROGRESS_INTERVAL_S = 5.0


def progress_line(event: Progress) -> str:
    """``simulate: 12,000 / 50,000 requests (24%), 600 s simulated``, with the event's message if
    any (the same fields the web's progress line shows, web/static/servecap.js)."""
    count = f"{event.done:,}" + (f" / {event.total:,}" if event.total else "") + f" {event.unit}"
    if event.fraction is not None:
        count += f" ({event.fraction:.0%})"
    if event.sim_time_s is not None:
        count += f", {event.sim_time_s:,.0f} s simulated"
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
