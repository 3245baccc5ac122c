"""``servecap bench URL``: measure an OpenAI-compatible server under a workload."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from servecap.cli.numbers import FINITE, FiniteRange
from servecap.cli.options import (
    PATH,
    DeploymentFlags,
    F,
    StreamFlags,
    db_option,
    hardware_options,
    json_option,
    request_stream_options,
    slo_options,
)

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from servecap.app.bench import BenchRequest, BenchRunResult
    from servecap.json_object import JsonObject
    from servecap.progress import Progress, ProgressFn
    from servecap.workload import WorkloadSpec


def _floats(field: str, text: str | None, *, integers: bool = False) -> list[float | None]:
    """A flag's comma list of positive finite numbers (whole numbers with ``integers``)."""
    import math

    from servecap.errors import ServecapError

    if text is None:
        return [None]
    if len(text) > 10_000:
        raise ServecapError(field, text, "is too long (at most 10,000 characters)")
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ServecapError(field, text, "expected a number or a comma-separated list") from None
    if not vals or any(not math.isfinite(v) or v <= 0 for v in vals):
        raise ServecapError(field, text, "values must be positive finite numbers")
    if integers and any(v != int(v) for v in vals):
        raise ServecapError(field, text, "values must be whole numbers")
    return list(vals)


def _request_field(name: str) -> FieldInfo:
    """:class:`~servecap.app.bench.BenchRequest`'s field: the option's default and help (defaults
    live once, in app/)."""
    from servecap.app.bench import BenchRequest

    return BenchRequest.model_fields[name]


def _option(flag: str, name: str, kind: click.ParamType) -> Callable[[F], F]:  # type: ignore[type-arg]
    field = _request_field(name)
    return click.option(flag, type=kind, default=field.default, help=field.description)


