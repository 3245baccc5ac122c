"""``servecap simulate``: one replica under a workload, by discrete-event simulation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from servecap.cli.options import (
    PATH,
    DeploymentFlags,
    StreamFlags,
    calibration_option,
    deployment_options,
    json_option,
    request_stream_options,
    slo_options,
    stack,
)

if TYPE_CHECKING:
    from rich.console import Console

    from servecap.core.plan import Plan
    from servecap.results import RunSummary
    from servecap.sim import EngineSetup
    from servecap.sim.simulate import SimResult
    from servecap.specs import Slo
    from servecap.workload import WorkloadSpec

workload_option = click.option(
    "--workload", type=PATH, default=None, help="Workload file (YAML/JSON; see docs/workload.md)."
)
think_time_option = click.option(
    "--think-time-s", type=click.FLOAT, default=None, help="Closed loop: mean think time between turns (s, default 30)."
)
# --prompt-tokens ... --seed: request lengths, arrivals and the run's length (simulate and capacity).
stream_options = stack(
    request_stream_options,
    click.option("--duration-s", type=click.FLOAT, default=None, help="Stop arrivals at this simulated time."),
    click.option("--num-requests", type=click.INT, default=None, help="Stop after this many requests."),
    click.option("--seed", type=click.INT, default=0, help="Random seed (same seed, same run)."),
)
no_prefix_caching_option = click.option("--no-prefix-caching", is_flag=True, default=False, help="Disable prefix caching.")
policy_option = click.option("--policy", type=click.STRING, default="fcfs", help="Scheduling policy: fcfs|priority.")
html_option = click.option(
    "--html", type=PATH, default=None, help="Write a self-contained interactive HTML report here."
)

PROGRESS_MIN_REQUESTS = 20_000


@dataclass(frozen=True)
class Built:
    plan: Plan
    setup: EngineSetup
    workload: WorkloadSpec
    notes: list[str]


def build(
    *,
    deployment: DeploymentFlags,
    calibration: Path | None,
    workload: Path | None,
    rate: float | None,
    users: int | None,
    think_time_s: float | None,
    stream: StreamFlags,
    duration_s: float | None,
    num_requests: int | None,
    slo: Slo,
    no_prefix_caching: bool,
    max_waiting: int | None,
    policy: str,
    default_num_requests: int = 1000,
) -> Built:
    """Deployment, plan, engine and workload from the command line (shared with capacity)."""
    from servecap.cli.options import deployment_from_options, efficiency_from_options
    from servecap.core.plan import plan as make_plan
    from servecap.errors import ServecapError
    from servecap.sim import engine_setup_from_plan
    from servecap.specs import RequestShape
    from servecap.workload import dist_mean, load_workload, workload_from_flags

    dep, notes = deployment_from_options(deployment)
    eff, eff_note = efficiency_from_options(calibration)
    if eff_note:
        notes.append(eff_note)
    if workload is not None:
        if rate is not None or users is not None:
            raise ServecapError("workload", str(workload), "give --workload or --rate/--users, not both")
        spec = load_workload(workload)
        update: dict[str, Any] = {}
        if num_requests is not None:
            update["num_requests"] = num_requests
        if duration_s is not None:
            update["duration_s"] = duration_s
        if update:
            spec = spec.model_copy(update=update)
    else:
        if num_requests is None and duration_s is None:
            num_requests = default_num_requests
            notes.append(f"no --num-requests/--duration-s: {num_requests} requests")
        spec = workload_from_flags(
            rate=rate,
            num_requests=num_requests,
            duration_s=duration_s,
            users=users,
            think_time_s=think_time_s,
            **stream.workload_kwargs(),
        )
    if spec.prompt_tokens is not None and spec.output_tokens is not None:
        new_tokens = dist_mean(spec.prompt_tokens)
        out_tokens = dist_mean(spec.output_tokens)
        prompt_mean = new_tokens + (spec.prefix.tokens if spec.prefix else 0)
        if spec.users is not None:  # turn k carries the k - 1 earlier turns: (T - 1) / 2 on average
            turns = dist_mean(spec.users.turns)
            prompt_mean += max(0.0, turns - 1.0) / 2.0 * (new_tokens + out_tokens)
        shape = RequestShape(max(1, round(prompt_mean)), max(1, round(out_tokens)))
    else:
        shape = RequestShape()
    the_plan = make_plan(dep, request=shape, slo=slo, efficiency=eff)
    setup = engine_setup_from_plan(
        the_plan,
        enable_prefix_caching=not no_prefix_caching,
        waiting_queue_limit=max_waiting,
        scheduling_policy=policy,
    )
    notes.extend(setup.notes)
    return Built(the_plan, setup, spec, notes)


def expected_requests(spec: WorkloadSpec) -> int:
    if spec.num_requests is not None:
        return spec.num_requests
    rate = getattr(spec.arrival, "rate_per_s", None)
    if rate is not None and spec.duration_s is not None:
        return int(rate * spec.duration_s)
    return 0


def run_simulation(built: Built, *, seed: int, slo: Slo | None, show_progress: bool, console: Console) -> SimResult:
    import numpy as np

    from servecap.sim import simulate

    rng = np.random.default_rng(seed)
    total = expected_requests(built.workload)
    if not show_progress or total < PROGRESS_MIN_REQUESTS:
        return simulate(built.setup, built.workload, rng, slo=slo)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from servecap.progress import Progress as ProgressEvent

    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} requests"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("sim", total=total)

        def tick(event: ProgressEvent) -> None:
            bar.update(task, completed=event.done)

        return simulate(built.setup, built.workload, rng, slo=slo, progress=tick)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.1f}"


def render_summary(console: Console, summary: RunSummary, title: str) -> None:
    from rich.table import Table

    lat = Table(title=title, title_justify="left")
    lat.add_column("latency (ms)")
    for q in ("p50", "p90", "p95", "p99", "mean", "max"):
        lat.add_column(q, justify="right")
    for name, label in (
        ("ttft_s", "TTFT"),
        ("tpot_s", "TPOT"),
        ("itl_s", "ITL"),
        ("e2e_s", "E2E"),
        ("queue_time_s", "queue"),
    ):
        p = getattr(summary, name)
        lat.add_row(label, *(_ms(getattr(p, q)) for q in ("p50", "p90", "p95", "p99", "mean", "max")))
    console.print(lat)
    t = Table(show_header=False, title="throughput and engine", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    rows = [
        ("requests (completed / total)", f"{summary.completed:,} / {summary.num_requests:,}"),
        ("simulated time", f"{summary.duration_s:,.1f} s"),
        ("throughput", f"{summary.throughput_req_s:,.2f} req/s"),
        ("input tokens/s", f"{summary.input_tokens_per_s:,.0f}"),
        ("output tokens/s", f"{summary.output_tokens_per_s:,.0f}"),
        ("goodput (within SLOs)", "-" if summary.goodput_req_s is None else f"{summary.goodput_req_s:,.2f} req/s"),
        ("mean / max batch", f"{summary.mean_batch_size or 0:,.1f} / {summary.max_batch_size or 0:,}"),
        ("mean / max queue depth", f"{summary.mean_queue_depth or 0:,.1f} / {summary.max_queue_depth or 0:,}"),
        (
            "mean / max KV utilization",
            f"{(summary.mean_kv_utilization or 0):.0%} / {(summary.max_kv_utilization or 0):.0%}",
        ),
        ("preemptions", f"{summary.preemptions:,}"),
        ("rejected", f"{summary.rejected:,}"),
        (
            "prefix cache hit rate",
            "-" if summary.prefix_cache_hit_rate is None else f"{summary.prefix_cache_hit_rate:.1%}",
        ),
    ]
    if summary.errors:
        rows.append(("errors", ", ".join(f"{k} {v}" for k, v in summary.errors.items())))
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)


def write_html(
    path: Path,
    title: str,
    result: SimResult | None,
    load_table: list[dict[str, Any]] | None,
    notes: list[str],
    load_unit: str = "req/s",
) -> None:
    from servecap.report import html_report

    text = html_report(
        title,
        summary=result.summary if result is not None else None,
        columns=result.columns if result is not None else None,
        load_table=load_table,
        load_unit=load_unit,
        notes=notes,
    )
    path.write_text(text, encoding="utf-8")


@click.command("simulate")
@deployment_options
@calibration_option
@workload_option
@click.option("--rate", "-r", type=click.FLOAT, default=None, help="Open loop: requests per second.")
@click.option("--users", "-u", type=click.INT, default=None, help="Closed loop: number of chat users.")
@think_time_option
@stream_options
@slo_options(None, None, "for goodput")
@no_prefix_caching_option
@click.option("--max-waiting", type=click.INT, default=None,
              help="Waiting-queue limit; requests beyond it are rejected.")
@policy_option
@html_option
@json_option
def simulate_command(
    deployment: DeploymentFlags,
    calibration: Path | None,
    workload: Path | None,
    rate: float | None,
    users: int | None,
    think_time_s: float | None,
    stream: StreamFlags,
    duration_s: float | None,
    num_requests: int | None,
    seed: int,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    no_prefix_caching: bool,
    max_waiting: int | None,
    policy: str,
    html: Path | None,
    as_json: bool,
) -> None:
    """Simulate one replica (continuous batching, paged KV cache, prefix caching) under a
    workload: latency percentiles, throughput, goodput, batch, queue and KV over time."""
    from rich.console import Console

    from servecap.cli.inputs import slo_from_ms
    from servecap.results import summary_to_json_dict

    slo = slo_from_ms(ttft_slo_ms, tpot_slo_ms)
    built = build(
        deployment=deployment,
        calibration=calibration,
        workload=workload,
        rate=rate,
        users=users,
        think_time_s=think_time_s,
        stream=stream,
        duration_s=duration_s,
        num_requests=num_requests,
        slo=slo,
        no_prefix_caching=no_prefix_caching,
        max_waiting=max_waiting,
        policy=policy,
    )
    console = Console(stderr=as_json)
    has_slo = ttft_slo_ms is not None or tpot_slo_ms is not None
    result = run_simulation(
        built,
        seed=seed,
        slo=slo if has_slo else None,
        show_progress=not as_json,
        console=console,
    )
    if html is not None:
        write_html(
            html,
            f"servecap simulate: {built.plan.deployment.model.id} on {built.plan.deployment.gpu.id}",
            result,
            None,
            built.notes,
        )
    if as_json:
        d = summary_to_json_dict(result.summary)
        d["model"] = built.plan.deployment.model.id
        d["gpu"] = built.plan.deployment.gpu.id
        d["seed"] = seed
        d["notes"] = built.notes
        click.echo(json.dumps(d))
        return
    dep = built.plan.deployment
    console.print(
        f"[bold]{dep.model.id}[/] on {dep.num_gpus}x {dep.gpu.id} (tp {dep.parallelism.tp}, pp {dep.parallelism.pp}): "
        f"{built.setup.num_gpu_blocks:,} KV blocks of {built.setup.block_size} tokens, "
        f"max_num_seqs {built.setup.max_num_seqs}, max_num_batched_tokens {built.setup.max_num_batched_tokens}"
    )
    render_summary(console, result.summary, "simulated latency")
    console.print(
        f"planner: TTFT {_ms(built.plan.single_request_ttft_s)} ms and TPOT "
        f"{_ms(built.plan.single_request_tpot_s)} ms for a lone request; at most "
        f"{built.plan.output_tokens_per_s_total:,.0f} output tokens/s (batch {built.plan.batch})"
    )
    for note in built.notes:
        console.print(f"[dim]note: {note}[/]")
    if html is not None:
        console.print(f"wrote {html}")
