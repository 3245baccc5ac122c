"""``servecap fleet plan``: the cheapest fleet that meets percentile SLOs, found by simulation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from servecap.app import defaults
from servecap.cli.numbers import FINITE
from servecap.cli.options import OUT_PATH, PATH, json_option, slo_options
from servecap.cli.trace_options import pop_trace, trace_options
from servecap.planning.model import EXECUTOR_CHOICES, FleetPlanRequest, TrafficModel
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS
from servecap.report.fleet_plan_text import (
    lever_header,
    lever_notes,
    lever_rows,
    plan_html,
    replicas_cell,
    summary_lines,
)

if TYPE_CHECKING:
    from rich.console import Console

    from servecap.planning.model import FleetPlanResponse

_DEFAULT = FleetPlanRequest.model_fields  # the request's defaults, read for the help


class _TokensOrFile(click.ParamType):  # type: ignore[type-arg]
    """``-o``: output tokens (an integer), or a fleet file to write (a ``.yaml``/``.yml``/``.json``
    path: ``fleet plan -o fleet.yaml``)."""

    name = "INTEGER|FILE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | Path:
        if isinstance(value, int | Path):
            return value
        text = str(value)
        try:
            return int(text)
        except ValueError:
            if Path(text).suffix.lower() in (".yaml", ".yml", ".json"):
                return Path(text)
        self.fail(f"{text!r}: output tokens (an integer) or a fleet file to write (.yaml, .yml, .json)", param, ctx)


TOKENS_OR_FILE = _TokensOrFile()


@click.command("plan")
@click.option("--plan", "plan_file", type=PATH, default=None, help="Plan file (YAML/JSON; see docs/fleet.md).")
@click.option("--model", "-m", type=click.STRING, default=None, help="Catalog id or config.json path.")
@click.option(
    "--gpu", "-g", "gpus", type=click.STRING, multiple=True, help="A candidate GPU (repeat: -g H100 -g H200)."
)
@click.option("--tp", type=click.IntRange(min=1), default=None, help="Tensor-parallel size of every candidate.")
@click.option("--weights-dtype", "-w", type=click.STRING, default=None, help="auto|bf16|fp16|fp8|int8|int4|...")
@click.option("--kv-cache-dtype", "-k", type=click.STRING, default="auto", help="auto|bf16|fp16|fp8.")
@click.option("--max-model-len", "-l", type=click.INT, default=None, help="Context length (default: the model's).")
@click.option("--peak-rps", type=FINITE, default=None, help="Peak requests per second.")
@click.option(
    "--peak-users", type=click.INT, default=None, help="Peak users (one request each per --request-interval-s)."
)
@click.option(
    "--request-interval-s",
    type=FINITE,
    default=None,
    help="Mean seconds between a user's requests (reading, typing, the answer; "
    f"default {TrafficModel.model_fields['request_interval_s'].default:g}).",
)
@click.option("--workload", type=PATH, default=None, help="Workload file: lengths, tenants/classes, a daily curve.")
@trace_options
@click.option(
    "--prompt-tokens",
    "-p",
    type=click.INT,
    default=None,
    help=f"Prompt tokens (median with --prompt-sigma; default {defaults.PROMPT_TOKENS}).",
)
@click.option(
    "--output-tokens",
    "-o",
    type=TOKENS_OR_FILE,
    default=None,
    help=f"Output tokens (median with --output-sigma; default {defaults.OUTPUT_TOKENS}); "
    "-o FILE.yaml (a path, not a number) is --out FILE.yaml.",
)
@click.option(
    "--out",
    "out_path",
    type=PATH,
    default=None,
    help="Write the chosen fleet as a fleet file (YAML; .json for JSON) and its peak window beside it "
    "(FILE.peak.yaml): `fleet simulate --fleet` re-runs it, `export` deploys it.",
)
@click.option("--prompt-sigma", type=FINITE, default=None, help="Log-normal sigma of prompt lengths (0: fixed).")
@click.option("--output-sigma", type=FINITE, default=None, help="Log-normal sigma of output lengths (0: fixed).")
@click.option("--slo-ttft-p99-s", type=FINITE, default=None, help="p99 time to first token target (s).")
@click.option("--slo-tpot-p99-s", type=FINITE, default=None, help="p99 time per output token target (s).")
@slo_options(None, None, "checked at p99, as capacity")
@click.option(
    "--router", type=click.Choice(list(ROUTERS)), default=None, help=f"Routing policy (default {DEFAULT_ROUTER})."
)
@click.option(
    "--levers", type=click.STRING, default=None, help="Comma-separated levers (default: all the fleet file takes)."
)
@click.option(
    "--small-model",
    type=click.STRING,
    default=None,
    help=f"The overflow lever's smaller model (default {str(_DEFAULT['small_model'].default).split('/')[-1]}; skipped when not smaller).",
)
@click.option(
    "--cache-hit-rate",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=None,
    help=f"The response-cache lever's hit rate (default {_DEFAULT['cache_hit_rate'].default:g}: measure yours, e.g. repeated prompts).",
)
@click.option(
    "--cpu-tier-gib",
    type=FINITE,
    default=None,
    help=f"The cpu-tier lever's DRAM per replica, GiB (default {_DEFAULT['cpu_tier_gib'].default:g}).",
)
@click.option(
    "--shared-store-tib",
    type=FINITE,
    default=None,
    help=f"The shared-store lever's size, TiB (default {_DEFAULT['shared_store_tib'].default:g}).",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=None, help=f"Random seed (default {_DEFAULT['seed'].default})."
)
@click.option(
    "--executor",
    type=click.Choice(list(EXECUTOR_CHOICES)),
    default="auto",
    help="Where the simulations run: auto (a process pool on more than one core for big windows), "
    "serial, process, ray. The answer is the same.",
)
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Parallel simulations (default: the cores).")
@click.option("--ray-address", type=click.STRING, default=None, help="Join a Ray cluster (auto or ray://host:port).")
@click.option("--html", "html_path", type=OUT_PATH, default=None, help="Write an HTML page of the plan.")
@json_option
def fleet_plan_command(
    plan_file: Path | None,
    model: str | None,
    gpus: tuple[str, ...],
    tp: int | None,
    weights_dtype: str | None,
    kv_cache_dtype: str,
    max_model_len: int | None,
    peak_rps: float | None,
    peak_users: int | None,
    request_interval_s: float | None,
    workload: Path | None,
    prompt_tokens: int | None,
    output_tokens: int | Path | None,
    prompt_sigma: float | None,
    output_sigma: float | None,
    slo_ttft_p99_s: float | None,
    slo_tpot_p99_s: float | None,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    router: str | None,
    levers: str | None,
    small_model: str | None,
    cache_hit_rate: float | None,
    cpu_tier_gib: float | None,
    shared_store_tib: float | None,
    seed: int | None,
    executor: str,
    workers: int | None,
    ray_address: str | None,
    html_path: Path | None,
    as_json: bool,
    out_path: Path | None = None,
    **trace_flags: object,
) -> None:
    """Find the cheapest fleet that meets percentile SLOs: replicas per candidate pool from the
    closed form, then bisection with the fleet simulator on the peak window (or the replayed
    --trace itself); autoscaler settings for a daily curve; a lever table, each lever re-simulated."""

    from servecap.app.fleet_plan import fleet_plan
    from servecap.app.fleet_plan.flags import FleetPlanFlags, plan_request_from_flags
    from servecap.errors import ServecapError

    if isinstance(output_tokens, Path):  # -o fleet.yaml
        if out_path is not None:
            raise ServecapError("out", str(out_path), f"give -o {output_tokens} or --out {out_path}, not both")
        out_path, output_tokens = output_tokens, None

    flags = FleetPlanFlags(
        plan_file=plan_file,
        model=model,
        gpus=gpus,
        tp=tp,
        weights_dtype=weights_dtype,
        kv_cache_dtype=kv_cache_dtype,
        max_model_len=max_model_len,
        peak_rps=peak_rps,
        peak_users=peak_users,
        request_interval_s=request_interval_s,
        workload=workload,
        trace=pop_trace(trace_flags),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        prompt_sigma=prompt_sigma,
        output_sigma=output_sigma,
        slo_ttft_p99_s=slo_ttft_p99_s,
        slo_tpot_p99_s=slo_tpot_p99_s,
        ttft_slo_ms=ttft_slo_ms,
        tpot_slo_ms=tpot_slo_ms,
        router=router,
        levers=levers,
        small_model=small_model,
        cache_hit_rate=cache_hit_rate,
        cpu_tier_gib=cpu_tier_gib,
        shared_store_tib=shared_store_tib,
        seed=seed,
    )
    request = plan_request_from_flags(flags)
    from servecap.cli.console import make_console, progress_reporter

    # stage progress on stderr: a bar on a terminal, a line every 5 s off one (it was silent)
    with progress_reporter(make_console(stderr=True)) as progress:
        response = fleet_plan(request, progress, executor=executor, workers=workers, ray_address=ray_address)
    if html_path is not None:
        from servecap.outputs import write_text

        write_text(html_path, plan_html(response), "--html")
    if out_path is not None:
        from servecap.app.fleet_plan.out_file import plan_files, slo_ms
        from servecap.outputs import write_text

        files = plan_files(response, out_path, request.seed, slo_ms(request))
        write_text(out_path, files.fleet_text, "--out")
        write_text(files.workload_path, files.workload_text, "--out")
        click.echo(f"wrote {out_path} and {files.workload_path}; re-run: {files.rerun}", err=True)
        if files.split_text is not None and files.split_path is not None:
            write_text(files.split_path, files.split_text, "--out")
            click.echo(
                f"wrote {files.split_path} (the P/D split; servecap export pd {files.split_path.name})", err=True
            )
    if as_json:
        click.echo(response.model_dump_json())
        return
    console = make_console()
    console.print(shape_text(request), highlight=False)
    render(console, response)


def shape_text(request: FleetPlanRequest) -> str:
    """The request shape and user model the plan used (its answer's first line)."""
    from servecap.app.defaults import lengths_text
    from servecap.workload import dist_mean

    w = request.traffic.workload
    t = request.traffic
    if w is not None and w.tenants is None and w.arrival is not None and w.arrival.kind == "trace":
        a = w.arrival
        return (
            f"request shape: the trace's own lengths; users: the trace's arrivals ({a.path}, time scale "
            f"{a.time_scale:g}, from {a.start_s:g} s" + ("" if a.end_s is None else f" to {a.end_s:g} s") + ")"
        )
    users = (
        f"one request every {t.request_interval_s:g} s each, as an open loop (Poisson arrivals at "
        f"{t.peak_users:,} / {t.request_interval_s:g} s, whatever the answers' times)"
        if t.peak_users is not None
        else "an open loop at the peak rate"
    )
    if w is None or w.prompt_tokens is None or w.output_tokens is None:
        from servecap.app import defaults

        return (
            f"request shape: {lengths_text(defaults.PROMPT_TOKENS, defaults.OUTPUT_TOKENS, None, None)}; users: {users}"
        )

    def sigma(d: Any) -> float | None:
        return getattr(d, "sigma", None)

    def typical(d: Any) -> float:
        median = getattr(d, "median", None)
        return float(median) if median is not None else dist_mean(d)

    return (
        "request shape: "
        + lengths_text(
            typical(w.prompt_tokens), typical(w.output_tokens), sigma(w.prompt_tokens), sigma(w.output_tokens)
        )
        + f"; users: {users}"
    )


def render(console: Console, r: FleetPlanResponse) -> None:
    from rich.table import Table

    from servecap.cli.console import print_table

    for line in summary_lines(r):
        console.print(line, highlight=False)
    cand = Table(title="candidates (peak window, fixed fleet)", title_justify="left")
    for col in ("candidate", "closed form", "simulated", "$/month", "req/s per replica", "users/GPU", "sims"):
        cand.add_column(col, justify="right")
    for o in r.candidates:
        cand.add_row(
            o.name,
            "-"
            if o.note.startswith("ruled out")
            else f"{o.closed_form_replicas} ({o.closed_form_req_s_per_replica:,.2f} req/s each)",
            replicas_cell(o),
            "-" if o.usd_per_month is None else f"${o.usd_per_month:,.0f}",
            "-" if o.req_s_per_replica is None else f"{o.req_s_per_replica:,.2f}",
            "-"
            if o.users_per_gpu is None
            else f"{o.users_per_gpu:,.0f} ({o.closed_form_users_per_gpu:,.0f} closed form)",
            str(o.simulations),
        )
    print_table(console, cand)
    for o in r.candidates:
        if o.note.startswith("ruled out"):
            console.print(f"{o.name}: {o.note}", highlight=False)
    lev = Table(title="levers (each re-simulated)", title_justify="left")
    for col in lever_header(r):
        lev.add_column(col, justify="right")
    for row in lever_rows(r):
        lev.add_row(*row)
    print_table(console, lev)
    for line in lever_notes(r.levers):
        console.print(line, highlight=False)
    for s in r.levers_skipped:
        console.print(f"[dim]lever left out: {s}[/]", highlight=False)
    for s in r.story:
        console.print(f"[dim]why: {s}[/]", highlight=False)
    for n in r.notes:
        console.print(f"[dim]note: {n}[/]", highlight=False)
