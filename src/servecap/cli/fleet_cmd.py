"""``servecap fleet simulate``: replicas behind a router and an autoscaler, by simulation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from servecap.app.fleet_flags import MIN_REPLICAS_DEFAULT, FleetFlags, choices_of, fleet_from_flags
from servecap.cli.numbers import FINITE, FiniteRange
from servecap.cli.options import (
    OUT_PATH,
    PATH,
    DeploymentFlags,
    StreamFlags,
    db_option,
    deployment_options,
    json_option,
    slo_options,
    stack,
    think_time_option,
)
from servecap.cli.simulate_cmd import html_option, stream_options, workload_option
from servecap.cli.trace_options import pop_trace, trace_options
from servecap.core.kv_tier_settings import CPU_HELP, LOAD_HELP, REMOTE_HELP, SSD_HELP, STORE_HELP
from servecap.fleet.file_schema import KvLinkModel
from servecap.policy.autoscalers import PRESETS
from servecap.policy.pd_router import PD_PRESETS
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS

if TYPE_CHECKING:
    from rich.console import Console

    from servecap.app.fleet_simulate import FleetSimulateResponse
    from servecap.fleet.file_schema import FleetFile
    from servecap.fleet.pd.stats import PdStats
    from servecap.progress import Progress
    from servecap.workload import WorkloadSpec


@click.group("fleet")
def fleet_group() -> None:
    """Simulate a fleet of replicas behind a router and an autoscaler."""


# --cpu-kv-gib ... --kv-load: KV tiers on every pool (docs/kv-tiers.md); ranges as the pool fields'
fleet_kv_tier_options = stack(
    click.option("--cpu-kv-gib", type=FINITE, default=None, help=CPU_HELP),
    click.option("--ssd-kv-gib", type=FINITE, default=None, help=SSD_HELP),
    click.option("--remote-kv-tib", type=FINITE, default=None, help=REMOTE_HELP),
    click.option("--kv-load", type=click.Choice(["layerwise", "blocking", "async"]), default=None, help=LOAD_HELP),
    click.option("--kv-store", type=click.Choice(["on-evict", "on-compute"]), default=None, help=STORE_HELP),
)


@fleet_group.command("simulate")
@click.option("--fleet", "fleet_file", type=PATH, default=None, help="Fleet file (YAML/JSON; see docs/fleet.md).")
@deployment_options
@click.option("--replicas", type=click.IntRange(min=1), default=None, help="Replicas (fixed; default 1).")
@click.option(
    "--autoscaler",
    type=click.Choice(list(PRESETS)),
    default=None,
    help="Autoscale between --min-replicas and --max-replicas with this preset (its policy and defaults).",
)
@click.option(
    "--min-replicas",
    type=click.IntRange(min=0),
    default=None,
    help=f"Autoscaler minimum (default {MIN_REPLICAS_DEFAULT}).",
)
@click.option("--max-replicas", type=click.IntRange(min=1), default=None, help="Autoscaler maximum.")
@click.option(
    "--cold-start",
    type=click.Choice(choices_of(FleetFlags, "cold_start")),
    default=FleetFlags.model_fields["cold_start"].default,
    help="Cold-start model of new replicas (docs/fleet.md).",
)
@click.option(
    "--price-per-gpu-hour",
    type=FiniteRange(min=0),
    default=None,
    help="$ per GPU-hour (default: the GPU catalog's rent price).",
)
@click.option(
    "--router", type=click.Choice(list(ROUTERS)), default=None, help=f"Routing policy (default {DEFAULT_ROUTER})."
)
@click.option(
    "--scrape-interval-ms",
    type=FiniteRange(min=0),
    default=None,
    help="The router reads replica gauges as last scraped this often (0: exact).",
)
@click.option(
    "--prefill-replicas",
    type=click.IntRange(min=1),
    default=None,
    help="Disaggregated: this many prefill replicas (with --decode-replicas; docs/fleet.md).",
)
@click.option("--decode-replicas", type=click.IntRange(min=1), default=None, help="Disaggregated: decode replicas.")
@click.option(
    "--decode-tp",
    type=click.IntRange(min=1),
    default=None,
    help="Disaggregated: the decode replicas' TP (default --tp).",
)
@click.option(
    "--kv-link",
    type=click.Choice(choices_of(FleetFlags, "kv_link")),
    default=None,
    help=f"Disaggregated: the link KV crosses (default {KvLinkModel.model_fields['kind'].default}).",
)
@click.option(
    "--kv-via",
    type=click.Choice(["direct", "store"]),
    default=None,
    help="Disaggregated: the decode side pulls the prefill's KV (direct, the default) or gets it from the "
    "pools' shared remote KV store (store: needs --remote-kv-tib; the prefill puts only the blocks it lacks).",
)
@click.option(
    "--pd-router",
    type=click.Choice(sorted(PD_PRESETS)),
    default=None,
    help="Disaggregated: the prefill and decode policies (default llm-d: prefix-affinity / least-kv).",
)
@fleet_kv_tier_options
@workload_option
@trace_options
@click.option("--rate", "-r", type=FINITE, default=None, help="Open loop: requests per second.")
@click.option("--users", "-u", type=click.INT, default=None, help="Closed loop: number of chat users.")
@think_time_option
@stream_options
@slo_options(None, None, "for goodput and SLO attainment")
@click.option(
    "--exact",
    "percentiles",
    flag_value="exact",
    default=None,
    help="Keep every request: exact percentiles at any size (memory grows with the requests).",
)
@click.option(
    "--sketch",
    "percentiles",
    flag_value="sketch",
    help="Stream outcomes into mergeable sketches (bounded memory, percentiles within 1%) at any size. "
    "Default: exact up to 1,000,000 requests, sketches above.",
)
@click.option(
    "--records",
    type=OUT_PATH,
    default=None,
    help="Stream every request's record to this Parquet file (needs pyarrow: servecap[records]).",
)
@click.option("--save", is_flag=True, help="Store the run: summary and sketches (or every record when exact).")
@click.option(
    "--fidelity",
    type=click.Choice(["full", "cache-replay"]),
    default="full",
    show_default=True,
    help="full: the discrete-event simulation. cache-replay: a Mooncake block-hash --trace streamed through "
    "each replica's prefix cache, the router and admission (exact), latencies from the step model at "
    "admission; millions of requests in bounded memory; one pool, no tiers, autoscaling or P/D "
    "(docs/simulator.md).",
)
@db_option
@html_option
@json_option
def fleet_simulate_command(
    fleet_file: Path | None,
    deployment: DeploymentFlags,
    replicas: int | None,
    autoscaler: str | None,
    min_replicas: int | None,
    max_replicas: int | None,
    cold_start: Literal["default", "instant"],
    price_per_gpu_hour: float | None,
    router: str | None,
    scrape_interval_ms: float | None,
    prefill_replicas: int | None,
    decode_replicas: int | None,
    decode_tp: int | None,
    kv_link: Literal["nvlink", "infiniband", "roce", "tcp"] | None,
    kv_via: Literal["direct", "store"] | None,
    pd_router: str | None,
    cpu_kv_gib: float | None,
    ssd_kv_gib: float | None,
    remote_kv_tib: float | None,
    kv_load: Literal["layerwise", "blocking", "async"] | None,
    kv_store: Literal["on-evict", "on-compute"] | None,
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
    percentiles: str | None,
    records: Path | None,
    save: bool,
    fidelity: Literal["full", "cache-replay"],
    db: Path | None,
    html: Path | None,
    as_json: bool,
    **trace_flags: object,
) -> None:
    """Simulate a fleet: per-request latency percentiles, SLO attainment, outcomes, per-replica
    utilisation, replicas and queue over time, GPU-hours and cost."""

    from servecap.app.flags import LoadFlags
    from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
    from servecap.app.request_fields import validated
    from servecap.app.simulate import workload_from_options

    flags = validated(
        FleetFlags,
        dict(
            fleet_file=fleet_file,
            deployment=deployment,
            replicas=replicas,
            autoscaler=autoscaler,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            cold_start=cold_start,
            price_per_gpu_hour=price_per_gpu_hour,
            router=router,
            scrape_interval_ms=scrape_interval_ms,
            prefill_replicas=prefill_replicas,
            decode_replicas=decode_replicas,
            decode_tp=decode_tp,
            kv_link=kv_link,
            kv_via=kv_via,
            pd_router=pd_router,
            ttft_slo_ms=ttft_slo_ms,
            tpot_slo_ms=tpot_slo_ms,
            cpu_kv_gib=cpu_kv_gib,
            ssd_kv_gib=ssd_kv_gib,
            remote_kv_tib=remote_kv_tib,
            kv_load=kv_load,
            kv_store=kv_store,
        ),
    )
    ff, base_dir = fleet_from_flags(flags)
    if fidelity == "cache-replay":
        refused: dict[str, object] = {
            "--workload": workload,
            "--rate": rate,
            "--users": users,
            "--think-time-s": think_time_s,
            "--duration-s": duration_s,
            "--num-requests": num_requests,
            "--exact/--sketch": percentiles,
            "--records": records,
            "--save": save or None,
            "--html": html,
        }
        _cache_replay(ff, base_dir, pop_trace(trace_flags), refused, as_json)
        return
    load = LoadFlags(
        rate=rate, users=users, think_time_s=think_time_s, duration_s=duration_s, num_requests=num_requests
    )
    spec = workload_from_options(load, stream, workload=workload, trace=pop_trace(trace_flags))
    mode: Literal["auto", "exact", "sketch"] = (
        "exact" if percentiles == "exact" else "sketch" if percentiles else "auto"
    )
    request = FleetSimulateRequest(fleet=ff, workload=spec, seed=seed, percentiles=mode)
    if save:  # a store the run could not be saved into is refused before it runs
        from servecap.results.store import RunStore

        RunStore(db).check_writable()
    from servecap.cli.console import make_console, progress_reporter

    # the run's header on stderr once it starts (a fleet file refused before it runs prints only
    # its error), then its progress (a bar on a terminal, a line every 5 s off one)
    err = make_console(stderr=True)
    header = [fleet_header(ff, spec, seed)]

    def say_header() -> None:
        if header:
            err.print(header.pop(), highlight=False)

    with progress_reporter(err) as progress:

        def started(event: Progress) -> None:
            say_header()
            progress(event)

        response, res = fleet_simulate(request, base_dir=base_dir, records=records, progress=started)
    say_header()
    router_name = fleet_router_name(ff)
    if save:
        from servecap.results.store import RunStore, new_run_id

        run_id = RunStore(db).save_simulated(
            run_id=new_run_id(),
            model=", ".join(p.model for p in ff.pools),
            mode="fleet",
            settings={"fleet": ff.model_dump(mode="json"), "seed": seed, "records": response.records_path},
            records=[] if res.sketches is not None else res.records(),
            summary=res.summary,
            sketches=None if res.sketches is None else res.sketches.to_dict(),
        )
        response = response.model_copy(update={"notes": [*response.notes, f"stored as run {run_id}"]})
    if html is not None:
        from servecap.report.fleet_html import fleet_html

        names = ", ".join(f"{p.name} ({p.model} on {p.gpu})" for p in ff.pools)
        page = fleet_html(f"servecap fleet simulate: {names}, {router_name} router", res, response.notes)
        from servecap.outputs import write_text

        write_text(html, page, "--html")
    if res.records_error is not None:  # the run is stored; the records file is not whole
        raise res.records_error
    if as_json:
        click.echo(response.model_dump_json())
        return

    _render(make_console(), response, router_name)


def _cache_replay(
    ff: FleetFile, base_dir: Path | None, trace: object, refused: dict[str, object], as_json: bool
) -> None:
    """``--fidelity cache-replay``: the trace streamed through the cache replay (app/cache_replay.py)."""
    from servecap.app.cache_replay import fleet_cache_replay, fleet_cache_replay_refusal
    from servecap.cli.console import make_console, progress_reporter
    from servecap.workload.spec_parts import TraceArrival

    given = trace if isinstance(trace, TraceArrival) else None
    refusal = fleet_cache_replay_refusal(ff, given, unread=refused, base_dir=base_dir)
    if refusal is not None:
        raise refusal
    assert given is not None
    err = make_console(stderr=True)
    with progress_reporter(err) as progress:
        r = fleet_cache_replay(ff, given, base_dir=base_dir, progress=progress)
    if as_json:
        click.echo(r.model_dump_json())
        return
    from rich.table import Table

    console = make_console()
    rate = "-" if r.prefix_cache_hit_rate is None else f"{100 * r.prefix_cache_hit_rate:.1f}%"
    console.print(
        f"cache replay: {r.requests:,} requests on {r.replicas} replicas ({r.router} router) over "
        f"{r.horizon_s:,.1f} s; prefix cache hit rate {rate} of {r.prefix_cache_query_tokens:,} prompt tokens",
        highlight=False,
    )
    table = Table(title="latency (ms)")
    for col in ("", "p50", "p90", "p99", "mean", "max"):
        table.add_column(col, justify="right")
    for name, d in (("TTFT", r.ttft_s), ("TPOT", r.tpot_s), ("E2E", r.e2e_s)):
        table.add_row(
            name,
            *("-" if d[k] is None else f"{1000 * float(d[k] or 0):,.1f}" for k in ("p50", "p90", "p99", "mean", "max")),
        )
    console.print(table)
    if r.kv_tiers is not None:  # the full simulation's "KV tier hits (of prompt tokens)" row
        shares = ", ".join(
            f"{name} {d['fraction']:.1%}" if d["fraction"] is not None else f"{name} -"
            for name, d in r.kv_tiers.items()
            if isinstance(d, dict)
        )
        console.print(f"KV tier hits (of prompt tokens): {shares}", highlight=False)
    served = r.requests_per_replica
    console.print(f"requests per replica: min {min(served):,}, max {max(served):,}", highlight=False)
    for note in r.notes:
        console.print(f"note: {note}", highlight=False)


def _add_plan_command() -> None:
    from servecap.cli.fleet_plan_cmd import fleet_plan_command

    fleet_group.add_command(fleet_plan_command)


_add_plan_command()


def _render_pd(console: Console, pd: PdStats) -> None:
    """A disaggregated fleet's hand-off: per-role times, the transfers, the busiest link."""
    from rich.table import Table

    from servecap.fleet.pd.stats import pd_rows

    tab = Table(show_header=False, title="disaggregated prefill/decode", title_justify="left")
    tab.add_column("what")
    tab.add_column("value", justify="right")
    for k, v in pd_rows(pd):
        tab.add_row(k, v)
    console.print(tab)