@click.command("bench")
@click.argument("url", type=click.STRING)
@click.option(
    "--model",
    "-m",
    type=click.STRING,
    default=None,
    help="Model name to request (default: the server's first /v1/models entry).",
)
@click.option("--workload", type=PATH, default=None, help="Workload file (YAML/JSON), as for simulate.")
@click.option(
    "--rate", type=click.STRING, default=None, help="Requests/s (open loop); a comma list sweeps, e.g. 1,2,4."
)
@request_stream_options
@click.option("--num-requests", type=click.INT, default=None, help="Requests to send.")
@click.option("--duration-s", type=FINITE, default=None, help="Stop starting requests after this many seconds.")
@click.option("--users", type=click.INT, default=None, help="Closed loop: chat users.")
@click.option("--think-time-s", type=FINITE, default=None, help="Chat users' think time.")
@click.option("--concurrency", type=click.STRING, default=None, help="Closed loop with N workers; a comma list sweeps.")
@_option("--seed", "seed", click.INT)
@_option("--endpoint", "endpoint", click.STRING)
@_option("--warmup-s", "warmup_s", FINITE)
@_option("--cooldown-s", "cooldown_s", FINITE)
@_option("--timeout-s", "timeout_s", FINITE)
@_option("--stall-timeout-s", "stall_timeout_s", FINITE)
@slo_options(None, None, "for goodput")
@_option("--label", "label", click.STRING)
@db_option
@click.option("--no-store", is_flag=True, default=False, help="Do not save the run.")
@click.option(
    "--api-key", type=click.STRING, default=None, envvar="OPENAI_API_KEY", show_envvar=True, help="Bearer token."
)
@click.option(
    "--model-id",
    type=click.STRING,
    default=None,
    help="Deployment: catalog id or config.json of the served model (default: --model).",
)
@hardware_options
@click.option(
    "--no-enable-prefix-caching",
    "--no-prefix-caching",
    "no_prefix_caching",
    is_flag=True,
    default=False,
    help="Deployment: the server runs without prefix caching.",
)
@click.option(
    "--server-timing/--no-server-timing",
    default=None,
    help="Ask for the emulator's servecap_timing (default: on when the server is servecap emulate).",
)
@_option("--max-error-fraction", "max_error_fraction", FiniteRange(0.0, 1.0))
@click.option(
    "--share-prefixes-across-runs",
    is_flag=True,
    default=_request_field("share_prefixes_across_runs").default,
    help=_request_field("share_prefixes_across_runs").description,
)
@json_option
def bench(
    *,
    url: str,
    model: str | None,
    workload: Path | None,
    rate: str | None,
    stream: StreamFlags,
    num_requests: int | None,
    duration_s: float | None,
    users: int | None,
    think_time_s: float | None,
    concurrency: str | None,
    seed: int,
    endpoint: str,
    warmup_s: float,
    cooldown_s: float,
    timeout_s: float,
    stall_timeout_s: float,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    label: str,
    db: Path | None,
    no_store: bool,
    api_key: str | None,
    model_id: str | None,
    deployment: DeploymentFlags,
    no_prefix_caching: bool,
    server_timing: bool | None,
    max_error_fraction: float,
    share_prefixes_across_runs: bool,
    as_json: bool,
) -> None:
    """Send a workload to an OpenAI-compatible server and measure TTFT, ITL, TPOT, E2E, throughput.

    URL is the server's base URL, e.g. http://127.0.0.1:8000. Give the server's deployment
    (--gpu and the flags of `servecap plan`; --model-id when the served name is not a catalog
    id) to store it with the run for `servecap calibrate` and `servecap accuracy`; against
    `servecap emulate` it is read from the server."""
    from pydantic import ValidationError

    from servecap.app.bench import MAX_CONCURRENCY, BenchStep, bench, check_base_url
    from servecap.errors import ServecapError, from_validation_error
    from servecap.workload import load_workload, workload_from_flags

    if endpoint not in ("completions", "chat"):
        raise ServecapError("endpoint", endpoint, "must be completions or chat")
    check_base_url(url)
    rates = _floats("rate", rate)
    concs = _floats("concurrency", concurrency, integers=True)
    if len(rates) > 1 and len(concs) > 1:
        raise ServecapError("concurrency", concurrency, "sweep rates or concurrencies, not both")
    for name, val in (("warmup_s", warmup_s), ("cooldown_s", cooldown_s)):
        if val < 0:
            raise ServecapError(name, val, "must be >= 0")
    for name, val in (("timeout_s", timeout_s), ("stall_timeout_s", stall_timeout_s)):
        if val <= 0:
            raise ServecapError(name, val, "must be > 0")
    if num_requests is not None and num_requests < 1:
        raise ServecapError("num_requests", num_requests, "must be >= 1")
    # never more workers than requests to send; past that, a bound on the workers themselves
    concs = [c if c is None or num_requests is None else min(c, num_requests) for c in concs]
    for c in concs:
        if c is not None and c > MAX_CONCURRENCY:
            raise ServecapError("concurrency", concurrency, f"at most {MAX_CONCURRENCY:,} workers")
    if workload is not None and rate is not None:
        raise ServecapError("rate", rate, "give --workload or --rate, not both")
    steps = []
    for r in rates:
        for c in concs:
            if workload is not None:
                spec = load_workload(workload)
            elif r is not None or users is not None:
                spec = workload_from_flags(
                    rate=r,
                    num_requests=num_requests,
                    duration_s=duration_s,
                    users=users,
                    think_time_s=think_time_s,
                    **stream.workload_kwargs(),
                )
            else:
                spec = _concurrency_spec(c, stream.prompt_tokens, stream.output_tokens, num_requests, duration_s)
            workers = None if c is None else int(c)
            try:
                steps.append(BenchStep(workload=spec, rate=r, concurrency=workers))
            except ValidationError as err:
                raise from_validation_error(err) from None
    dep_settings: JsonObject | None = None
    if deployment.gpu is not None or model_id is not None:
        # (no model named: the app fills in the served model's name once it knows it)
        dep_settings = {
            **deployment.with_model(model_id or model).to_settings(),
            "enable_prefix_caching": not no_prefix_caching,
        }
    try:
        req = _request(
            ttft_slo_ms,
            tpot_slo_ms,
            url=url,
            model=model,
            steps=steps,
            seed=seed,
            endpoint=endpoint,
            warmup_s=warmup_s,
            cooldown_s=cooldown_s,
            timeout_s=timeout_s,
            stall_timeout_s=stall_timeout_s,
            label=label,
            db=db,
            store=not no_store,
            api_key=api_key,
            deployment=dep_settings,
            server_timing=server_timing,
            max_error_fraction=max_error_fraction,
            share_prefixes_across_runs=share_prefixes_across_runs,
        )
    except ValidationError as err:
        raise from_validation_error(err) from None
    with progress_reporter(quiet=as_json) as report:
        resp = bench(req, report)
    if as_json:
        click.echo(resp.model_dump_json())
    else:
        for run in resp.runs:
            _render(run, resp.db)
    for warning in resp.warnings:
        click.echo(f"warning: {warning}", err=True)
    ctx = click.get_current_context()
    if resp.interrupted:
        last = resp.runs[-1]
        stored = f": the partial run is stored as {last.run_id}" if last.run_id else ""
        if resp.stopped_by == "SIGTERM":
            click.echo("terminated (SIGTERM)" + stored, err=True)
            ctx.exit(143)
        click.echo("interrupted" + stored, err=True)
        ctx.exit(130)
    if resp.failure is not None:
        click.echo(f"error: {resp.failure}", err=True)
        ctx.exit(1)


