"""``servecap validate``: predicted vs measured on the corpus of published measurements."""

from __future__ import annotations

from pathlib import Path

import click

from servecap.cli.options import PATH, calibration_option, json_option


@click.command("validate")
@click.option(
    "--source", type=click.STRING, default=None, help="Only this source's rows (a corpus file's source name)."
)
@click.option(
    "--split",
    type=click.Choice(["train", "test", "all"]),
    default="all",
    help="Rows of the fixed train/test split (hash of the row id), or all.",
)
@click.option("--html", "html_path", type=PATH, default=None, help="Also write a self-contained HTML report here.")
@click.option(
    "--step-model",
    type=click.Choice(["roofline", "aiconfigurator", "auto"]),
    default="roofline",
    show_default=True,
    help="Step times: the roofline; AIConfigurator's measured kernels (the rows its cache covers, "
    "validation/aic_steps.json); or auto (AIConfigurator where covered, the roofline elsewhere).",
)
@calibration_option
@json_option
def validate_command(
    source: str | None,
    split: str,
    html_path: Path | None,
    step_model: str,
    calibration: Path | None,
    as_json: bool,
) -> None:
    """Plan and simulate every row of the public measurement corpus and print predicted vs
    measured with the signed error, and the MAPE per metric, per GPU family and per engine."""
    from servecap.app.validate import validate
    from servecap.report.validate_html import render_html

    resp = validate(source=source, split=split, calibration=calibration, step_model=step_model)
    if html_path is not None:
        html_path.write_text(render_html(resp), encoding="utf-8")
    if as_json:
        click.echo(resp.model_dump_json(indent=2))
        return
    from rich.table import Table

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:+.1%}"

    def si(metric: str, v: float | None) -> str:
        if v is None:
            return "-"
        return f"{v * 1e3:,.1f} ms" if metric.split(".")[0] in ("ttft", "tpot", "itl", "e2e") else f"{v:,.2f}"

    from servecap.cli.console import make_console

    con = make_console()
    t = Table(
        title=f"{resp.rows} rows from {len(resp.sources)} sources: predicted vs measured "
        f"(step times: {resp.step_model})"
    )
    for col in ("row", "split", "metric", "measured", "predicted", "error"):
        t.add_column(col, justify="left" if col in ("row", "split", "metric") else "right")
    for v in resp.values:
        t.add_row(v.row, v.split, v.metric, si(v.metric, v.measured), si(v.metric, v.predicted), pct(v.error))
    con.print(t)
    s = Table(title="error per metric (MAPE = mean |error|)")
    for col in ("group", "metric", "values", "MAPE", "median |error|", "median error"):
        s.add_column(col, justify="left" if col in ("group", "metric") else "right")
    groups = [("all", resp.by_metric)] + [(f"split {k}", t2) for k, t2 in resp.by_split.items()]
    groups += [(g, t2) for g, t2 in resp.by_gpu.items()]
    groups += [(f"engine {e}", t2) for e, t2 in resp.by_engine.items()]
    for name, table in groups:
        for metric, st in table.items():
            s.add_row(
                name,
                metric,
                str(st.count),
                pct(st.mape).lstrip("+"),
                pct(st.median_abs_error).lstrip("+"),
                pct(st.median_signed_error),
            )
    con.print(s)
