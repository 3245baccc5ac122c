"""``servecap fleet plan``: the cheapest fleet that meets percentile SLOs, found by simulation."""

from __future__ import annotations

import html as html_lib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from servecap.cli.numbers import FINITE
from servecap.cli.options import PATH, json_option, slo_options
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS

if TYPE_CHECKING:
    from rich.console import Console

    from servecap.app.fleet_plan import CandidateOut, FleetEval, FleetPlanResponse


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return "failed" if x >= 1e8 else f"{x * 1e3:,.0f}"


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
    help="Mean seconds between a user's requests (reading, typing, the answer; default 30).",
)
@click.option("--workload", type=PATH, default=None, help="Workload file: lengths, tenants/classes, a daily curve.")
@click.option(
    "--prompt-tokens",
    "-p",
    type=click.INT,
    default=None,
    help="Prompt tokens (median with --prompt-sigma; default 1024).",
)
@click.option(
    "--output-tokens",
    "-o",
    type=click.INT,
    default=None,
    help="Output tokens (median with --output-sigma; default 128).",
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
    help="The overflow lever's smaller model (default Llama-3.1-8B; skipped when not smaller).",
)
@click.option(
    "--cache-hit-rate",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=None,
    help="The response-cache lever's hit rate (default 0.2: measure yours, e.g. repeated prompts).",
)
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Random seed (default 0).")
@click.option(
    "--executor",
    type=click.Choice(["auto", "serial", "process", "ray"]),
    default="auto",
    help="Where the simulations run: auto (a process pool on more than one core for big windows), "
    "serial, process, ray. The answer is the same.",
)
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Parallel simulations (default: the cores).")
@click.option("--ray-address", type=click.STRING, default=None, help="Join a Ray cluster (auto or ray://host:port).")
@click.option("--html", "html_path", type=PATH, default=None, help="Write an HTML page of the plan.")
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
    output_tokens: int | None,
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
    seed: int | None,
    executor: str,
    workers: int | None,
    ray_address: str | None,
    html_path: Path | None,
    as_json: bool,
) -> None:
    """Find the cheapest fleet that meets percentile SLOs: replicas per candidate pool from the
    closed form, then bisection with the fleet simulator on the peak window; autoscaler settings
    for a daily curve; a lever table, each lever re-simulated."""

    from servecap.app.fleet_plan import load_plan_file, plan_request_from_dict
    from servecap.app.fleet_planner import fleet_plan
    from servecap.errors import ServecapError

    raw: dict[str, Any] = load_plan_file(plan_file) if plan_file is not None else {}
    if model is not None:
        raw["model"] = model
    if gpus:
        cand: dict[str, Any] = {"kv_cache_dtype": kv_cache_dtype}
        for k, v in (("tp", tp), ("weights_dtype", weights_dtype), ("max_model_len", max_model_len)):
            if v is not None:
                cand[k] = v
        raw["candidates"] = [{"gpu": g, **cand} for g in gpus]
    elif plan_file is None:
        raise ServecapError("gpu", None, "give at least one candidate GPU (-g H100 -g H200) or --plan FILE")
    traffic: dict[str, Any] = dict(raw.get("traffic") or {})
    flags: tuple[tuple[str, float | None], ...] = (
        ("peak_rps", peak_rps),
        ("peak_users", peak_users),
        ("request_interval_s", request_interval_s),
    )
    for key, amount in flags:
        if amount is not None:
            traffic[key] = amount
    if peak_rps is not None:
        traffic.pop("peak_users", None)
    if peak_users is not None:
        traffic.pop("peak_rps", None)
    if workload is not None:
        from servecap.workload import load_workload

        traffic["workload"] = load_workload(workload).model_dump(mode="json", by_alias=True, exclude_none=True)
    lengths = (prompt_tokens, output_tokens, prompt_sigma, output_sigma)
    if any(v is not None for v in lengths):
        traffic["workload"] = _with_lengths(dict(traffic.get("workload") or {}), *lengths)
    raw["traffic"] = traffic
    slo = dict(raw.get("slo") or {})
    for metric, secs, ms in (("ttft_s", slo_ttft_p99_s, ttft_slo_ms), ("tpot_s", slo_tpot_p99_s, tpot_slo_ms)):
        if secs is not None and ms is not None:
            raise ServecapError(
                f"slo.{metric}", secs, f"give --slo-{metric[:4]}-p99-s or --{metric[:4]}-slo-ms, not both"
            )
        value = secs if secs is not None else (ms / 1e3 if ms is not None else None)
        if value is not None:
            slo[metric] = {"p99": value}
    if slo:
        raw["slo"] = slo
    if router is not None:
        raw["router"] = router
    if levers is not None:
        names = [x.strip() for x in levers.split(",") if x.strip()]
        raw["levers"] = [] if names == ["none"] else names  # `--levers none`: no lever table
    if seed is not None:
        raw["seed"] = seed
    if small_model is not None:
        raw["small_model"] = small_model
    if cache_hit_rate is not None:
        raw["cache_hit_rate"] = cache_hit_rate
    request = plan_request_from_dict(raw)
    from servecap.cli.console import make_console, progress_reporter

    # stage progress on stderr: a bar on a terminal, a line every 5 s off one (it was silent)
    with progress_reporter(make_console(stderr=True)) as progress:
        response = fleet_plan(request, progress, executor=executor, workers=workers, ray_address=ray_address)
    if html_path is not None:
        html_path.write_text(plan_html(response), encoding="utf-8")
    if as_json:
        click.echo(response.model_dump_json())
        return
    console = make_console()
    console.print(shape_text(request), highlight=False)
    render(console, response)


