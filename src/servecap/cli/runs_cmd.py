"""``servecap runs``: list, show, export and delete stored bench runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from servecap.cli.options import JsonOpt

DbOpt = Annotated[Path | None, typer.Option("--db", help="Results database (default: under the user data dir).")]
runs_app = typer.Typer(help="Stored bench runs: list (default), show, export, delete.", no_args_is_help=False)


@runs_app.callback(invoke_without_command=True)
def runs(ctx: typer.Context, db: DbOpt = None, limit: Annotated[int, typer.Option("--limit")] = 50,
         as_json: JsonOpt = False) -> None:
    """List stored runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.console import Console
    from rich.table import Table

    from servecap.measure.store import RunStore

    store = RunStore(db)
    rows = store.list_runs(limit)
    if as_json:
        typer.echo(json.dumps([{"run_id": r.run_id, "created_at": r.created_at, "url": r.url, "model": r.model,
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


@runs_app.command("show")
def show(run: Annotated[str, typer.Argument(help="Run id, unique prefix, or 'last'.")], db: DbOpt = None) -> None:
    """One run's settings, summary and self-checks as JSON."""
    from dataclasses import asdict

    from servecap.measure.store import RunStore

    typer.echo(json.dumps(asdict(RunStore(db).get_run(run)), indent=2))


@runs_app.command("export")
def export(
    run: Annotated[str, typer.Argument(help="Run id, unique prefix, or 'last'.")],
    fmt: Annotated[str, typer.Option("--format", help="json|csv.")] = "json",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File (default: stdout).")] = None,
    db: DbOpt = None,
) -> None:
    """Export a run with every per-request record (JSON: settings + summary + requests; CSV: requests)."""
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
        typer.echo(text)
    else:
        output.write_text(text, encoding="utf-8")


@runs_app.command("delete")
def delete(run: Annotated[str, typer.Argument(help="Run id or unique prefix.")], db: DbOpt = None) -> None:
    """Delete a run and its records."""
    from servecap.measure.store import RunStore

    typer.echo(f"deleted {RunStore(db).delete_run(run)}")


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
