"""``servecap bench URL``: measure an OpenAI-compatible server under a workload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from servecap.cli.options import (
    PATH,
    DeploymentFlags,
    StreamFlags,
    db_option,
    hardware_options,
    json_option,
    request_stream_options,
    slo_options,
)


def deployment_from_settings(d: dict[str, Any]) -> tuple[Any, list[str], bool]:
    """(Deployment, notes, prefix caching on) from a run's stored ``settings["deployment"]``."""
    from servecap.cli.options import DeploymentFlags, deployment_from_options

    dep, notes = deployment_from_options(DeploymentFlags.from_settings(d))
    return dep, notes, bool(d.get("enable_prefix_caching", True))


def _server_deployment(url: str, api_key: str | None) -> dict[str, Any] | None:
    """The emulator's own deployment (``GET /servecap/deployment``); None from other servers."""
    import httpx

    base = url.rstrip("/").removesuffix("/v1")
    try:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else None
        resp = httpx.get(base + "/servecap/deployment", timeout=5.0, headers=headers)
        if resp.status_code != 200:
            return None
        data = resp.json()
    except (httpx.HTTPError, ValueError):
        return None
    return data if isinstance(data, dict) and "gpu" in data else None


def _floats(field: str, text: str | None) -> list[float | None]:
    from servecap.errors import ServecapError

    if text is None:
        return [None]
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ServecapError(field, text, "expected a number or a comma-separated list") from None
    if not vals or any(v <= 0 for v in vals):
        raise ServecapError(field, text, "values must be positive")
    return list(vals)


@click.command("bench")
@click.argument("url", type=click.STRING)
@click.option("--model", "-m", type=click.STRING, default=None,
              help="Model name to request (default: the server's first /v1/models entry).")
@click.option("--workload", type=PATH, default=None, help="Workload file (YAML/JSON), as for simulate.")
@click.option("--rate", type=click.STRING, default=None,
              help="Requests/s (open loop); a comma list sweeps, e.g. 1,2,4.")
@request_stream_options
@click.option("--num-requests", type=click.INT, default=None, help="Requests to send.")
@click.option("--duration-s", type=click.FLOAT, default=None, help="Stop starting requests after this many seconds.")
@click.option("--users", type=click.INT, default=None, help="Closed loop: chat users.")
@click.option("--think-time-s", type=click.FLOAT, default=None, help="Chat users' think time.")
@click.option("--concurrency", type=click.STRING, default=None,
              help="Closed loop with N workers; a comma list sweeps.")
@click.option("--seed", type=click.INT, default=0, help="Workload RNG seed (same stream as simulate).")
@click.option("--endpoint", type=click.STRING, default="completions", help="completions|chat.")
@click.option("--warmup-s", type=click.FLOAT, default=0.0,
              help="Exclude requests scheduled in the first N s from the summary.")
@click.option("--cooldown-s", type=click.FLOAT, default=0.0, help="Exclude requests scheduled in the last N s.")
@click.option("--timeout-s", type=click.FLOAT, default=600.0, help="Total deadline per request.")
@click.option("--stall-timeout-s", type=click.FLOAT, default=60.0,
              help="Timeout when no bytes arrive for this long.")
@slo_options(None, None, "for goodput")
@click.option("--label", type=click.STRING, default="", help="A note stored with the run.")
@db_option
@click.option("--no-store", is_flag=True, default=False, help="Do not save the run.")
@click.option("--api-key", type=click.STRING, default=None, envvar="OPENAI_API_KEY", show_envvar=True,
              help="Bearer token.")
@click.option("--model-id", type=click.STRING, default=None,
              help="Deployment: catalog id or config.json of the served model (default: --model).")
@hardware_options
@click.option("--no-enable-prefix-caching", "no_prefix_caching", is_flag=True, default=False,
              help="Deployment: the server runs without prefix caching.")
@click.option("--server-timing/--no-server-timing", default=None,
              help="Ask for the emulator's servecap_timing (default: on when the server is servecap emulate).")