def _render_gateway(console: Console, r: FleetSimulateResponse) -> None:
    """The gateway's outcome per tenant (each request has one) and its decisions."""
    from rich.table import Table

    from servecap.cli.console import print_table
    from servecap.fleet.gateway_outcomes import DECISIONS, OUTCOMES

    g = r.gateway
    assert g is not None
    tenants = list(g.arrivals_by_tenant)
    used = [o for o in OUTCOMES if any(g.outcomes_by_tenant.get(t, {}).get(o) for t in tenants)]
    made = [d for d in DECISIONS if any(g.decisions_by_tenant.get(t, {}).get(d) for t in tenants)]
    tab = Table(title="gateway: one outcome per request, by tenant", title_justify="left")
    for c in ("tenant", "arrivals", *(o.replace("_", " ") for o in used), *(d.replace("_", " ") for d in made)):
        tab.add_column(c, justify="right")
    for t in tenants:
        out = g.outcomes_by_tenant.get(t, {})
        dec = g.decisions_by_tenant.get(t, {})
        tab.add_row(
            t,
            f"{g.arrivals_by_tenant[t]:,}",
            *(f"{out.get(o, 0):,}" for o in used),
            *(f"{dec.get(d, 0):,}" for d in made),
        )
    print_table(console, tab)
    served = g.served_summary
    if served is not None:
        ttft, tpot = served.ttft_s.p99, served.tpot_s.p99
        console.print(
            f"served by a pool (cache hits apart): {served.num_requests:,} requests, TTFT p99 "
            + ("-" if ttft is None else f"{ttft * 1e3:,.1f} ms")
            + ", TPOT p99 "
            + ("-" if tpot is None else f"{tpot * 1e3:,.1f} ms")
        )
    for name, n in g.provider_requests.items():
        console.print(f"external provider {name}: {n:,} requests")
    if g.provider_requests:
        console.print(f"external providers' bill: ${g.provider_cost_usd:,.2f} (in the cost below)")


