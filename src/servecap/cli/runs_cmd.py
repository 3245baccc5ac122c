"""``servecap runs``: list, show, export and delete stored runs (measured and simulated)."""

from __future__ import annotations

from pathlib import Path

import click

from servecap.cli.main import LazyGroup
from servecap.cli.options import PATH, db_option, json_option

run_argument = click.argument("run", type=click.STRING)


@click.group("runs", cls=LazyGroup, invoke_without_command=True, no_args_is_help=False,
             help="Stored bench runs: list (default), show, export, delete.")
@db_option
@click.option("--limit", type=click.IntRange(min=1), default=50)
@json_option
@click.pass_context
def runs(ctx: click.Context, db: Path | None, limit: int, as_json: bool) -> None:
    """List stored runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from servecap.app.runs import ListRunsRequest, list_runs

    path, rows = list_runs(ListRunsRequest(db=db, limit=limit))
    if as_json:
        click.echo(rows.model_dump_json())
        return
    from rich.console import Console
    from rich.table import Table

    # every cell whole (run ids, numbers): columns never truncate; a narrow or piped output wraps
    t = Table(title=f"runs in {path}", title_justify="left")
    for col in ("run", "kind", "created", "model", "mode", "requests", "errors", "req/s", "ttft p50 ms",
                "tpot p50 ms", "label"):
        t.add_column(col, no_wrap=col != "label", overflow="fold")
    for r in rows.root:
        s = r.summary

        def ms(name: str, s: dict[str, object] = s) -> str:
            v = s.get(name)
            p50 = v.get("p50") if isinstance(v, dict) else None
            return "-" if p50 is None else f"{float(p50) * 1e3:.1f}"

        mode = r.mode + (" (interrupted)" if r.interrupted else "")
        t.add_row(r.run_id, r.kind, r.created_at, r.model, mode, f"{r.num_requests:,}", f"{r.num_errors:,}",
                  f"{float(s.get('throughput_req_s') or 0.0):.2f}", ms("ttft_s"), ms("tpot_s"), r.label)
    Console(soft_wrap=True).print(t)


@runs.command("show")
@run_argument
@db_option
def show(run: str, db: Path | None) -> None:
    """One run's settings, summary and self-checks as JSON.

    RUN is a run id, unique prefix, or 'last'."""
    from servecap.app.runs import show_run

    click.echo(show_run(run, db).model_dump_json(indent=2))


@runs.command("export")
@run_argument
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", help="Output format.")
@click.option("--output", "-o", type=PATH, default=None, help="File (default: stdout).")
@db_option
def export(run: str, fmt: str, output: Path | None, db: Path | None) -> None:
    """Export a run with every per-request record (JSON: settings + summary + requests; CSV: requests).

    RUN is a run id, unique prefix, or 'last'."""
    from servecap.app.runs import export_run

    text = export_run(run, fmt, db)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text, encoding="utf-8")


@runs.command("delete")
@run_argument
@db_option
def delete(run: str, db: Path | None) -> None:
    """Delete a run and its records.

    RUN is a run id or unique prefix."""
    from servecap.app.runs import delete_run

    click.echo(f"deleted {delete_run(run, db)}")
