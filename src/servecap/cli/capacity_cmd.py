"""``servecap capacity``: how many users (or requests/s) one replica serves within the SLOs,
found by simulation, next to the planner's closed-form estimate, with a load-latency table."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from servecap.cli.options import (
    DeploymentFlags,
    StreamFlags,
    calibration_option,
    deployment_options,
    json_option,
    slo_options,
)
from servecap.cli.simulate_cmd import (
    html_option,
    no_prefix_caching_option,
    policy_option,
    stream_options,
    think_time_option,
    workload_option,
)


@click.command("capacity")
@deployment_options
@calibration_option
@workload_option
@click.option("--users/--rate", "users", default=True,
              help="Search users (closed loop, default) or request rate (open loop).")
@think_time_option
@stream_options
@slo_options(2000.0, 100.0, "p99 target")
@no_prefix_caching_option
@policy_option
@html_option
@json_option
def capacity_command(
    deployment: DeploymentFlags,
    calibration: Path | None,
    workload: Path | None,
    users: bool,
    think_time_s: float | None,
    stream: StreamFlags,
    duration_s: float | None,
    num_requests: int | None,
    seed: int,
    ttft_slo_ms: float,
    tpot_slo_ms: float,
    no_prefix_caching: bool,
    policy: str,
    html: Path | None,
    as_json: bool,
) -> None:
    """The largest number of chat users (closed loop, with think time) — or request rate with
    --rate — whose simulated p99 TTFT and TPOT meet the SLOs; the planner's estimate beside
    it; and a load-latency table showing where queueing takes over."""
    from rich.console import Console
    from rich.table import Table

    from servecap.cli.inputs import slo_from_ms
    from servecap.cli.simulate_cmd import _ms, build, write_html
    from servecap.errors import ServecapError
    from servecap.sim.capacity import find_capacity

    slo = slo_from_ms(ttft_slo_ms, tpot_slo_ms)
    if slo.ttft_s is None or slo.tpot_s is None:
        raise ServecapError("ttft_slo_ms" if slo.ttft_s is None else "tpot_slo_ms", None,
                            "capacity searches against both SLOs; give both")
    if workload is None and users and duration_s is None and num_requests is None:
        duration_s = 600.0
    built = build(
        deployment=deployment,
        calibration=calibration,
        workload=workload,
        rate=None if workload is not None or users else 1.0,
        users=None if workload is not None or not users else 1,
        think_time_s=think_time_s,
        stream=stream,
        duration_s=duration_s,
        num_requests=num_requests,
        slo=slo,
        no_prefix_caching=no_prefix_caching,
        max_waiting=None,
        policy=policy,
        default_num_requests=2000,
    )
    console = Console(stderr=True)
    closed = built.workload.users is not None
    unit = "users" if closed else "req/s"
    if as_json:
        result = find_capacity(built.setup, built.plan, built.workload, slo, seed=seed)
    else:
        with console.status("searching the largest load within the SLOs...") as status:
            result = find_capacity(
                built.setup,
                built.plan,
                built.workload,
                slo,
                seed=seed,
                progress=lambda msg: status.update(f"searching: {msg}"),
            )
    table = [asdict(p) for p in result.table]
    if html is not None:
        write_html(
            html,
            f"servecap capacity: {built.plan.deployment.model.id} on {built.plan.deployment.gpu.id}",
            None,
            table,
            built.notes,
            load_unit=unit,
        )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "closed_loop": closed,
                    "unit": unit,
                    "max_users" if closed else "max_rate_req_s": result.max_load,
                    "planner_users" if closed else "planner_rate_req_s": result.planner_load,
                    "slo": {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "percentile": 99},
                    "table": table,
                    "evaluations": result.evaluations,
                    "model": built.plan.deployment.model.id,
                    "gpu": built.plan.deployment.gpu.id,
                    "seed": seed,
                    "notes": built.notes,
                }
            )
        )
        return
    out = Console()
    dep = built.plan.deployment

    def fmt(x: float) -> str:
        return f"{x:,.0f}" if closed else f"{x:,.2f}"

    out.print(
        f"[bold]{dep.model.id}[/] on {dep.num_gpus}x {dep.gpu.id}, SLOs: p99 TTFT <= {ttft_slo_ms:g} ms, "
        f"p99 TPOT <= {tpot_slo_ms:g} ms"
    )
    out.print(
        f"simulated capacity: [bold]{fmt(result.max_load)} {unit}[/]   "
        f"planner (closed form, no queueing): {fmt(result.planner_load)} {unit}"
    )
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
    for p in result.table:
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
    out.print(t)
    for note in built.notes:
        out.print(f"[dim]note: {note}[/]")
    if html is not None:
        out.print(f"wrote {html}")