def shape_text(request: Any) -> str:
    """The request shape and user model the plan used (its answer's first line)."""
    from servecap.app.defaults import lengths_text
    from servecap.workload import dist_mean

    w = request.traffic.workload
    t = request.traffic
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
            dist_mean(w.prompt_tokens), dist_mean(w.output_tokens), sigma(w.prompt_tokens), sigma(w.output_tokens)
        )
        + f"; users: {users}"
    )


def _with_lengths(
    workload: dict[str, Any],
    prompt: int | None,
    output: int | None,
    prompt_sigma: float | None,
    output_sigma: float | None,
) -> dict[str, Any]:
    """The traffic's workload with the length flags applied (the defaults of app/defaults.py for a
    length not given): fixed lengths, or log-normal with the given medians and sigmas."""
    from servecap.app import defaults
    from servecap.app.fleet_plan import DEFAULT_WORKLOAD
    from servecap.errors import ServecapError

    for name, n in (("prompt_tokens", prompt), ("output_tokens", output)):
        if n is not None and n < 1:
            raise ServecapError(name, n, "must be >= 1")
    # no workload given: the default one, as fleet plan builds it (a steady open loop at the peak)
    base = workload or {**DEFAULT_WORKLOAD, "arrival": {"kind": "poisson", "rate_per_s": 1.0}, "duration_s": 600}
    for key, n, sigma, default in (
        ("prompt_tokens", prompt, prompt_sigma, defaults.PROMPT_TOKENS),
        ("output_tokens", output, output_sigma, defaults.OUTPUT_TOKENS),
    ):
        if n is None and sigma is None:
            continue
        value = n if n is not None else default
        base[key] = (
            {"kind": "lognormal", "median": value, "sigma": sigma} if sigma else {"kind": "fixed", "value": value}
        )
    return base


def _replicas_cell(o: CandidateOut) -> str:
    if o.replicas is not None:
        return str(o.replicas)
    if o.note and o.best is not None:
        return f"> {o.best.replicas} (costs more)"
    return "> 0 (costs more)" if o.note else "none meets"


def evidence_line(label: str, ev: FleetEval, *, fixed: bool = True) -> str:
    verdict = "meets" if ev.slo_met else "fails"
    failed = f"; fails {', '.join(ev.failed_targets)}" if ev.failed_targets else ""
    who = f"{ev.candidate} x {ev.replicas}" if fixed else f"{ev.candidate} (autoscaled)"
    cost = f", ${ev.usd_per_month:,.0f}/month" if fixed else ""
    return (
        f"{label}: {who} {verdict} the SLOs — {ev.attainment:.1%} of requests within "
        f"their class's targets, p99 TTFT {_ms(ev.ttft_p99_s)} ms, p99 TPOT {_ms(ev.tpot_p99_s)} ms{cost}{failed}"
    )


def interval_cells(r: FleetPlanResponse) -> tuple[str, str] | None:
    """The chosen fleet's 80% intervals as table cells, ``("6–9", "$9,198–$13,797")``, or None
    when the plan carries none (``--json``'s ``interval``)."""
    n, usd = r.interval.get("replicas"), r.interval.get("usd_per_month")
    if n is None or usd is None:
        return None
    return f"{n['low']:,.0f}–{n['high']:,.0f}", f"${usd['low']:,.0f}–${usd['high']:,.0f}"


