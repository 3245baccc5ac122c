"""`servecap serve`: the web app and its JSON API on one port.

The command lives with the web UI (the CLI's lazy registry names it by module path), so the CLI,
the API and the web UI stay independent interfaces over the same use cases."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click


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
@click.option("--max-jobs", type=click.IntRange(1, 64), default=2, show_default=True, help="Simulations run at once.")
@click.option("--max-queued", type=click.IntRange(0, 10_000), default=16, show_default=True, help="Jobs that may wait.")
@click.option(
    "--plan-workers",
    type=click.IntRange(0, 64),
    default=None,
    help="Processes computing new plans, first come first served; 0: one thread in the server process "
    "[default: one fewer than the CPUs, at least 1, at most 8].",
)
def serve(
    host: str,
    port: int,
    data_dir: Path | None,
    db: Path | None,
    max_jobs: int,
    max_queued: int,
    plan_workers: int | None,
) -> None:
    """Serve the web UI (/plan, /compare, /simulate, /fleet, /runs) and the JSON API (/api/v1, OpenAPI at
    /openapi.json) from the same library the CLI uses."""
    import uvicorn

    from servecap.api import ServeSettings, create_app
    from servecap.results.store import default_db_path
    from servecap.web import mount_web

    data = data_dir if data_dir is not None else default_db_path().parent / "web"
    # by default one core is left to the event loop (HTTP, cached answers, jobs), the rest plan
    workers = plan_workers if plan_workers is not None else min(8, max(1, (os.cpu_count() or 1) - 1))
    settings = ServeSettings(
        data_dir=data, db=db, max_running_jobs=max_jobs, max_queued_jobs=max_queued, plan_workers=workers
    )
    app = create_app(settings)
    mount_web(app)
    click.echo(f"servecap: serving the web app on http://{host}:{port}/ (API at /api/v1, Ctrl-C to stop)", err=True)
    # with --plan-workers 0, the plan thread hands the interpreter lock back to the event loop
    # every 1 ms rather than every 5 ms (CPython's default): requests keep being read and cached
    # answers sent while a new plan is computed (api/plan_worker.py)
    if workers == 0:
        sys.setswitchinterval(0.001)
    # no access log (a formatted line per request is dropped at log level warning anyway) and
    # keep-alive connections held 30 s, so many clients reusing connections are not cut off
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, timeout_keep_alive=30, backlog=4096)