def _render(console: Console, r: FleetSimulateResponse, router: str) -> None:
    from rich.table import Table

    from servecap.cli.console import print_table

    lat = Table(title=f"fleet latency ({router})", title_justify="left")
    lat.add_column("latency (ms)")
    for q in ("p50", "p90", "p95", "p99", "mean"):
        lat.add_column(q, justify="right")
    s = r.summary
    for p, label in (
        (s.ttft_s, "TTFT"),
        (s.tpot_s, "TPOT"),
        (s.itl_s, "ITL"),
        (s.e2e_s, "E2E"),
        (s.queue_time_s, "queue"),
    ):
        lat.add_row(label, *("-" if v is None else f"{v * 1e3:,.1f}" for v in (p.p50, p.p90, p.p95, p.p99, p.mean)))
    print_table(console, lat)
    groups = [("tenant", k, v) for k, v in r.by_tenant.items()] + [("class", k, v) for k, v in r.by_class.items()]
    if groups:
        per = Table(title="per tenant and class", title_justify="left")
        for c in ("", "name", "requests", "TTFT p50 (ms)", "TTFT p99 (ms)", "TPOT p99 (ms)", "SLO attainment"):
            per.add_column(c, justify="right")
        for kind, name, d in groups:
            att = d.slo_attainment
            per.add_row(
                kind,
                name,
                f"{d.num_requests:,}",
                *("-" if v is None else f"{v * 1e3:,.1f}" for v in (d.ttft_s.p50, d.ttft_s.p99, d.tpot_s.p99)),
                "-" if att is None else f"{att:.1%}",
            )
        print_table(console, per)
    if r.slo_by_class:
        slo = Table(title="per-class SLO targets", title_justify="left")
        for c in ("class", "target", "observed (ms)", "within", "met"):
            slo.add_column(c, justify="right")
        for row in r.slo_by_class:
            obs = row["observed_s"]
            slo.add_row(
                row["group"],
                row["target"],
                "failed requests" if obs is None else f"{obs * 1e3:,.1f}",
                f"{row['share_within']:.1%}",
                "yes" if row["met"] else "no",
            )
        print_table(console, slo)
    if r.gateway is not None:
        _render_gateway(console, r)
    if r.pd is not None:
        _render_pd(console, r.pd)
    t = Table(show_header=False, title="outcomes and cost", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    att = s.slo_attainment
    hit = s.prefix_cache_hit_rate
    rows = [
        ("outcomes", ", ".join(f"{k} {v:,}" for k, v in r.outcomes.items())),
        ("throughput", f"{s.throughput_req_s:,.2f} req/s"),
        ("goodput (within SLOs)", "-" if s.goodput_req_s is None else f"{s.goodput_req_s:,.2f} req/s"),
        ("SLO attainment", "-" if att is None else f"{att:.1%}"),
        ("prefix cache hit rate", "-" if hit is None else f"{hit:.1%}"),
        ("replicas (peak ready)", f"{max(r.timeseries['ready'], default=0):,.0f}"),
        ("GPU-hours", f"{r.gpu_hours:,.3f}"),
        ("cost", f"${r.cost_usd:,.2f}"),
        ("$ per million tokens", "-" if r.usd_per_million_tokens is None else f"${r.usd_per_million_tokens:,.3f}"),
        ("simulated time", f"{r.horizon_s:,.1f} s"),
    ]
    if r.retried:
        rows.append(("retried after a crash", f"{r.retried:,}"))
    for k, v in rows:
        t.add_row(k, v)
    print_table(console, t)
    rep = Table(title="replicas", title_justify="left")
    # load against capacity, then "busy" (a request in flight): 100% busy at 5 of ~29 req/s is idle room
    for c in ("id", "pool", "state", "ready (s)", "routed", "load req/s (of capacity)", "busy", "prefix hits"):
        rep.add_column(c, justify="right")
    for x in r.replicas[:64]:
        rep.add_row(
            str(x.replica_id),
            x.pool,
            x.state,
            "-" if x.ready_s is None else f"{x.ready_s:,.1f}",
            f"{x.routed:,}",
            "-"
            if x.load_req_s is None
            else f"{x.load_req_s:,.2f}"
            + (f" (of ~{x.capacity_req_s:,.1f}, {x.load_req_s / x.capacity_req_s:.0%})" if x.capacity_req_s else ""),
            f"{x.utilization:.0%}",
            "-" if x.prefix_cache_hit_rate is None else f"{x.prefix_cache_hit_rate:.0%}",
        )
    print_table(console, rep)
    if len(r.replicas) > 64:
        console.print(f"[dim]... and {len(r.replicas) - 64} more replicas (--json lists all)[/]")
    method = s.percentiles
    if method.method == "sketch":
        console.print(
            f"[dim]percentiles from sketches (DDSketch), each within {method.relative_error or 0:.0%} "
            "of the exact value at its rank; counts, goodput and SLO attainment exact[/]"
        )
    if r.records_path is not None:
        console.print(f"[dim]every request's record: {r.records_path} (Parquet)[/]")
    for note in r.notes:
        console.print(f"[dim]note: {note}[/]")


def fleet_header(ff: FleetFile, spec: WorkloadSpec, seed: int) -> str:
    """The run in one line before it starts: pools (model, GPU, replicas or autoscaler), router,
    load and length, seed."""
    from servecap.workload import dist_mean

    pools = []
    for p in ff.pools:
        a = p.autoscaler
        count = (
            f"{a.preset or 'autoscaled'} {a.min_replicas}-{a.max_replicas}"
            if a is not None
            else f"{p.replicas if p.replicas is not None else 1} replica(s)"
        )
        pools.append(f"{p.name}: {p.model} on {p.gpu}, {count}")
    arrival = spec.arrival
    rate = getattr(arrival, "rate_per_s", None)
    if spec.users is not None:
        load = f"{spec.users.count:,} chat users"
    elif rate is not None:
        load = f"{rate:g} req/s ({getattr(arrival, 'kind', '')})"
    else:
        load = f"{getattr(arrival, 'kind', 'trace')} arrivals"
    length = (
        f"{spec.num_requests:,} requests"
        if spec.num_requests is not None
        else f"{spec.duration_s:,.0f} s"
        if spec.duration_s is not None
        else ""
    )
    shape = ""
    if spec.prompt_tokens is not None and spec.output_tokens is not None:
        shape = f"; {dist_mean(spec.prompt_tokens):,.0f} prompt + {dist_mean(spec.output_tokens):,.0f} output tokens"
    return (
        f"fleet simulate: {'; '.join(pools)}; router {fleet_router_name(ff)}; {load}"
        + (f", {length}" if length else "")
        + f"{shape}; seed {seed}"
    )


def fleet_router_name(ff: FleetFile) -> str:
    """The router a run's title names: a P/D fleet's hand-off router (its preset, or the policy
    per side), not the co-located router it does not use."""
    if not any(p.role in ("prefill", "decode") for p in ff.pools):
        return ff.router_model().name
    pd = ff.pd_router
    if pd is None:
        from servecap.fleet.file_schema import PdRouterModel

        pd = PdRouterModel()
    if isinstance(pd, str):
        return f"P/D {pd}"
    return f"P/D prefill {pd.prefill}, decode {pd.decode}"