@json_option
def bench(
    *, url: str, model: str | None, workload: Path | None, rate: str | None, stream: StreamFlags, num_requests: int | None, duration_s: float | None, users: int | None,
    think_time_s: float | None, concurrency: str | None, seed: int, endpoint: str, warmup_s: float,
    cooldown_s: float, timeout_s: float, stall_timeout_s: float, ttft_slo_ms: float | None,
    tpot_slo_ms: float | None, label: str, db: Path | None, no_store: bool, api_key: str | None,
    model_id: str | None, deployment: DeploymentFlags, no_prefix_caching: bool,
    server_timing: bool | None, as_json: bool,
) -> None:
    """Send a workload to an OpenAI-compatible server and measure TTFT, ITL, TPOT, E2E, throughput.

    URL is the server's base URL, e.g. http://127.0.0.1:8000. Give the server's deployment
    (--gpu and the flags of `servecap plan`; --model-id when the served name is not a catalog
    id) to store it with the run for `servecap calibrate` and `servecap accuracy`; against
    `servecap emulate` it is read from the server."""
    from servecap.cli.inputs import slo_from_ms
    from servecap.errors import ServecapError
    from servecap.measure.bench import planned_requests
    from servecap.measure.loadgen import LoadConfig
    from servecap.measure.store import RunStore, new_run_id
    from servecap.workload import load_workload, workload_from_flags

    if endpoint not in ("completions", "chat"):
        raise ServecapError("endpoint", endpoint, "must be completions or chat")
    if not url.startswith(("http://", "https://")):
        raise ServecapError("url", url, "must start with http:// or https://")
    rates = _floats("rate", rate)
    concs = _floats("concurrency", concurrency)
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
    _reachable(url)
    store = None if no_store else RunStore(db)
    model_name = model or _first_model(url, api_key)
    dep_settings: dict[str, Any] | None = None
    if deployment.gpu is not None or model_id is not None:
        dep_settings = {**deployment.with_model(model_id or model_name).to_settings(),
                        "enable_prefix_caching": not no_prefix_caching}
        deployment_from_settings(dep_settings)  # a bad flag fails now, not at calibration
    emulated = _server_deployment(url, api_key)
    if dep_settings is None:
        dep_settings = emulated
    extra: dict[str, Any] = {}
    if server_timing if server_timing is not None else emulated is not None:
        extra["servecap_timing"] = True
    slo = slo_from_ms(ttft_slo_ms, tpot_slo_ms) if (ttft_slo_ms or tpot_slo_ms) else None
    sweep_id = new_run_id() if len(rates) > 1 or len(concs) > 1 else None
    results: list[dict[str, Any]] = []
    for r in rates:
        for c in concs:
            if workload is not None:
                if r is not None:
                    raise ServecapError("rate", rate, "give --workload or --rate, not both")
                spec = load_workload(workload)
            elif r is not None or users is not None:
                spec = workload_from_flags(rate=r, num_requests=num_requests, duration_s=duration_s, users=users,
                                           think_time_s=think_time_s, **stream.workload_kwargs())
            else:
                spec = _concurrency_spec(c, stream.prompt_tokens, stream.output_tokens, num_requests, duration_s)
            cfg = LoadConfig(base_url=url, model=model_name, endpoint=endpoint,  # type: ignore[arg-type]
                             request_timeout_s=timeout_s, stall_timeout_s=stall_timeout_s,
                             warmup_s=warmup_s, cooldown_s=cooldown_s, api_key=api_key,
                             max_connections=max(4096, int(c or 0)), extra_body=extra)
            settings = {"url": url, "model": model_name, "workload": spec.model_dump(mode="json", by_alias=True),
                        "seed": seed, "concurrency": None if c is None else int(c), "endpoint": endpoint,
                        "warmup_s": warmup_s, "cooldown_s": cooldown_s, "timeout_s": timeout_s,
                        "slo": None if slo is None else {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s},
                        "deployment": dep_settings, "server_timing": bool(extra)}
            total = planned_requests(spec, seed)
            outcome = _run_with_progress(cfg, spec, seed, None if c is None else int(c), slo, total, quiet=as_json)
            run_id = new_run_id()
            if store is not None:
                store.save_run(run_id=run_id, url=url, model=model_name, mode=outcome.result.mode,
                               settings=settings, traces=outcome.traces, summary=outcome.summary,
                               checks=[ch.as_dict() for ch in outcome.checks],
                               client=_client_dict(outcome.result.client),
                               wall_duration_s=outcome.result.wall_duration_s,
                               interrupted=outcome.result.interrupted, label=label, sweep_id=sweep_id,
                               created_at=outcome.result.started_at)
            results.append({"run_id": run_id if store is not None else None, "rate": r,
                            "concurrency": None if c is None else int(c), "summary": outcome.summary,
                            "errors": outcome.errors, "checks": [ch.as_dict() for ch in outcome.checks]})
            if not as_json:
                _render(run_id if store is not None else "(not stored)", outcome, store)
            if outcome.result.interrupted:
                break
    if as_json:
        if len(results) == 1:
            one = dict(results[0]["summary"])
            one.update({"run_id": results[0]["run_id"], "errors": results[0]["errors"],
                        "checks": results[0]["checks"]})
            click.echo(json.dumps(one))
        else:
            click.echo(json.dumps({"sweep_id": sweep_id, "runs": results}))


