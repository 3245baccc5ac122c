"""``servecap runs``: list, show, export and delete stored bench runs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from servecap.cli.main import LazyGroup
from servecap.cli.options import PATH, db_option, json_option

run_argument = click.argument("run", type=click.STRING)


@click.group("runs", cls=LazyGroup, invoke_without_command=True, no_args_is_help=False,
             help="Stored bench runs: list (default), show, export, delete.")
@db_option
@click.option("--limit", type=click.INT, default=50)
@json_option
@click.pass_context
def runs(ctx: click.Context, db: Path | None, limit: int, as_json: bool) -> None:
    """List stored runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.console import Console
    from rich.table import Table

    from servecap.measure.store import RunStore

    store = RunStore(db)
    rows = store.list_runs(limit)
    if as_json:
        click.echo(json.dumps([{"run_id": r.run_id, "created_at": r.created_at, "url": r.url, "model": r.model,
                                "mode": r.mode, "label": r.label, "sweep_id": r.sweep_id,
                                "num_requests": r.num_requests, "num_errors": r.num_errors,
                                "summary": r.summary} for r in rows]))
        return
    t = Table(title=f"runs in {store.path}")
    for col in ("run", "created", "model", "mode", "requests", "errors", "req/s", "ttft p50 ms", "tpot p50 ms", "label"):
        t.add_column(col)
    for r in rows:
        s = r.summary

        def ms(name: str, s: dict[str, object] = s) -> str:
            v = s.get(name)
            p50 = v.get("p50") if isinstance(v, dict) else None
            return "-" if p50 is None else f"{float(p50) * 1e3:.1f}"

        t.add_row(r.run_id, r.created_at, r.model, r.mode, str(r.num_requests), str(r.num_errors),
                  f"{float(s.get('throughput_req_s') or 0.0):.2f}", ms("ttft_s"), ms("tpot_s"), r.label)
    Console().print(t)


@runs.command("show")
@run_argument
@db_option
def show(run: str, db: Path | None) -> None:
    """One run's settings, summary and self-checks as JSON.

    RUN is a run id, unique prefix, or 'last'."""
    from dataclasses import asdict

    from servecap.measure.store import RunStore

    click.echo(json.dumps(asdict(RunStore(db).get_run(run)), indent=2))


@runs.command("export")
@run_argument
@click.option("--format", "fmt", type=click.STRING, default="json", help="json|csv.")
@click.option("--output", "-o", type=PATH, default=None, help="File (default: stdout).")
@db_option
def export(run: str, fmt: str, output: Path | None, db: Path | None) -> None:
    """Export a run with every per-request record (JSON: settings + summary + requests; CSV: requests).

    RUN is a run id, unique prefix, or 'last'."""
    from servecap.errors import ServecapError
    from servecap.measure.store import RunStore, export_csv, export_json

    store = RunStore(db)
    row = store.get_run(run)
    traces = store.get_traces(row.run_id)
    if fmt == "json":
        text = export_json(row, traces)
    elif fmt == "csv":
        text = export_csv(traces)
    else:
        raise ServecapError("format", fmt, "must be json or csv")
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
    from servecap.measure.store import RunStore

    click.echo(f"deleted {RunStore(db).delete_run(run)}")