def interval_line(r: FleetPlanResponse) -> str | None:
    """The chosen fleet's intervals in a line: count, rent and what they come from."""
    cells = interval_cells(r)
    if cells is None:
        return None
    iv = r.interval["replicas"]
    return (
        f"{iv['level']:.0%} interval: {cells[0]} replicas, {cells[1]}/month "
        f"(the throughput interval of {iv['count']} corpus values of {iv['basis']}, carried to the count)"
    )


def summary_lines(r: FleetPlanResponse) -> list[str]:
    """The answer in a few plain lines (the docs' worked example prints these)."""
    c = r.chosen
    users = f" ({r.peak_users:,} users, one request each per {r.request_interval_s:g} s)" if r.peak_users else ""
    lines = [
        f"traffic: peak {r.peak_rps:,.2f} req/s{users}; {'a daily curve' if r.daily_curve else 'steady'}",
        "SLOs: " + "; ".join(r.slo),
        f"peak window: {r.window['warmup_s']:,.0f} s warm-up + {r.window['duration_s'] - r.window['warmup_s']:,.0f} s "
        f"scored ({r.window['scored_requests']:,.0f} requests: >= {r.window['tail_samples']:,.0f} beyond each "
        "class's strictest percentile)",
        f"cheapest fleet: {c.replicas} x {c.name} ({c.gpus_per_replica} GPU per replica, {c.model}), "
        f"${c.usd_per_month or 0:,.0f}/month fixed at the peak ({c.price_per_gpu_hour:.2f} $/GPU-hour x 730 h)",
        evidence_line("chosen", r.fleet),
    ]
    iv_line = interval_line(r)
    if iv_line is not None:
        lines.insert(-1, iv_line)
    if r.next_cheaper is not None:
        lines.append(evidence_line("one fewer", r.next_cheaper))
    lines.append(evidence_line("verified (second seed)", r.verify))
    a = r.autoscaler
    if a is not None:
        lines.append(
            f"autoscaler: {a.preset} on {a.signal} target {a.target:g} every {a.interval_s:g} s, min {a.min_replicas}, "
            f"max {a.max_replicas}; scale ahead {a.scale_ahead_lead_s:,.0f} s early at "
            f"{a.scale_ahead_req_s_per_replica:,.2f} req/s per replica x {a.scale_ahead_headroom:g}; "
            f"~${a.usd_per_month:,.0f}/month over the day"
        )
        lines.append(
            f"steepest ramp {a.ramp_start_s / 3600:,.2f} h to {a.ramp_end_s / 3600:,.2f} h "
            f"({a.ramp_rate_from_req_s:,.1f} -> {a.ramp_rate_to_req_s:,.1f} req/s): "
            + evidence_line("ramp", a.ramp, fixed=False).removeprefix("ramp: ")
        )
    lines.append(f"simulations: {r.simulations}")
    return lines


def lever_rows(r: FleetPlanResponse) -> list[tuple[str, str, str, str, str, str, str]]:
    rows = []
    c = r.chosen
    cells = interval_cells(r)
    level = f"{r.interval['replicas']['level']:.0%}" if cells else ""
    n_iv, usd_iv = (f" ({level} {cells[0]})", f" ({level} {cells[1]})") if cells else ("", "")
    rows.append(
        (
            "chosen",
            f"{r.router} routing, {c.name}",
            f"{c.replicas}{n_iv}"
            if r.autoscaler is None
            else f"{c.replicas}{n_iv} at the peak ({r.autoscaler.min_replicas}-{r.autoscaler.max_replicas} autoscaled)",
            f"${c.usd_per_month or 0:,.0f}{usd_iv}",
            _ms(r.fleet.ttft_p99_s),
            _ms(r.fleet.tpot_p99_s),
            "yes" if r.fleet.slo_met else "no",
        )
    )
    a = r.autoscaler
    for lv in r.levers:
        ramp = lv.name in ("scale-ahead", "warm-pool") and a is not None
        rows.append(
            (
                lv.name,
                lv.change,
                f"{a.min_replicas}-{a.max_replicas}"
                if ramp and a is not None
                else ("-" if lv.replicas is None else str(lv.replicas)),
                "-" if lv.usd_per_month is None else f"${lv.usd_per_month:,.0f}",
                _ms(lv.ttft_p99_s),
                _ms(lv.tpot_p99_s),
                "yes" if lv.slo_met else "no",
            )
        )
    return rows


