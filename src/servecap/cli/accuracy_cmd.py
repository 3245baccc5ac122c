"""``servecap accuracy RUN``: measured vs predicted (the simulator on the same workload and seed)."""

from __future__ import annotations

from pathlib import Path

import click

from servecap.cli.options import calibration_option, db_option, json_option


@click.command("accuracy")
@click.argument("run", type=click.STRING)
@calibration_option
@db_option
@json_option
def accuracy(run: str, calibration: Path | None, db: Path | None, as_json: bool) -> None:
    """Measured vs predicted, per metric, with the error (prediction: `servecap simulate` of the
    run's workload, seed and deployment, optionally with a calibration).

    RUN is a run id, unique prefix, or 'last'."""
    from servecap.app.accuracy import AccuracyRequest
    from servecap.app.accuracy import accuracy as run_accuracy

    resp = run_accuracy(AccuracyRequest(run=run, db=db, calibration=calibration))
    if as_json:
        click.echo(resp.model_dump_json())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"run {resp.run_id}: measured vs predicted", title_justify="left")
    for col in ("metric", "measured", "predicted", "error"):
        t.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)

    def fmt(key: str, v: float | None) -> str:
        if v is None:
            return "-"
        if key.split(".")[0].endswith("_s") and "." in key:
            return f"{v * 1e3:.2f} ms"
        if key == "prefix_cache_hit_rate":
            return f"{v:.1%}"
        return f"{v:,.2f}"

    for r in resp.metrics:
        t.add_row(
            r.metric,
            fmt(r.metric, r.measured),
            fmt(r.metric, r.predicted),
            "-" if r.error is None else f"{r.error:+.1%}",
        )
    con = Console(soft_wrap=True)
    con.print(t)
    for n in resp.notes:
        con.print(f"note: {n}")
