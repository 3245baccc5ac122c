"""The ``servecap`` command: one typer app; each command lives in its own module.

Commands import their heavy dependencies inside the command function, so ``servecap plan``
starts fast on the base install.
"""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(
    name="servecap",
    help="How many users can this GPU (or fleet) serve, at what latency and cost.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)



@app.callback()
def _root() -> None:
    """How many users can this GPU (or fleet) serve, at what latency and cost."""


# Each module defines `register(app)`.
_COMMAND_MODULES = (
    "plan_cmd",
    "catalog_cmd",
    "compare_cmd",
    "simulate_cmd",
    "capacity_cmd",
    "bench_cmd",
    "runs_cmd",
    "emulate_cmd",
    "calibrate_cmd",
    "accuracy_cmd",
)

for _name in _COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"servecap.cli.{_name}")
    except ModuleNotFoundError as _err:  # a command still being built
        if _err.name != f"servecap.cli.{_name}":
            raise
        continue
    _module.register(app)


# Optional dependencies (pyproject extras) -> the extra that installs them.
_EXTRA_FOR_MODULE = {
    "numpy": "sim", "yaml": "sim", "plotly": "sim",
    "httpx": "measure", "platformdirs": "measure",
    "fastapi": "serve", "uvicorn": "serve", "prometheus_client": "serve", "sse_starlette": "serve",
}


def run() -> None:
    """Console-script entry point: user errors become one line on stderr and exit code 2."""
    from servecap.errors import ServecapError

    try:
        app()
    except ServecapError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
    except ModuleNotFoundError as err:
        extra = _EXTRA_FOR_MODULE.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        typer.echo(f"error: {err.name} is not installed: this command needs pip install 'servecap[{extra}]'", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