def _concurrency_spec(c: float | None, prompt: int, output: int, n: int | None, dur: float | None) -> Any:
    """A closed loop by --concurrency: lengths from a constant-rate stream (times unused)."""
    from servecap.errors import ServecapError
    from servecap.workload import workload_from_flags

    if c is None:
        raise ServecapError("rate", None, "give --rate, --concurrency, --users or --workload")
    return workload_from_flags(rate=1.0, arrival="constant", prompt_tokens=prompt, output_tokens=output,
                               num_requests=n, duration_s=None if n is not None else dur)


def _reachable(url: str) -> None:
    """Fail fast, in one line, when nothing listens at the URL (rather than a run of errors)."""
    import socket
    from urllib.parse import urlsplit

    from servecap.errors import ServecapError

    u = urlsplit(url)
    if not u.hostname:
        raise ServecapError("url", url, "has no host")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
        with socket.create_connection((u.hostname, port), timeout=5.0):
            pass
    except ValueError:
        raise ServecapError("url", url, "bad port") from None
    except OSError as err:
        raise ServecapError("url", url, f"cannot connect: {err.strerror or err}") from None


def _first_model(url: str, api_key: str | None) -> str:
    import httpx

    from servecap.errors import ServecapError

    base = url.rstrip("/").removesuffix("/v1")
    try:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else None
        resp = httpx.get(base + "/v1/models", timeout=10.0, headers=headers)
        data = resp.json().get("data") or []
        return str(data[0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, AttributeError) as err:
        raise ServecapError("model", None, f"not given and {base}/v1/models did not name one ({type(err).__name__}); pass --model") from None


def _client_dict(c: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(c)


def _run_with_progress(cfg: Any, spec: Any, seed: int, concurrency: int | None, slo: Any, total: int | None,
                       *, quiet: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from servecap.measure.bench import run_bench

    async def go(on_done: Any) -> Any:
        return await run_bench(cfg, spec, seed=seed, concurrency=concurrency, slo=slo, on_done=on_done)

    if quiet:
        return _run_loop(go(None))
    errors = 0
    with Progress(TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(), TextColumn("errors {task.fields[errors]}"),
                  TimeElapsedColumn(), transient=True) as progress:
        task = progress.add_task("requests", total=total, errors=0)

        def on_done(trace: Any) -> None:
            nonlocal errors
            if trace.error is not None:
                errors += 1
            progress.update(task, advance=1, errors=errors)

        return _run_loop(go(on_done))


def _run_loop(coro: Any) -> Any:
    """Run the load generator on uvloop where it is installed (about a quarter less client CPU
    per token at 2,000 streams), else on asyncio's default loop."""
    import asyncio

    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def _render(run_id: str, outcome: Any, store: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    s = outcome.summary
    t = Table(title=f"run {run_id} — {s['completed']}/{s['num_requests']} completed, "
                    f"{outcome.measured_window_s:.1f} s window")
    t.add_column("metric")
    for col in ("p50", "p90", "p99", "mean"):
        t.add_column(col, justify="right")
    for name in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        p = s[name]
        t.add_row(name.removesuffix("_s") + " (ms)", *("-" if p[k] is None else f"{p[k] * 1e3:.1f}" for k in ("p50", "p90", "p99", "mean")))
    con.print(t)
    good = s.get("goodput_req_s")
    con.print(f"throughput {s['throughput_req_s']:.2f} req/s, {s['output_tokens_per_s']:.1f} output tok/s"
              + (f", goodput {good:.2f} req/s" if good is not None else ""))
    if outcome.errors:
        con.print("[red]errors:[/red] " + ", ".join(f"{k} {v}" for k, v in outcome.errors.items()))
    if s.get("multi_token_chunk_requests"):
        con.print(f"[yellow]{s['multi_token_chunk_requests']} requests received chunks carrying several tokens "
                  "(their ITL is not observable per token)[/yellow]")
    for ch in outcome.checks:
        mark = "[green]ok[/green]" if ch.ok else "[yellow]WARN[/yellow]"
        con.print(f"  {mark} {ch.name}: {ch.message}")
    if store is not None:
        con.print(f"stored in {store.path}")
