"""``servecap calibrate RUN...``: fit the step-time coefficients to stored bench runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import click

from servecap.cli.options import OUT_PATH, db_option, json_option

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo


def _field(name: str) -> FieldInfo:
    """The request model's field: its default is the option's (defaults live once, in app/)."""
    from servecap.app.calibrate import CalibrateRequest

    return CalibrateRequest.model_fields[name]


@click.command("calibrate")
@click.argument("runs", type=click.STRING, nargs=-1, required=True)
@click.option("--output", "-o", type=OUT_PATH, default=str(_field("output").default), help="Calibration file to write.")
@click.option(
    "--source",
    type=click.Choice([str(c) for c in get_args(_field("source").annotation)]),
    default=_field("source").default,
    help=_field("source").description,
)
@click.option(
    "--no-fit-prefill", is_flag=True, default=not _field("fit_prefill").default, help="Keep prefill_s_per_token at 0."
)
@db_option
@json_option
def calibrate(
    runs: tuple[str, ...],
    output: Path,
    source: Literal["auto", "client", "server"],
    no_fit_prefill: bool,
    db: Path | None,
    as_json: bool,
) -> None:
    """Fit bandwidth/compute efficiency, step overhead and per-prompt-token cost to the step
    times seen in stored runs of one deployment; write a file for --calibration.

    RUNS are run ids (or unique prefixes, or 'last') of one deployment."""
    from servecap.app.calibrate import CalibrateRequest
    from servecap.app.calibrate import calibrate as run_calibrate

    resp = run_calibrate(
        CalibrateRequest(
            runs=list(runs),
            output=output,
            source=source,
            fit_prefill=not no_fit_prefill,
            db=db,
        )
    )
    if as_json:
        click.echo(resp.model_dump_json())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(
        title=f"calibration of {resp.model} on {resp.num_gpus}x {resp.gpu} from {len(resp.steps)} run(s), "
        f"{resp.source} clock",
        title_justify="left",
    )
    t.add_column("coefficient", no_wrap=True)
    t.add_column("fitted", justify="right", no_wrap=True)
    t.add_column("default", justify="right", no_wrap=True)
    for name, default in resp.defaults.items():
        mark = " (not determined)" if name in resp.not_determined else ""
        t.add_row(name, f"{resp.coefficients[name]:.6g}{mark}", f"{default:.6g}")
    con = Console(soft_wrap=True)
    con.print(t)
    con.print(
        f"{resp.num_samples} steps ({resp.memory_bound} memory-bound, {resp.compute_bound} compute-bound), "
        f"rmse {resp.rmse_s * 1e3:.3f} ms, R² {resp.r2:.4f}, {resp.dropped_outliers} outliers dropped"
    )
    for s in resp.steps:
        hit = "unknown" if s.prefix_cache_hit_rate is None else f"{s.prefix_cache_hit_rate:.1%}"
        con.print(
            f"run {s.run_id}: {s.usable} of {s.steps} steps usable, prefix-cache hit rate {hit} "
            "(each prefill priced at its uncached prompt)"
        )
    con.print(f"wrote {resp.output}")
