"""`servecap serve`: the web app and its JSON API on one port.

The command lives with the web UI (the CLI's lazy registry names it by module path), so the CLI,
the API and the web UI stay independent interfaces over the same use cases.

Bound to loopback (the default) the server answers this machine only and needs no token; bound
beyond it (``--host 0.0.0.0``) it requires a token, generated unless ``--token`` or
``$SERVECAP_TOKEN`` gives one, and prints the URL that carries it, as Jupyter does."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from servecap.app.limits import API_LIMITS

TOKEN_ENV = "SERVECAP_TOKEN"


@dataclass(frozen=True, slots=True)
class Start:
    """What ``serve`` runs: the settings and the lines it prints at start-up."""

    settings: object  # servecap.api.ServeSettings (imported lazily: the CLI loads fast)
    lines: tuple[str, ...]


def start_settings(
    *,
    host: str,
    port: int,
    data_dir: Path,
    db: Path | None = None,
    token: str | None = None,
    no_token: bool = False,
    allowed_hosts: tuple[str, ...] = (),
    max_jobs: int = 2,
    max_queued: int = 16,
    plan_workers: int = 0,
    max_body_mb: float = 2.0,
    upload_quota_mb: float = 200.0,
    max_uploads: int = 1000,
    job_timeout_s: float = 900.0,
    job_memory_mb: int = 4096,
    max_result_mb: float = 64.0,
    **work: float,
) -> Start:
    """The server's settings for these flags: a token generated when bound beyond loopback (unless
    ``no_token``), and the start-up lines (the URL with the token, a warning when open).
    ``work``: :class:`~servecap.app.limits.WorkLimits` figures (``max_requests=...``)."""
    from dataclasses import replace

    from servecap.api import ServeSettings
    from servecap.api.guard import GuardSettings, is_loopback, new_token, token_problem
    from servecap.api.uploads import UploadQuota
    from servecap.app.limits import API_LIMITS
    from servecap.errors import ServecapError

    if token is not None and no_token:
        raise ServecapError("token", "***", "give --token or --no-token, not both")
    problem = None if token is None else token_problem(token)
    if problem is not None:
        raise ServecapError("token", "***", problem)  # never echoed: it may be most of a real token
    loopback = is_loopback(host)
    if token is None and not loopback and not no_token:
        token = new_token()
    unknown = sorted(set(work) - set(API_LIMITS.__dataclass_fields__) - {"knobs"})
    if unknown:
        raise ServecapError("limits", unknown, "unknown work limits")
    mb = 1024 * 1024
    settings = ServeSettings(
        data_dir=data_dir,
        db=db,
        max_running_jobs=max_jobs,
        max_queued_jobs=max_queued,
        plan_workers=plan_workers,
        guard=GuardSettings(
            bind_host=host,
            allowed_hosts=allowed_hosts,
            token=None if no_token else token,
            max_body_bytes=int(max_body_mb * mb),
        ),
        upload_quota=UploadQuota(max_total_bytes=int(upload_quota_mb * mb), max_files=max_uploads),
        limits=replace(API_LIMITS, **work),  # type: ignore[arg-type]
        job_timeout_s=job_timeout_s,
        job_memory_bytes=job_memory_mb * mb if job_memory_mb > 0 else None,
        max_result_bytes=int(max_result_mb * mb),
    )
    wildcard = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}
    shown = wildcard.get(host, f"[{host}]" if ":" in host else host)
    query = f"?token={token}" if token is not None and not no_token else ""
    lines = [f"servecap: serving the web app on http://{shown}:{port}/{query} (API at /api/v1, Ctrl-C to stop)"]
    if host in ("0.0.0.0", "::", ""):
        lines.append(f"servecap: bound to every interface ({host or '0.0.0.0'}): use this machine's address")
    if token is not None and not no_token:
        lines.append(
            "servecap: every request needs the token: open the URL above (it sets a cookie), or send "
            "'Authorization: Bearer <token>'"
        )
    elif not loopback:
        lines.append(
            f"servecap: WARNING: bound to {host} with --no-token: anyone who can reach this port can use the server"
        )
    return Start(settings, tuple(lines))


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True, help="Port to listen on.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where uploaded config.json files are kept [default: the user's data directory].",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Run store (SQLite) [default: the one `servecap runs` uses].",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    default=None,
    help=f"Require this token on every request [default: generated when bound beyond loopback; ${TOKEN_ENV}].",
)
@click.option("--no-token", is_flag=True, default=False, help="Serve beyond loopback without a token (not advised).")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A Host name to answer besides localhost and the bound address (repeatable; '*' for any).",
)
@click.option("--max-jobs", type=click.IntRange(1, 64), default=2, show_default=True, help="Simulations run at once.")
@click.option("--max-queued", type=click.IntRange(0, 10_000), default=16, show_default=True, help="Jobs that may wait.")
@click.option(
    "--plan-workers",
    type=click.IntRange(0, 64),
    default=None,
    help="Processes computing new plans, first come first served; 0: one thread in the server process "
    "[default: one fewer than the CPUs, at least 1, at most 8].",
)
@click.option(
    "--max-body-mb", type=click.FloatRange(0.01, 1024), default=2.0, show_default=True, help="Request body limit."
)
@click.option(
    "--upload-quota-mb",
    type=click.FloatRange(1, 1e6),
    default=200.0,
    show_default=True,
    help="Total size of the uploads kept (the least recently used go first).",
)
@click.option(
    "--max-uploads", type=click.IntRange(1, 10**7), default=1000, show_default=True, help="Number of uploads kept."
)
@click.option(
    "--max-requests",
    type=click.IntRange(1),
    default=API_LIMITS.max_requests,
    show_default=True,
    help="Requests per job.",
)
@click.option(
    "--max-users", type=click.IntRange(1), default=API_LIMITS.max_users, show_default=True, help="Chat users per job."
)
@click.option(
    "--max-simulated-s",
    type=click.FloatRange(1, 1e9),
    default=API_LIMITS.max_simulated_s,
    show_default=True,
    help="Simulated s per job.",
)
@click.option(
    "--max-replicas",
    type=click.IntRange(1),
    default=API_LIMITS.max_replicas,
    show_default=True,
    help="Replicas per fleet job.",
)
@click.option(
    "--max-replica-s",
    type=click.FloatRange(1, 1e15),
    default=API_LIMITS.max_replica_s,
    show_default=True,
    help="Replicas x simulated s.",
)
@click.option(
    "--max-candidates",
    type=click.IntRange(1),
    default=API_LIMITS.max_candidates,
    show_default=True,
    help="Fleet-plan candidates.",
)
@click.option(
    "--max-layers",
    type=click.IntRange(1),
    default=API_LIMITS.max_layers,
    show_default=True,
    help="Layers of an upload.",
)
@click.option(
    "--job-timeout-s", type=click.FloatRange(1, 1e7), default=900.0, show_default=True, help="Wall time per job."
)
@click.option(
    "--max-result-mb",
    type=click.FloatRange(0.1, 4096),
    default=64.0,
    show_default=True,
    help="A job's result: estimated before it runs and refused past this; time series are downsampled to "
    "2,000 samples for the web.",
)
@click.option(
    "--max-timeseries-samples",
    type=click.IntRange(1),
    default=API_LIMITS.max_timeseries_samples,
    show_default=True,
    help="Samples per time series a fleet job may simulate.",
)
@click.option(
    "--max-events",
    type=click.IntRange(1),
    default=API_LIMITS.max_events,
    show_default=True,
    help="Events per fleet job (requests' events, samples, router scrapes, autoscaler ticks).",
)
@click.option(
    "--request-read-timeout-s",
    type=click.FloatRange(0.1, 3600),
    default=30.0,
    show_default=True,
    help="Seconds a client has to send a whole request (headers and body); then its connection is closed.",
)
@click.option(
    "--job-memory-mb",
    type=click.IntRange(0),
    default=4096,
    show_default=True,
    help="Address space per job process (0: unlimited).",
)
def serve(
    host: str,
    port: int,
    data_dir: Path | None,
    db: Path | None,
    token: str | None,
    no_token: bool,
    allowed_hosts: tuple[str, ...],
    plan_workers: int | None,
    request_read_timeout_s: float,
    **limits: Any,
) -> None:
    """Serve the web UI (/plan, /compare, /simulate, /fleet, /runs) and the JSON API (/api/v1, OpenAPI at
    /openapi.json) from the same library the CLI uses."""
    import uvicorn

    from servecap.api import ServeSettings, create_app
    from servecap.errors import ServecapError
    from servecap.results.store import default_db_path
    from servecap.web import mount_web

    data = data_dir if data_dir is not None else default_db_path().parent / "web"
    # by default one core is left to the event loop (HTTP, cached answers, jobs), the rest plan
    workers = plan_workers if plan_workers is not None else min(8, max(1, (os.cpu_count() or 1) - 1))
    try:
        start = start_settings(
            host=host,
            port=port,
            data_dir=data,
            db=db,
            token=token,
            no_token=no_token,
            allowed_hosts=allowed_hosts,
            plan_workers=workers,
            **limits,
        )
    except ServecapError as err:
        raise click.UsageError(str(err)) from None
    assert isinstance(start.settings, ServeSettings)
    app = create_app(start.settings)
    mount_web(app)
    for line in start.lines:
        click.echo(line, err=True)
    # threads in the server process (a body's checks; with --plan-workers 0, the plan thread)
    # hand the interpreter lock back to the event loop every 1 ms rather than every 5 ms
    # (CPython's default): requests keep being read and cached answers sent meanwhile
    sys.setswitchinterval(0.001)
    uvicorn.Server(serve_config(app, host, port, request_read_timeout_s)).run()


def serve_config(app: Any, host: str, port: int, request_read_timeout_s: float = 30.0) -> Any:
    """uvicorn's configuration for ``serve``: each request must arrive whole (headers and body)
    within ``request_read_timeout_s`` or its connection is closed, as ``emulate`` does
    (emulator/read_deadline.py), so clients holding half-sent requests cannot keep the server from
    answering; no access log; keep-alive connections held 30 s, so many clients reusing
    connections are not cut off."""
    import uvicorn

    from servecap.emulator.read_deadline import read_deadline_protocol

    protocol = read_deadline_protocol(request_read_timeout_s)
    extra: dict[str, Any] = {"http": protocol} if protocol is not None else {}
    return uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, timeout_keep_alive=30, backlog=4096, **extra
    )
