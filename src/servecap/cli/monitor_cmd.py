"""`servecap monitor`: watch live vLLM/SGLang servers' /metrics, with headroom against the plan."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from servecap.cli import options as o
from servecap.cli.numbers import FINITE
from servecap.files import dumps_json

if TYPE_CHECKING:
    from servecap.app.monitor import MonitorReport


def _fmt(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, spec)


def _longest_url(r: MonitorReport) -> int:
    return max((len(t.url) for t in r.targets), default=0)


def render(r: MonitorReport) -> Any:
    """A rich table: one row per replica and one for the fleet, then the headroom line."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"servecap monitor  t={r.time_s:.0f}s  up {r.replicas_up}, down {r.replicas_down}")
    for col in (
        "target",
        "req/s",
        "prompt tok/s",
        "gen tok/s",
        "running",
        "waiting",
        "KV %",
        "preempt/s",
        "prefix hit",
        "TTFT p50/p99 ms",
        "ITL p50/p99 ms",
        "E2E p99 s",
    ):
        if col == "target":  # a URL is read whole: folded onto a second line, never cut to "…"
            table.add_column(col, justify="left", overflow="fold", min_width=min(40, max(12, _longest_url(r))))
        else:
            table.add_column(col, justify="right")

    def row(name: str, w: object | None, style: str | None = None) -> None:
        from servecap.app.monitor import WindowReport

        if not isinstance(w, WindowReport):
            table.add_row(name, *(["…"] * 11), style=style)
            return
        lat = w.latency_s
        table.add_row(
            name,
            _fmt(w.request_rate_per_s, ".2f"),
            _fmt(w.prompt_tok_s, ".0f"),
            _fmt(w.generation_tok_s, ".0f"),
            _fmt(w.running, ".0f"),
            _fmt(w.waiting, ".0f"),
            _fmt(w.kv_usage, ".1f", 100),
            _fmt(w.preemptions_per_s, ".2f"),
            _fmt(w.prefix_hit_rate, ".0%"),
            f"{_fmt(lat.get('ttft', {}).get('p50'), '.0f', 1e3)}/{_fmt(lat.get('ttft', {}).get('p99'), '.0f', 1e3)}",
            f"{_fmt(lat.get('itl', {}).get('p50'), '.1f', 1e3)}/{_fmt(lat.get('itl', {}).get('p99'), '.1f', 1e3)}",
            _fmt(lat.get("e2e", {}).get("p99"), ".2f"),
            style=style,
        )

    for t in r.targets:
        if t.up:
            row(t.url, t.window)
        else:
            table.add_row(t.url, f"DOWN ({t.down_count}x): {t.error}", *([""] * 10), style="red")
    if len(r.targets) > 1:
        row("fleet", r.fleet, style="bold")
    parts: list[Any] = [table]
    whole = r.fleet if len(r.targets) > 1 else next((t.window for t in r.targets if t.up), None)
    if whole is not None and whole.hit_rate_source not in (None, "vllm:prefix_cache"):  # an external cache read
        parts.append(
            Text(
                f"prefix hits {_fmt(whole.prefix_hit_rate, '.0%')} = {_fmt(whole.local_hit_rate, '.0%')} local + "
                f"{_fmt(whole.external_hit_rate, '.0%')} external cache ({whole.hit_rate_source})"
            )
        )
    advice = r.autoscaler.summary if r.autoscaler is not None else None
    if r.headroom is not None:
        parts.append(Text("headroom: " + r.headroom.summary + (f"; {advice}" if advice else "")))
    elif advice:
        parts.append(Text("autoscaler: " + advice))
    parts.extend(Text(n, style="dim") for n in r.notes)
    return Group(*parts)


