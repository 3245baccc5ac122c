"""Rich consoles and tables that never cut a number or an id.

On a terminal tables take the terminal's width and wrap text (never numbers: a right-aligned
column is as wide as its widest cell; other cells fold rather than end in "…"). Piped or
redirected, output is plain (no colour) and unbounded in width, so every cell is complete.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

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
