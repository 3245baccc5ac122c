"""``servecap validate``: predicted vs measured on the corpus of published measurements."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, get_args

import click

from servecap.cli.options import OUT_PATH, calibration_option, json_option

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo


def _field(name: str) -> FieldInfo:
    """The request model's field: its default and help are the option's (defaults live once, in app/)."""
    from servecap.app.validate_request import ValidateRequest

    return ValidateRequest.model_fields[name]


def _choices(name: str) -> list[str]:
    return [str(c) for c in get_args(_field(name).annotation)]


@click.command("validate")
@click.option("--source", type=click.STRING, default=_field("source").default, help=_field("source").description)
@click.option(
    "--split", type=click.Choice(_choices("split")), default=_field("split").default, help=_field("split").description
)
@click.option("--html", "html_path", type=OUT_PATH, default=None, help="Also write a self-contained HTML report here.")
@click.option(
    "--step-model",
    type=click.Choice(_choices("step_model")),
    default=_field("step_model").default,
    show_default=True,
    help=_field("step_model").description,
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
    from servecap.app.validate import validate_request
    from servecap.app.validate_request import ValidateRequest
    from servecap.report.validate_html import render_html

    req = ValidateRequest.model_validate(
        {"source": source, "split": split, "step_model": step_model, "calibration": calibration}
    )
    resp = validate_request(req)
    if html_path is not None:
        from servecap.outputs import write_text

        write_text(html_path, render_html(resp), "--html")
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
    groups += [(f"vendor {v}", t2) for v, t2 in resp.by_vendor.items()]
    groups += [(f"class {k}", t2) for k, t2 in resp.by_model_class.items()]
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