def _replay(
    sources: tuple[str, ...],
    db: Path | None,
    session: str | None,
    fleet_file: Path | None,
    pool: str | None,
    seed: int,
    html_path: Path | None,
    as_json: bool,
) -> None:
    """`monitor replay`: the shadow autoscaler (servecap.app.monitor_replay)."""
    from servecap.app.monitor_replay import replay
    from servecap.errors import ServecapError
    from servecap.monitor.history import load_history

    if fleet_file is None:
        raise ServecapError("fleet", None, "monitor replay needs --fleet FLEET.yaml (the autoscaler to replay)")
    if len(sources) > 1:
        raise ServecapError("history", " ".join(sources), "give one history file (a monitor store or a JSON export)")
    if sources:
        path = Path(sources[0])
    else:
        from servecap.monitor.store import default_path

        path = db or default_path()
    response, _ = replay(load_history(path, session), fleet_file, pool=pool, seed=seed)
    if html_path is not None:
        from servecap.outputs import write_text
        from servecap.report.replay_html import replay_html

        write_text(html_path, replay_html(response.model_dump()), "--html")
    if as_json:
        click.echo(response.model_dump_json(indent=2))
        return
    from rich.table import Table

    from servecap.cli.console import make_console, print_table

    c = make_console()
    c.print(
        f"history {response.history}: {response.prompt_tokens:,.0f}/{response.output_tokens:,.0f} tokens; "
        f"SLO break rate {response.break_rate_req_s:.2f} req/s per replica (engine model)",
        highlight=False,
    )
    c.print(response.summary(), highlight=False)
    t = Table(title="minute by minute")
    for col in ("min", "req/s", "ran", "shadow ready", "starting", "req/s per ready", "risk", "p99 TTFT s"):
        t.add_column(col, justify="right")
    for m in response.minutes:
        risk = "cold start" if m.cold_start_gap else ("over" if m.shadow_at_risk else "")
        if m.actual_at_risk:
            risk += (" / " if risk else "") + "ran over"
        t.add_row(
            str(m.minute),
            f"{m.rate_req_s:.2f}",
            "-" if m.actual_replicas is None else f"{m.actual_replicas:.1f}",
            f"{m.shadow_ready:.1f}",
            f"{m.shadow_starting:.1f}",
            "-" if m.rate_per_ready_replica is None else f"{m.rate_per_ready_replica:.2f}",
            risk,
            "-" if m.shadow_p99_ttft_s is None else f"{m.shadow_p99_ttft_s:.2f}",
        )
    print_table(c, t)
    for e in response.scale_events:
        c.print(f"scale: t={e['time_s']:,.0f} s {e['from']} -> {e['to']} replicas", highlight=False)
    for n in response.notes:
        c.print(f"note: {n}", style="dim", highlight=False)


def _default(name: str) -> object:
    """:class:`~servecap.app.monitor.MonitorSettings`' default (defaults live once, in app/)."""
    from dataclasses import fields

    from servecap.app.monitor import MonitorSettings

    return next(f.default for f in fields(MonitorSettings) if f.name == name)