def _request(ttft_slo_ms: float | None, tpot_slo_ms: float | None, **values: object) -> BenchRequest:
    """The request: the flags as they are, the SLO from milliseconds (none when neither is set)."""
    from servecap.app.bench import BenchRequest, SloModel

    slo = (
        SloModel(ttft_s=ttft_slo_ms / 1e3 if ttft_slo_ms else None, tpot_s=tpot_slo_ms / 1e3 if tpot_slo_ms else None)
        if (ttft_slo_ms or tpot_slo_ms)
        else None
    )
    return BenchRequest.model_validate({"slo": slo, **values})


def _concurrency_spec(c: float | None, prompt: int, output: int, n: int | None, dur: float | None) -> WorkloadSpec:
    """A closed loop by --concurrency: lengths from a constant-rate stream (times unused)."""
    from servecap.errors import ServecapError
    from servecap.workload import workload_from_flags

    if c is None:
        raise ServecapError("rate", None, "give --rate, --concurrency, --users or --workload")
    return workload_from_flags(
        rate=1.0,
        arrival="constant",
        prompt_tokens=prompt,
        output_tokens=output,
        num_requests=n,
        duration_s=None if n is not None else dur,
    )


@contextlib.contextmanager
def progress_reporter(*, quiet: bool, every_s: float = 5.0) -> Iterator[ProgressFn | None]:
    """A :data:`~servecap.progress.ProgressFn` that draws a rich bar on a terminal and, when
    stderr is not one, prints a plain line to stderr every ``every_s`` seconds (and the first
    and last event of each stage); nothing when ``quiet``."""
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bars

    if quiet:
        yield None
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        last: dict[str, float] = {}

        def line(ev: Progress) -> None:
            now = time.monotonic()
            finished = ev.total is not None and ev.done >= ev.total
            if ev.stage in last and now - last[ev.stage] < every_s and not finished and ev.done:
                return
            last[ev.stage] = now
            of = f"/{ev.total}" if ev.total is not None else ""
            note = f" ({ev.message})" if ev.message else ""
            print(f"{ev.stage}: {ev.done}{of} {ev.unit}{note}", file=sys.stderr, flush=True)

        yield line
        return
    with Bars(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bars:
        tasks: dict[str, Any] = {}

        def bar(ev: Progress) -> None:
            if ev.stage not in tasks:
                tasks[ev.stage] = bars.add_task(ev.stage, total=ev.total, note="")
            bars.update(tasks[ev.stage], completed=ev.done, total=ev.total, note=ev.message)

        yield bar


def _render(run: BenchRunResult, db: str | None) -> None:
    """One run as a table; piped output is plain and never truncated (rich wraps, never cuts)."""
    from rich.console import Console
    from rich.table import Table

    con = Console(soft_wrap=True)
    s = run.summary
    title = (
        f"run {run.run_id or '(not stored)'}: {s.completed}/{s.num_requests} completed, "
        f"{run.measured_window_s:.1f} s window" + (" (interrupted)" if run.interrupted else "")
    )
    t = Table(title=title, title_justify="left")
    t.add_column("metric", no_wrap=True)
    for col in ("p50", "p90", "p99", "mean"):
        t.add_column(col, justify="right", no_wrap=True)
    for name, p in (("ttft", s.ttft_s), ("tpot", s.tpot_s), ("itl", s.itl_s), ("e2e", s.e2e_s)):
        t.add_row(
            name + " (ms)",
            *("-" if v is None else f"{v * 1e3:.1f}" for v in (p.p50, p.p90, p.p99, p.mean)),
        )
    con.print(t)
    good = s.goodput_req_s
    con.print(
        f"throughput {s.throughput_req_s:.2f} req/s, {s.output_tokens_per_s:.1f} output tok/s"
        + (f", goodput {good:.2f} req/s" if good is not None else "")
    )
    hit = run.prefix_cache_hit_rate
    con.print(
        "prefix-cache hit rate "
        + (
            "unknown (the server reports no cached tokens; vLLM does with --enable-prompt-tokens-details)"
            if hit is None
            else f"{hit:.1%} (the server's cached prompt tokens)"
        )
    )
    if run.errors:
        con.print("[red]errors:[/red] " + ", ".join(f"{k} {v}" for k, v in run.errors.items()))
    if run.first_error:
        con.print(f"[red]first error:[/red] {run.first_error}", markup=True, highlight=False)
    if run.multi_token_chunk_requests:
        con.print(
            f"[yellow]{run.multi_token_chunk_requests} requests received chunks carrying several tokens "
            "(their ITL is not observable per token)[/yellow]"
        )
    for ch in run.checks:
        mark = "[green]ok[/green]" if ch.ok else "[yellow]WARN[/yellow]"
        con.print(f"  {mark} {ch.name}: {ch.message}")
    if run.run_id and db:
        con.print(f"stored in {db}")
