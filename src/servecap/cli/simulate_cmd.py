"""``servecap simulate``: one replica under a workload, by discrete-event simulation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from servecap.app.request_fields import validated, values_of
from servecap.app.simulate import Built, build, expected_requests
from servecap.app.simulate_request import SimulateRequest
from servecap.cli.fields import field_option
from servecap.cli.numbers import FINITE
from servecap.cli.options import (
    OUT_PATH,
    PATH,
    DeploymentFlags,
    StreamFlags,
    calibration_option,
    deployment_options,
    json_option,
    request_stream_options,
    stack,
    think_time_option,
    turns_option,
)
from servecap.cli.trace_options import pop_trace, trace_options

if TYPE_CHECKING:
    from rich.console import Console

    from servecap.results import RunSummary
    from servecap.sim.simulate import SimResult
    from servecap.specs import Slo
    from servecap.validation.interval import Interval

F = TypeVar("F", bound=Callable[..., Any])
workload_option = field_option(SimulateRequest, "workload", "--workload", type=PATH)
# --prompt-tokens ... --seed: request lengths, arrivals and the run's length (simulate and capacity).
stream_options = stack(
    request_stream_options,
    field_option(SimulateRequest, "duration_s", "--duration-s", type=FINITE),
    field_option(SimulateRequest, "num_requests", "--num-requests", type=click.IntRange(min=1)),
    field_option(SimulateRequest, "seed", "--seed", type=click.IntRange(min=0)),
)
no_prefix_caching_option = field_option(
    SimulateRequest,
    "no_prefix_caching",
    "--no-prefix-caching",
    "--no-enable-prefix-caching",  # vLLM's spelling, as `emulate` and `bench` take it
    "no_prefix_caching",
    is_flag=True,
)
policy_option = field_option(SimulateRequest, "policy", "--policy", type=click.Choice(["fcfs", "priority"]))
# --cpu-kv-gib ... --kv-load: KV tiers below GPU memory (docs/kv-tiers.md)
kv_tier_options = stack(
    field_option(SimulateRequest, "cpu_kv_gib", "--cpu-kv-gib", type=FINITE),
    field_option(SimulateRequest, "ssd_kv_gib", "--ssd-kv-gib", type=FINITE),
    field_option(SimulateRequest, "remote_kv_tib", "--remote-kv-tib", type=FINITE),
    field_option(SimulateRequest, "kv_load", "--kv-load", type=click.Choice(["layerwise", "blocking", "async"])),
    field_option(SimulateRequest, "kv_store", "--kv-store", type=click.Choice(["on-evict", "on-compute"])),
)
html_option = click.option(
    "--html", type=OUT_PATH, default=None, help="Write a self-contained interactive HTML report here."
)

__all__ = ["Built", "build", "expected_requests", "render_summary", "write_html"]


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.1f}"


def intervals_text(intervals: Mapping[str, Interval]) -> str | None:
    """The 80% intervals of the measured p50/p99 latencies (``--json``'s ``interval``) in a
    line, or None when there are none (the terminal and the HTML report print it)."""
    parts = []
    for key, label in (
        ("ttft_s.p50", "TTFT p50"),
        ("ttft_s.p99", "TTFT p99"),
        ("tpot_s.p50", "TPOT p50"),
        ("tpot_s.p99", "TPOT p99"),
    ):
        iv = intervals.get(key)
        if iv is not None:
            parts.append(f"{label} {_ms(iv.low)}–{_ms(iv.high)} ms")
    return ", ".join(parts) if parts else None


def render_intervals(console: Console, intervals: Mapping[str, Interval]) -> None:
    """:func:`intervals_text` in one line, and what they are built from."""
    text = intervals_text(intervals)
    if text is None:
        return
    console.print("80% intervals: " + text)
    notes = {iv.note for iv in intervals.values() if not iv.close}
    for note in sorted(notes):
        console.print(f"[dim]note: {note}[/]")


def kv_tier_hits_text(summary: RunSummary) -> str:
    """``gpu 55.4%, cpu 27.3%, ssd 0.0%`` (tokens found per tier over prompt tokens looked up)."""
    q = summary.kv_tier_query_tokens
    hits = summary.kv_tier_hit_tokens or {}
    return ", ".join(f"{name} {n / q:.1%}" if q else f"{name} -" for name, n in hits.items())


def render_summary(console: Console, summary: RunSummary, title: str) -> None:
    from rich.table import Table

    from servecap.cli.console import print_table

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
    print_table(console, lat)
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
    if summary.kv_tier_hit_tokens is not None:
        rows.append(("KV tier hits (of prompt tokens)", kv_tier_hits_text(summary)))
    if summary.errors:
        rows.append(("errors", ", ".join(f"{k} {v}" for k, v in summary.errors.items())))
    for k, v in rows:
        t.add_row(k, v)
    print_table(console, t)


def write_html(
    path: Path,
    title: str,
    result: SimResult | None,
    load_table: list[dict[str, Any]] | None,
    notes: list[str],
    load_unit: str = "req/s",
    *,
    context: dict[str, str] | None = None,
    slo: Slo | None = None,
    capacity: float | None = None,
) -> None:
    from servecap.report.html import html_report

    text = html_report(
        title,
        summary=result.summary if result is not None else None,
        columns=result.columns if result is not None else None,
        load_table=load_table,
        load_unit=load_unit,
        notes=notes,
        context=context or {},
        slo=slo,
        capacity=capacity,
    )
    from servecap.outputs import write_text

    write_text(path, text, "--html")


def request_slo_options(request: type[SimulateRequest]) -> Callable[[F], F]:
    """``--ttft-slo-ms``/``--tpot-slo-ms`` with the request's defaults and help."""
    return stack(
        field_option(request, "ttft_slo_ms", "--ttft-slo-ms", type=FINITE),
        field_option(request, "tpot_slo_ms", "--tpot-slo-ms", type=FINITE),
    )


@click.command("simulate")
@deployment_options
@calibration_option
@workload_option
@trace_options
@field_option(SimulateRequest, "rate", "--rate", "-r", type=FINITE)
@field_option(SimulateRequest, "users", "--users", "-u", type=click.IntRange(min=1))
@think_time_option
@turns_option
@stream_options
@request_slo_options(SimulateRequest)
@no_prefix_caching_option
@field_option(SimulateRequest, "max_waiting", "--max-waiting", type=click.IntRange(min=0))
@policy_option
@kv_tier_options
@field_option(SimulateRequest, "step_model", "--step-model", type=click.Choice(["auto", "roofline", "operations"]))
@html_option
@json_option
def simulate_command(
    deployment: DeploymentFlags,
    stream: StreamFlags,
    html: Path | None,
    as_json: bool,
    **settings: object,
) -> None:
    """Simulate one replica (continuous batching, paged KV cache, prefix caching) under a
    workload: latency percentiles, throughput, goodput, batch, queue and KV over time."""
    from servecap.app.inputs import slo_from_ms
    from servecap.app.simulate import simulate_request
    from servecap.cli.console import make_console, progress_reporter

    trace = pop_trace(settings)
    request = validated(SimulateRequest, {**values_of(deployment), **values_of(stream), **settings, "trace": trace})
    with progress_reporter(make_console(stderr=True)) as progress:
        response, built, result = simulate_request(request, progress=progress)
    slo = slo_from_ms(request.ttft_slo_ms, request.tpot_slo_ms)
    dep = built.plan.deployment
    if html is not None:
        write_html(
            html,
            f"servecap simulate: {dep.model.id} on {dep.num_gpus}x {dep.gpu.id}",
            result,
            None,
            built.notes,
            context=_context(built, response.load_check.message, intervals=response.interval)
            | ({"SLO verdict": response.slo_verdict.text} if response.slo_verdict is not None else {}),
            slo=slo if request.has_slo() else None,
        )
    if as_json:
        click.echo(response.model_dump_json())
        return
    console = make_console()
    check = response.load_check
    if check.message:  # overload first: the percentiles below then measure the run's length
        console.print(f"[bold red]{check.message}[/]")
    if request.workload is None and request.trace is None:
        from servecap.app.defaults import shape_line
        from servecap.app.simulate import load_text

        users_text = load_text(built, default_users=request.users is not None and request.think_time_s is None)
        console.print(
            shape_line(
                stream.prompt_tokens,
                stream.output_tokens,
                prompt_sigma=stream.prompt_sigma,
                output_sigma=stream.output_sigma,
                users=users_text,
            ),
            highlight=False,
        )
    console.print(
        f"[bold]{dep.model.id}[/] on {dep.num_gpus}x {dep.gpu.id} (tp {dep.parallelism.tp}, pp {dep.parallelism.pp}): "
        f"{built.setup.num_gpu_blocks:,} KV blocks of {built.setup.block_size} tokens, "
        f"max_num_seqs {built.setup.max_num_seqs}, max_num_batched_tokens {built.setup.max_num_batched_tokens}"
    )
    render_summary(console, result.summary, "simulated latency")
    render_intervals(console, response.interval)
    verdict = response.slo_verdict
    if verdict is not None:  # decided on the simulated p99s, as capacity decides (app/slo_verdict.py)
        console.print(f"[bold {'green' if verdict.met else 'red'}]{verdict.text}[/]", highlight=False)
        console.print(f"[dim]verdict rule: {verdict.rule}[/]", highlight=False)
    load = f"{check.offered_req_s:,.2f} req/s offered, " if check.offered_req_s is not None else ""
    console.print(
        f"load: {load}about {check.service_req_s:,.2f} req/s at most (planner); queue wait grows "
        f"{check.queue_growth_s_per_s:,.3f} s per s of arrivals ({'overloaded' if check.overloaded else 'stable'})"
    )
    console.print(
        f"planner: TTFT {_ms(built.plan.single_request_ttft_s)} ms and TPOT "
        f"{_ms(built.plan.single_request_tpot_s)} ms for a lone request; at most "
        f"{built.plan.output_tokens_per_s_total:,.0f} output tokens/s (batch {built.plan.batch})"
    )
    for note in built.notes:
        console.print(f"[dim]note: {note}[/]")
    if html is not None:
        console.print(f"wrote {html}")


def _context(built: Built, headline: str | None, *, intervals: Mapping[str, Interval] | None = None) -> dict[str, str]:
    """The workload and deployment, for the report's header."""
    from servecap.workload import dist_mean

    dep, w = built.plan.deployment, built.workload
    rows = {
        "deployment": (
            f"{dep.model.id} on {dep.num_gpus}x {dep.gpu.id} (tp {dep.parallelism.tp}, "
            f"pp {dep.parallelism.pp}), weights {dep.weights_dtype.name}, KV {dep.kv_dtype.name}, "
            f"max_model_len {dep.engine.max_model_len:,}"
        ),
        "engine": (
            f"{built.setup.num_gpu_blocks:,} KV blocks of {built.setup.block_size} tokens, max_num_seqs "
            f"{built.setup.max_num_seqs}, max_num_batched_tokens {built.setup.max_num_batched_tokens}"
        ),
    }
    load = []
    if w.users is not None:
        load.append(
            f"{w.users.count:,} users, think time {dist_mean(w.users.think_time_s):g} s, "
            f"{dist_mean(w.users.turns):g} turns"
        )
    elif w.arrival is not None and hasattr(w.arrival, "rate_per_s"):
        load.append(f"{w.arrival.kind} arrivals at {w.arrival.rate_per_s:g} req/s")
    if w.prompt_tokens is not None and w.output_tokens is not None:
        load.append(
            f"{dist_mean(w.prompt_tokens):,.0f} prompt + {dist_mean(w.output_tokens):,.0f} output tokens (mean)"
        )
    rows["workload"] = ", ".join(load) or "from the workload file"
    if headline:
        rows["answer"] = headline
    iv_text = intervals_text(intervals or {})
    if iv_text is not None:
        notes = sorted({iv.note for iv in (intervals or {}).values()})
        rows["80% intervals"] = iv_text + " (" + "; ".join(notes) + ")"
    return rows