LEVER_HEADER = ("lever", "change", "replicas", "$/month", "p99 TTFT (ms)", "p99 TPOT (ms)", "SLO met")


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
            f"{o.closed_form_replicas} ({o.closed_form_req_s_per_replica:,.2f} req/s each)",
            _replicas_cell(o),
            "-" if o.usd_per_month is None else f"${o.usd_per_month:,.0f}",
            "-" if o.req_s_per_replica is None else f"{o.req_s_per_replica:,.2f}",
            "-"
            if o.users_per_gpu is None
            else f"{o.users_per_gpu:,.0f} ({o.closed_form_users_per_gpu:,.0f} closed form)",
            str(o.simulations),
        )
    print_table(console, cand)
    lev = Table(title="levers (each re-simulated)", title_justify="left")
    for col in LEVER_HEADER:
        lev.add_column(col, justify="right")
    for row in lever_rows(r):
        lev.add_row(*row)
    print_table(console, lev)
    for lv in r.levers:
        if lv.name.startswith("split") and lv.note:
            console.print(f"{lv.name}: {lv.note}", highlight=False)
    for s in r.levers_skipped:
        console.print(f"[dim]lever left out: {s}[/]", highlight=False)
    for s in r.story:
        console.print(f"[dim]why: {s}[/]", highlight=False)
    for n in r.notes:
        console.print(f"[dim]note: {n}[/]", highlight=False)


def plan_html(r: FleetPlanResponse) -> str:
    """One offline page: the answer, the candidates and the lever table."""
    esc = html_lib.escape

    def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
        head = "".join(f"<th>{esc(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    cands = [
        (
            o.name,
            str(o.closed_form_replicas),
            _replicas_cell(o),
            "-" if o.usd_per_month is None else f"${o.usd_per_month:,.0f}",
            str(o.simulations),
        )
        for o in r.candidates
    ]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>servecap fleet plan</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style></head><body>",
        f"<h1>servecap fleet plan: {esc(r.model)}</h1>",
        "".join(f"<p>{esc(line)}</p>" for line in summary_lines(r)),
        "<h2>Candidates (peak window, fixed fleet)</h2>",
        table(("candidate", "closed-form replicas", "simulated replicas", "$/month", "simulations"), cands),
        "<h2>Levers (each re-simulated)</h2>",
        table(LEVER_HEADER, [tuple(x) for x in lever_rows(r)]),
        "".join(f"<p>{esc(lv.name)}: {esc(lv.note)}</p>" for lv in r.levers if lv.name.startswith("split") and lv.note),
        "".join(f"<p><small>lever left out: {esc(s)}</small></p>" for s in r.levers_skipped),
        "".join(f"<p><small>why: {esc(s)}</small></p>" for s in r.story),
        "</body></html>",
    ]
    return "\n".join(parts)


DOC_BEGIN = "<!-- fleet-plan-example:begin (scripts/fleet_plan_example.py writes this block) -->"
DOC_END = "<!-- fleet-plan-example:end -->"


def markdown_block(r: FleetPlanResponse) -> str:
    """The worked example's block in docs/fleet.md: the answer, the candidates, the levers."""
    out = [DOC_BEGIN, "", "```"]
    out.extend(summary_lines(r))
    out += ["```", "", "| candidate | closed-form replicas | simulated replicas | $/month | users/GPU | simulations |"]
    out.append("|---|---|---|---|---|---|")
    for o in r.candidates:
        users = (
            "-"
            if o.users_per_gpu is None
            else f"{o.users_per_gpu:,.0f} ({o.closed_form_users_per_gpu:,.0f} closed form)"
        )
        out.append(
            f"| {o.name} | {o.closed_form_replicas} | {_replicas_cell(o)} | "
            f"{'-' if o.usd_per_month is None else f'${o.usd_per_month:,.0f}'} | {users} | {o.simulations} |"
        )
    out += ["", "| " + " | ".join(LEVER_HEADER) + " |", "|" + "---|" * len(LEVER_HEADER)]
    out.extend("| " + " | ".join(row) + " |" for row in lever_rows(r))
    notes = [f"- {lv.name}: {lv.note}" for lv in r.levers if lv.name.startswith("split") and lv.note]
    if notes:
        out.append("")
        out.extend(notes)
    if r.levers_skipped:
        out.append("")
        out.extend(f"- left out: {s}" for s in r.levers_skipped)
    out += ["", DOC_END]
    return "\n".join(out)