@click.command("monitor")
@click.argument("urls", nargs=-1, required=True)
@click.option(
    "--interval-s",
    type=FINITE,
    default=None,
    help="Seconds between scrapes (default 2; with --once 10: the span of its one window, over which "
    "a steady 25 req/s is read within about +-12%).",
)
@click.option(
    "--window-s", type=FINITE, default=_default("window_s"), help="Window for rates and percentiles (seconds)."
)
@click.option("--duration-s", type=FINITE, default=None, help="Stop after this many seconds (default: until Ctrl-C).")
@click.option("--once", is_flag=True, default=False, help="Two scrapes one interval apart, print, exit.")
@click.option("--timeout-s", type=FINITE, default=_default("timeout_s"), help="Per-scrape timeout (seconds).")
@o.deployment_options
@click.option(
    "--prompt-tokens",
    "-p",
    type=click.INT,
    default=1024,
    help="Without --model: prompt length for the KV-pool headroom (with it, the servers' own mix is used).",
)
@click.option("--output-tokens", "-o", type=click.INT, default=128, help="Without --model: output length, likewise.")
@o.slo_options(None, None, "the SLOs the headroom holds (p99; default: the interactive SLO, 2000 ms / 100 ms)")
@o.calibration_option
@o.db_option
@click.option(
    "--fleet",
    "fleet_file",
    type=click.Path(path_type=Path),
    default=None,
    help="A fleet file (as `fleet simulate` takes): advice from its pool's autoscaler each tick.",
)
@click.option("--pool", default=None, help="The pool of --fleet whose autoscaler advises (default: the only one).")
@click.option("--no-store", is_flag=True, default=False, help="Do not write the time series to the database.")
@click.option("--session", default=None, help="replay: the monitor session of the store (default: the latest).")
@click.option("--html", "html_path", type=o.OUT_PATH, default=None, help="replay: write an HTML page here.")
@click.option("--seed", type=click.IntRange(min=0), default=0, help="replay: the simulation's seed.")
@o.json_option
def monitor_command(
    urls: tuple[str, ...],
    interval_s: float | None,
    window_s: float,
    duration_s: float | None,
    once: bool,
    timeout_s: float,
    deployment: o.DeploymentFlags,
    prompt_tokens: int,
    output_tokens: int,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    calibration: Path | None,
    db: Path | None,
    fleet_file: Path | None,
    pool: str | None,
    no_store: bool,
    session: str | None,
    html_path: Path | None,
    seed: int,
    as_json: bool,
) -> None:
    """Watch live vLLM/SGLang servers' /metrics: rates, queue, KV usage, latency percentiles and headroom.

    Give the deployment (--model/--gpu and the plan's flags) for headroom from the engine model
    at the servers' observed mix (lengths, prefix hits), calibrated to their observed TPOT: the
    request rate at which p99 TTFT/TPOT break the SLOs, with its 95% interval; without it,
    headroom comes from vllm:cache_config_info's KV pool where the server exposes it. With --fleet FLEET.yaml [--pool NAME], the pool's autoscaler (the same policy
    `fleet simulate` runs) is fed the live signal every tick and its decision is shown. A server
    that stops answering is shown as down and counted. With --once, exits non-zero only when
    every target is down.

    `servecap monitor replay [HISTORY] --fleet FLEET.yaml [--pool NAME]` is the shadow
    autoscaler: it replays a recorded history (a monitor store, default --db's latest session, or
    a Prometheus query_range JSON export of the request rate) through the pool's autoscaler and
    reports minute by minute the replicas it would have run, cold-start gaps, GPU-hours and $
    against what ran, and the SLO risk from the engine model (--html for a plot).
    """
    from servecap.app.monitor import MonitorSettings, run_monitor, validate
    from servecap.errors import ServecapError

    if urls and urls[0] == "replay":
        _replay(urls[1:], db, session, fleet_file, pool, seed, html_path, as_json)
        return

    autoscaler = None
    if fleet_file is not None:
        from servecap.app.monitor_fleet import pool_autoscaler

        autoscaler = pool_autoscaler(fleet_file, pool)
    elif pool is not None:
        raise ServecapError("pool", pool, "needs --fleet FLEET.yaml (the file the pool is in)")
    engine_model = None
    served = None
    if deployment.model is None and deployment.gpu is None:
        from servecap.app.monitor_deployment import served_deployment

        warnings: list[str] = []
        served = served_deployment(urls, warnings)
        for w in warnings:
            click.echo(f"warning: {w}", err=True)
    if deployment.model is not None or deployment.gpu is not None or served is not None:
        from servecap.cli.inputs import slo_from_ms
        from servecap.monitor.engine_headroom import EngineModel
        from servecap.specs.perf import INTERACTIVE_SLO

        if served is not None:
            dep, where = served
            click.echo(f"note: the deployment from {where} (deployment flags override it)", err=True)
        else:
            dep, _ = o.deployment_from_options(deployment)
        eff, _ = o.efficiency_from_options(calibration)
        slo = (
            slo_from_ms(ttft_slo_ms, tpot_slo_ms)
            if ttft_slo_ms is not None or tpot_slo_ms is not None
            else INTERACTIVE_SLO
        )
        engine_model = EngineModel(dep, eff, slo)
    elif prompt_tokens < 1 or output_tokens < 1:
        raise ServecapError("prompt_tokens/output_tokens", (prompt_tokens, output_tokens), "must be >= 1")
    default_interval = 10.0 if once else 2.0
    settings = validate(
        MonitorSettings(
            urls=urls,
            interval_s=interval_s if interval_s is not None else default_interval,
            window_s=window_s if interval_s is not None else max(window_s, default_interval),
            duration_s=duration_s,
            once=once,
            db=db,
            store=not no_store,
            engine_model=engine_model,
            tokens_per_request=prompt_tokens + output_tokens,
            timeout_s=timeout_s,
            autoscaler=autoscaler,
        )
    )
    if once or as_json:
        last = asyncio.run(run_monitor(settings, lambda r: None))
        if as_json:
            click.echo(dumps_json(last.model_dump(mode="json")))
        elif last.replicas_up:
            from servecap.cli.console import make_console

            make_console().print(render(last))
        for t in last.targets:
            if not t.up:
                click.echo(f"error: url={t.url!r}: down ({t.error})", err=True)
        if last.replicas_up == 0:
            raise SystemExit(1)
        return
    from servecap.cli.console import make_console

    err = make_console(stderr=True)
    if not err.is_terminal:
        # no terminal (a pipe, CI, a log): one line per tick on stderr, the last full frame on stdout
        # (a live display off a terminal printed only its last frame, after the run)
        reports: list[MonitorReport] = []

        def log(r: MonitorReport) -> None:
            reports.append(r)
            err.print(tick_line(r), highlight=False, soft_wrap=True)

        asyncio.run(run_monitor(settings, log))
        if reports:
            make_console().print(render(reports[-1]))
        return
    from rich.live import Live

    with Live(refresh_per_second=4) as live:

        def show(r: MonitorReport) -> None:
            live.update(render(r))

        asyncio.run(run_monitor(settings, show))


def tick_line(r: MonitorReport) -> str:
    """One monitor tick in a line (the progress off a terminal): time, replicas, load, p99 TTFT,
    headroom and the autoscaler's advice where there is one."""
    parts = [f"monitor: t={r.time_s:,.0f} s", f"{r.replicas_up}/{r.replicas_up + r.replicas_down} up"]
    w = r.fleet
    if w is not None:
        if w.request_rate_per_s is not None:
            parts.append(f"{w.request_rate_per_s:,.2f} req/s")
        if w.running is not None:
            parts.append(f"{w.running:,.0f} running, {w.waiting or 0:,.0f} waiting")
        p99 = w.latency_s.get("ttft", {}).get("p99")
        if p99 is not None:
            parts.append(f"p99 TTFT {p99 * 1e3:,.0f} ms")
    if r.headroom is not None and r.headroom.traffic_headroom is not None:
        parts.append(f"headroom {r.headroom.traffic_headroom:+.0%} traffic")
    if r.autoscaler is not None:
        parts.append(f"advice {r.autoscaler.current_replicas} -> {r.autoscaler.desired_replicas} replicas")
    return ", ".join(parts)
