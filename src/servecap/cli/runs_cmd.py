"""``servecap runs``: list, show, export and delete stored runs (measured and simulated)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from servecap.app.sketch_report import SketchReport

from servecap.cli.main import LazyGroup
from servecap.cli.options import OUT_PATH, db_option, json_option

run_argument = click.argument("run", type=click.STRING)


def _limit_default() -> int:
    """The listing's default length, from the request model (defaults live once, in app/)."""
    from servecap.app.runs import ListRunsRequest

    default = ListRunsRequest.model_fields["limit"].default
    assert isinstance(default, int)
    return default


_LIMIT_DEFAULT = _limit_default()


@click.group(
    "runs",
    cls=LazyGroup,
    invoke_without_command=True,
    no_args_is_help=False,
    help="Stored bench runs: list (default), show, export, delete.",
)
@db_option
@click.option("--limit", type=click.IntRange(min=1), default=_LIMIT_DEFAULT)
@click.option("--kind", type=click.Choice(["measured", "simulated"]), default=None, help="Only runs of this kind.")
@json_option
@click.pass_context
def runs(ctx: click.Context, db: Path | None, limit: int, kind: str | None, as_json: bool) -> None:
    """List stored runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from servecap.app.runs import ListRunsRequest, list_runs_checked

    path, rows, damaged = list_runs_checked(ListRunsRequest(db=db, limit=limit, kind=kind))  # type: ignore[arg-type]
    for note in damaged:
        click.echo(f"warning: {note}", err=True)
    if as_json:
        click.echo(rows.model_dump_json())
        return
    from rich.console import Console
    from rich.table import Table

    headers = (
        "run",
        "kind",
        "created",
        "model",
        "mode",
        "requests",
        "errors",
        "req/s",
        "ttft p50 ms",
        "tpot p50 ms",
        "label",
    )
    cells = []
    for r in rows.root:
        s = r.summary

        def ms(name: str, s: dict[str, object] = s) -> str:
            v = s.get(name)
            p50 = v.get("p50") if isinstance(v, dict) else None
            return "-" if p50 is None else f"{float(p50) * 1e3:.1f}"

        mode = r.mode + (" (interrupted)" if r.interrupted else "")
        tput = s.get("throughput_req_s")
        cells.append(
            (
                r.run_id,
                r.kind,
                r.created_at,
                r.model,
                mode,
                f"{r.num_requests:,}",
                f"{r.num_errors:,}",
                f"{float(tput) if isinstance(tput, int | float) else 0.0:.2f}",
                ms("ttft_s"),
                ms("tpot_s"),
                r.label,
            )
        )
    console = Console(soft_wrap=True)
    if not console.is_terminal:  # piped: plain aligned columns, every cell whole
        click.echo(f"runs in {path}")
        click.echo(plain_table(headers, cells))
        return
    t = Table(title=f"runs in {path}", title_justify="left")
    for col in headers:  # a narrow terminal folds cells onto more lines; it never cuts them
        t.add_column(col, overflow="fold", justify="right" if col in _NUMERIC else "left")
    for row in cells:
        t.add_row(*row)
    console.print(t)


_NUMERIC = frozenset({"requests", "errors", "req/s", "ttft p50 ms", "tpot p50 ms"})


def plain_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """Columns padded to their widest cell, two spaces apart (numbers right-aligned): for pipes
    and files, where nothing may be cut to fit a width."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: tuple[str, ...]) -> str:
        out = [c.rjust(w) if h in _NUMERIC else c.ljust(w) for c, w, h in zip(cells, widths, headers, strict=True)]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


@runs.command("show")
@run_argument
@click.option(
    "--sketches",
    is_flag=True,
    help="A streaming run's stored sketches as percentile tables per pool, tenant, class and window "
    "(the raw DDSketch buckets with --json).",
)
@db_option
@click.option("--json", "as_json", is_flag=True, default=False, help="Print JSON (the output always is).")
def show(run: str, sketches: bool, db: Path | None, as_json: bool) -> None:
    """One run's settings, summary and self-checks as JSON (or, with --sketches, a streaming
    run's mergeable accumulators).

    RUN is a run id, unique prefix, or 'last'."""
    if sketches:
        import json

        from servecap.errors import ServecapError
        from servecap.results.store import RunStore

        stored = RunStore(db).get_sketches(run)
        if stored is None:
            raise ServecapError("run", run, "was stored with its records, not sketches (runs export shows them)")
        if as_json:  # the raw accumulators (bucket counts): for machines
            click.echo(json.dumps(stored, indent=2))
            return
        from servecap.app.sketch_report import sketch_report

        _render_sketches(sketch_report(stored))
        return
    from servecap.app.runs import show_run

    click.echo(show_run(run, db).model_dump_json(indent=2))


@runs.command("export")
@run_argument
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", help="Output format.")
@click.option("--output", "-o", type=OUT_PATH, default=None, help="File (default: stdout).")
@db_option
def export(run: str, fmt: str, output: Path | None, db: Path | None) -> None:
    """Export a run with every per-request record (JSON: settings + summary + requests; CSV: requests).

    RUN is a run id, unique prefix, or 'last'."""
    from servecap.app.runs import export_run

    text = export_run(run, fmt, db)
    if output is None:
        click.echo(text)
    else:
        from servecap.outputs import write_text

        write_text(output, text, "--output")


@runs.command("delete")
@run_argument
@db_option
def delete(run: str, db: Path | None) -> None:
    """Delete a run and its records.

    RUN is a run id or unique prefix."""
    from servecap.app.runs import delete_run

    click.echo(f"deleted {delete_run(run, db)}")


def _render_sketches(r: SketchReport) -> None:
    from rich.table import Table

    from servecap.cli.console import make_console, print_table

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1e3:,.0f}"

    c = make_console()
    groups = Table(title=f"percentiles from the run's sketches (each within {r.relative_accuracy:.0%} at its rank)")
    for col in (
        "group",
        "requests",
        "completed",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "TPOT p50 ms",
        "TPOT p99 ms",
        "E2E p99 ms",
    ):
        groups.add_column(col, justify="left" if col == "group" else "right")
    for g in r.groups:
        groups.add_row(
            g.name if g.axis == "run" else f"{g.axis} {g.name}",
            f"{g.requests:,}",
            f"{g.completed:,}",
            ms(g.ttft_p50_s),
            ms(g.ttft_p99_s),
            ms(g.tpot_p50_s),
            ms(g.tpot_p99_s),
            ms(g.e2e_p99_s),
        )
    print_table(c, groups)
    windows = Table(title=f"TTFT per {r.window_s:g} s window (by first-token time)")
    for col in ("window", "first tokens", "TTFT p50 ms", "TTFT p99 ms"):
        windows.add_column(col, justify="right")
    for w in r.windows:
        windows.add_row(f"{w.start_s:,.0f}-{w.end_s:,.0f} s", f"{w.first_tokens:,}", ms(w.ttft_p50_s), ms(w.ttft_p99_s))
    print_table(c, windows)
