"""``servecap capacity``: how many users (or requests/s) one replica serves within the SLOs,
found by simulation, next to the planner's closed-form estimate, with a load-latency table."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from servecap.app.simulate_request import CapacityRequest
from servecap.cli.fields import field_option
from servecap.cli.numbers import FINITE
from servecap.cli.options import (
    DeploymentFlags,
    StreamFlags,
    calibration_option,
    deployment_options,
    json_option,
    think_time_option,
    turns_option,
)
from servecap.cli.simulate_cmd import (
    html_option,
    no_prefix_caching_option,
    policy_option,
    request_slo_options,
    stream_options,
    workload_option,
)

if TYPE_CHECKING:
    from servecap.specs.perf import Slo

SEARCH = 0.0  # --users / --rate given without a value: search on that axis, no target


@click.command("capacity")
@deployment_options
@calibration_option
@workload_option
@click.option(
    "--users",
    "-u",
    "users",
    type=FINITE,
    default=None,
    is_flag=False,
    flag_value=SEARCH,
    help="Closed loop (the default): search the largest number of chat users; with a value N, "
    "also the replicas N users need.",
)
@click.option(
    "--rate",
    "-r",
    "rate",
    type=FINITE,
    default=None,
    is_flag=False,
    flag_value=SEARCH,
    help="Open loop: search the largest request rate; with a value R (req/s), also the replicas it needs.",
)
@think_time_option
@turns_option
@stream_options
@request_slo_options(CapacityRequest)
@no_prefix_caching_option
@policy_option
@field_option(CapacityRequest, "step_model", "--step-model", type=click.Choice(["auto", "roofline", "operations"]))
@html_option
@json_option
def capacity_command(
    deployment: DeploymentFlags,
    stream: StreamFlags,
    users: float | None,
    rate: float | None,
    html: Path | None,
    as_json: bool,
    **settings: object,
) -> None:
    """The largest number of chat users (closed loop, with think time) — or request rate with
    --rate — whose simulated p99 TTFT and TPOT meet the SLOs; the planner's estimate beside
    it; and a load-latency table showing where queueing takes over."""
    from rich.table import Table

    from servecap.app.capacity import capacity_from_request
    from servecap.app.request_fields import validated, values_of
    from servecap.cli.console import make_console, print_table, progress_reporter
    from servecap.cli.simulate_cmd import _context, _ms, write_html
    from servecap.errors import ServecapError

    if users is not None and rate is not None:
        raise ServecapError("rate", rate, "give --users (closed loop) or --rate (open loop), not both")
    for name, value in (("users", users), ("rate", rate)):
        if value is not None and value < 0:
            raise ServecapError(name, value, "must be a positive target (or the flag alone to search)")
    closed = rate is None
    values = {**values_of(deployment), **values_of(stream), **settings}
    request = validated(
        CapacityRequest, {**values, "closed_loop": closed, "target": (users if closed else rate) or None}
    )
    with progress_reporter(make_console(stderr=True)) as progress:
        response, built, slo = capacity_from_request(request, progress=progress)
    dep = built.plan.deployment
    unit = response.unit
    closed = response.closed_loop

    def fmt(x: float) -> str:
        return f"{x:,.0f}" if closed else f"{x:,.2f}"

    iv = response.interval
    missed = response.max_load_bracket[1]
    if iv is not None:  # the corrected answer, inside its interval (validation/interval.py); the simulation's beside it
        point = float(int(iv.estimate)) if closed else iv.estimate
        answer = (
            f"capacity: {fmt(point)} {unit} per replica (80% interval {fmt(iv.low)}–{fmt(iv.high)}); "
            f"simulated on servecap's model, {fmt(response.max_load)} met the p99 SLOs"
        )
    else:
        answer = f"simulated capacity: {fmt(response.max_load)} {unit} per replica within the p99 SLOs"
    if missed is not None:
        answer += f" ({fmt(missed)} missed them)"
    if response.target is not None:
        answer += (
            f"; {fmt(response.target)} {unit} need {response.replicas_for_target} replicas"
            if response.replicas_for_target is not None
            else "; no load meets the SLOs"
        )
    if html is not None:
        write_html(
            html,
            f"servecap capacity: {dep.model.id} on {dep.num_gpus}x {dep.gpu.id}",
            None,
            [asdict(p) for p in response.table],
            built.notes,
            load_unit=unit,
            context=_context(built, answer) | ({"80% interval": iv.note} if iv is not None else {}),
            slo=slo,
            capacity=response.max_load,
        )
    if as_json:
        click.echo(response.model_dump_json())
        return
    out = make_console()
    out.print(f"[bold]{dep.model.id}[/] on {dep.num_gpus}x {dep.gpu.id}, SLOs: {_slo_text(slo)}")
    out.print(f"[bold]{answer}[/]")
    out.print(f"load model: {response.load_model}")
    side = Table(title="assumptions side by side", title_justify="left")
    side.add_column("")
    if response.plan_load is not None:
        side.add_column("servecap plan")
    side.add_column("closed form (this workload)")
    side.add_column("simulated")
    for row in response.assumptions:
        cells = [row.name] + ([row.plan or "-"] if response.plan_load is not None else [])
        side.add_row(*cells, row.closed_form, row.simulated)
    print_table(out, side)
    out.print(response.why)
    if iv is not None and not iv.close:
        out.print(f"[dim]note: {iv.note}[/]")
    t = Table(title="load vs latency", title_justify="left")
    for col in (
        f"load ({unit})",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "TPOT p50 ms",
        "TPOT p99 ms",
        "E2E p99 ms",
        "queue depth",
        "batch",
        "SLOs",
    ):
        t.add_column(col, justify="right")
    for p in response.table:
        t.add_row(
            fmt(p.load),
            _ms(p.ttft_p50_s),
            _ms(p.ttft_p99_s),
            _ms(p.tpot_p50_s),
            _ms(p.tpot_p99_s),
            _ms(p.e2e_p99_s),
            f"{p.mean_queue_depth:,.1f}",
            f"{p.mean_batch_size:,.1f}",
            "[green]met[/]" if p.meets_slo else "[red]missed[/]",
        )
    print_table(out, t)
    for note in built.notes:
        out.print(f"[dim]note: {note}[/]")
    if html is not None:
        out.print(f"wrote {html}")


def _slo_text(slo: Slo) -> str:
    """The SLOs the run checked (the flags', or the default interactive ones when none given)."""
    parts = []
    if slo.ttft_s is not None:
        parts.append(f"p99 TTFT <= {slo.ttft_s * 1e3:g} ms")
    if slo.tpot_s is not None:
        parts.append(f"p99 TPOT <= {slo.tpot_s * 1e3:g} ms")
    return ", ".join(parts) or "none"
