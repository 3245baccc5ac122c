"""``servecap sweep SWEEP.yaml``: fleet simulations over a grid of settings, on one machine or Ray."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import get_args

import click

from servecap.app.fleet_sweep_run import SweepExecutor, SweepRequest
from servecap.cli.options import OUT_PATH, PATH, db_option, json_option


@click.command("sweep")
@click.argument("sweep_file", type=PATH)
@click.option(
    "--executor",
    type=click.Choice(list(get_args(SweepExecutor))),
    default=SweepRequest.model_fields["executor"].default,
    help="Where the points run: in this process, a local process pool, or Ray (pip install 'servecap[distributed]').",
)
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Pool size (or a local Ray's CPUs).")
@click.option("--ray-address", default=None, help="Join a Ray cluster ('auto' or 'ray://host:port').")
@click.option("--csv", "csv_path", type=OUT_PATH, default=None, help="Also write one row per point here.")
@click.option(
    "--html", "html_path", type=OUT_PATH, default=None, help="Also write an HTML summary (table and chart) here."
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=None,
    help="Run each point on this many seeds (the file's seed, +1, ...) and merge their sketches (default: the file's seeds, 1).",
)
@click.option(
    "--sketch",
    "sketch",
    is_flag=True,
    default=False,
    help="Stream every point into mergeable sketches (bounded memory); the sweep's merged summary then follows the table.",
)
@click.option("--no-store", is_flag=True, default=False, help="Do not store the runs in the results database.")
@db_option
@json_option
def sweep_command(
    sweep_file: Path,
    executor: SweepExecutor,
    workers: int | None,
    ray_address: str | None,
    csv_path: Path | None,
    html_path: Path | None,
    seeds: int | None,
    sketch: bool,
    no_store: bool,
    db: Path | None,
    as_json: bool,
) -> None:
    """Run `fleet simulate` at every point of a sweep file's grid on serial, process-pool or Ray
    workers; store each run and print one row per point.

    With several seeds each point's
    seeds are merged through their sketches; a streamed sweep also prints every point merged."""
    from servecap.app.fleet_sweep_run import load_request_file, run_sweep_request, sweep_response
    from servecap.cli.console import make_console, progress_reporter
    from servecap.errors import ServecapError
    from servecap.outputs import write_text

    request = SweepRequest(
        sweep_file=sweep_file,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        seeds=seeds,
        sketch=sketch,
    )
    sf = load_request_file(request)
    if not no_store:  # a store the runs could not be saved into is refused before they run
        from servecap.results.store import RunStore

        RunStore(db).check_writable()
    err_console = make_console(stderr=True)
    with progress_reporter(err_console) as report:
        run = run_sweep_request(request, sf, report)
    store_error: ServecapError | None = None
    if not no_store:
        try:
            _store(run, db, sf.label or sweep_file.stem, str(sweep_file))
        except ServecapError as err:  # the disk filled during the sweep: the table still prints
            store_error = err
    if csv_path is not None:
        write_text(csv_path, _csv(run), "--csv")
    if html_path is not None:
        from servecap.report.sweep_html import sweep_html

        write_text(html_path, sweep_html(f"servecap sweep: {sf.label or sweep_file.stem}", run), "--html")
    if as_json:
        click.echo(sweep_response(run).to_json())
    else:
        _render(run)
    if store_error is not None:
        raise store_error
    if run.errors:
        for i, e in sorted(run.errors.items()):
            err_console.print(f"error: point {i}: {e}", markup=False, highlight=False)
        raise SystemExit(1)


def _store(run: object, db: Path | None, label: str, source: str) -> None:
    from servecap.app.fleet_sweep import SweepRun
    from servecap.results.store import RunStore, new_run_id

    assert isinstance(run, SweepRun)
    store = RunStore(db)
    sweep_id = new_run_id()
    for p, r in zip(run.points, run.results, strict=True):
        if r is None:
            continue
        store.save_simulated(
            run_id=new_run_id(),
            model=r.model,
            mode="fleet-sweep",
            settings={"sweep": source, "point": p.index, "values": p.values, "seed": p.seed, "seeds": list(r.seeds)},
            records=r.records,
            summary=r.summary,
            label=f"{label} #{p.index}",
            sweep_id=sweep_id,
            sketches=r.sketches,  # a streamed point (its seeds merged): no records, its sketches
        )


def _csv(run: object) -> str:
    from servecap.app.fleet_sweep import SweepRun

    assert isinstance(run, SweepRun)
    axes = list(run.points[0].values) if run.points else []
    cols = [
        "throughput_req_s",
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p99_s",
        "slo_attainment",
        "goodput_req_s",
        "cost_usd",
        "usd_per_hour",
        "usd_per_million_tokens",
    ]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["index", *axes, *cols, "error"])
    for p, r in zip(run.points, run.results, strict=True):
        w.writerow(
            [
                p.index,
                *(p.values[a] for a in axes),
                *(("" if r is None or r.row.get(c) is None else r.row.get(c)) for c in cols),
                run.errors.get(p.index, ""),
            ]
        )
    return buf.getvalue()


def _render(run: object) -> None:
    from rich.table import Table

    from servecap.app.fleet_sweep import SweepRun, merge_points
    from servecap.cli.console import make_console, print_table

    assert isinstance(run, SweepRun)
    axes = list(run.points[0].values) if run.points else []
    n_seeds = len(run.points[0].all_seeds) if run.points else 1
    seeds = f", {n_seeds} seeds each, merged" if n_seeds > 1 else ""
    t = Table(title=f"sweep: {len(run.points)} points ({run.executor}{seeds})", title_justify="left")
    # cost per hour and per million tokens: comparable across points of different run lengths
    for c in ("#", *axes, "req/s", "TTFT p99 (ms)", "TPOT p99 (ms)", "SLO att.", "$/hour", "$/M tokens"):
        t.add_column(c, justify="right")

    def ms(v: object) -> str:
        return "-" if v is None else f"{float(v) * 1e3:,.1f}"  # type: ignore[arg-type]

    for p, r in zip(run.points, run.results, strict=True):
        vals = [str(p.values[a]) for a in axes]
        if r is None:
            t.add_row(str(p.index), *vals, "failed", "", "", "", "", "")
            continue
        att = r.row["slo_attainment"]
        t.add_row(
            str(p.index),
            *vals,
            f"{r.row['throughput_req_s']:,.2f}",
            ms(r.row["ttft_p99_s"]),
            ms(r.row["tpot_p99_s"]),
            "-" if att is None else f"{att:.1%}",
            "-" if r.row.get("usd_per_hour") is None else f"{r.row['usd_per_hour']:,.2f}",
            "-" if r.row.get("usd_per_million_tokens") is None else f"{r.row['usd_per_million_tokens']:,.3f}",
        )
    console = make_console()
    print_table(console, t)
    m = merge_points(run)
    if m is None:
        return
    lines = [("all points", m.summary), *((f"pool {k}", v) for k, v in m.by_pool.items())]
    for name, s in lines:
        console.print(
            f"merged, {name} ({m.points} points, {s.num_requests:,} requests): TTFT p50 {ms(s.ttft_s.p50)} ms, "
            f"p99 {ms(s.ttft_s.p99)} ms; TPOT p99 {ms(s.tpot_s.p99)} ms "
            f"(sketches, each within {s.relative_error or 0:.0%} of the exact value)",
            markup=False,
            highlight=False,
        )
