"""The ``servecap`` command: one click group that imports each command's module on first use.

Only the module of the command being run is imported, and commands import their heavy
dependencies inside the command function, so ``servecap plan`` starts fast on the base install;
``servecap --help`` lists the commands from :data:`COMMANDS` without importing any of them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

import click

from servecap import __version__


class LazyCommand(NamedTuple):
    """Where a command lives (``"module:attribute"``) and its one line for ``servecap --help``."""

    target: str
    short_help: str


# In the order ``servecap --help`` lists them; the one-liners are the first paragraph of each
# command's docstring (tests/cli/test_lazy_cli.py checks they agree).
COMMANDS: Mapping[str, LazyCommand] = {
    "plan": LazyCommand(
        "servecap.cli.plan_cmd:plan_command",
        "How many users one deployment serves, how fast, at what cost (closed form).",
    ),
    "gpus": LazyCommand("servecap.cli.catalog_cmd:gpus_command", "List the GPU catalog (and a --gpu-file's rows)."),
    "models": LazyCommand(
        "servecap.cli.catalog_cmd:models_command", "List the model catalog with parameters and KV bytes per token."
    ),
    "compare": LazyCommand(
        "servecap.cli.compare_cmd:compare_command",
        "Rank deployments of a model by $ per user per month within the SLOs.",
    ),
    "simulate": LazyCommand(
        "servecap.cli.simulate_cmd:simulate_command",
        "Simulate one replica (continuous batching, paged KV cache, prefix caching) under a "
        "workload: latency percentiles, throughput, goodput, batch, queue and KV over time.",
    ),
    "capacity": LazyCommand(
        "servecap.cli.capacity_cmd:capacity_command",
        "The largest number of chat users (closed loop, with think time) — or request rate with "
        "--rate — whose simulated p99 TTFT and TPOT meet the SLOs; the planner's estimate beside "
        "it; and a load-latency table showing where queueing takes over.",
    ),
    "bench": LazyCommand(
        "servecap.cli.bench_cmd:bench",
        "Send a workload to an OpenAI-compatible server and measure TTFT, ITL, TPOT, E2E, throughput.",
    ),
    "emulate": LazyCommand(
        "servecap.cli.emulate_cmd:emulate",
        "Serve /v1/completions, /v1/chat/completions, /v1/models, /metrics and /health with the "
        "simulator's engine timing, in real time.",
    ),
    "calibrate": LazyCommand(
        "servecap.cli.calibrate_cmd:calibrate",
        "Fit bandwidth/compute efficiency, step overhead and per-prompt-token cost to the step "
        "times seen in stored runs of one deployment; write a file for --calibration.",
    ),
    "accuracy": LazyCommand(
        "servecap.cli.accuracy_cmd:accuracy",
        "Measured vs predicted, per metric, with the error (prediction: `servecap simulate` of the "
        "run's workload, seed and deployment, optionally with a calibration).",
    ),
    "fleet": LazyCommand(
        "servecap.cli.fleet_cmd:fleet_group", "Simulate a fleet of replicas behind a router and an autoscaler."
    ),
    "runs": LazyCommand("servecap.cli.runs_cmd:runs", "Stored bench runs: list (default), show, export, delete."),
    "monitor": LazyCommand(
        "servecap.cli.monitor_cmd:monitor_command",
        "Watch live vLLM/SGLang servers' /metrics: rates, queue, KV usage, latency percentiles and headroom.",
    ),
    "export": LazyCommand(
        "servecap.cli.export_cmd:export_group",
        "Write configuration from a plan or a fleet file: Grafana, alert rules, Ray Serve, KEDA, KServe, production-stack, LiteLLM.",
    ),
    "sweep": LazyCommand(
        "servecap.cli.sweep_cmd:sweep_command",
        "Run `fleet simulate` at every point of a sweep file's grid on serial, process-pool or Ray "
        "workers; store each run and print one row per point.",
    ),
    "validate": LazyCommand(
        "servecap.cli.validate_cmd:validate_command",
        "Plan and simulate every row of the public measurement corpus and print predicted vs "
        "measured with the signed error, and the MAPE per metric, per GPU family and per engine.",
    ),
    "serve": LazyCommand(
        "servecap.web.serve_cmd:serve",
        "Serve the web UI (/plan, /compare, /simulate, /fleet, /runs) and the JSON API (/api/v1, OpenAPI at /openapi.json) "
        "from the same library the CLI uses.",
    ),
}


def load_command(target: str) -> click.Command:
    """Import ``"module:attribute"`` and return the click command it names."""
    module_name, _, attribute = target.partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


class LazyGroup(click.Group):
    """A group whose commands are imported when invoked (click's documented lazy-loading pattern);
    it lists its commands in declaration order, not alphabetically."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, LazyCommand] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: Mapping[str, LazyCommand] = lazy_commands or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The lazy commands, then those added directly, in the order they were declared."""
        return [*self.lazy_commands, *(name for name in self.commands if name not in self.lazy_commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in self.lazy_commands:
            return super().get_command(ctx, cmd_name)
        command = load_command(self.lazy_commands[cmd_name].target)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from :data:`COMMANDS`' one-liners: no command module is imported."""
        rows = [(name, lazy.short_help) for name, lazy in self.lazy_commands.items()]
        rows += [
            (name, cmd.get_short_help_str(sys.maxsize))
            for name, cmd in self.commands.items()
            if name not in self.lazy_commands and not cmd.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    "servecap",
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(__version__, "--version", "-V", prog_name="servecap", message="%(prog)s %(version)s")
def cli() -> None:
    """How many users can this GPU (or fleet) serve, at what latency and cost."""


# Optional dependencies (pyproject extras) -> the extra that installs them.
_EXTRA_FOR_MODULE = {
    "numpy": "sim",
    "yaml": "sim",
    "plotly": "sim",
    "httpx": "measure",
    "httptools": "measure",
    "platformdirs": "measure",
    "fastapi": "serve",
    "uvicorn": "serve",
    "prometheus_client": "serve",
}


def run() -> None:
    """Console-script entry point: user errors (and click's usage errors) become one line on
    stderr and exit code 2;
    a missing optional dependency names the extra to install; Ctrl-C exits 130."""
    from servecap.errors import ServecapError

    try:
        code = cli.main(prog_name="servecap", standalone_mode=False)
    except click.exceptions.Abort as err:
        if not isinstance(err.__cause__, KeyboardInterrupt):
            click.echo("Aborted!", err=True)
            sys.exit(1)
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.UsageError as err:  # one line, as every other error (the usage is a --help away)
        command = err.ctx.command_path if err.ctx is not None else "servecap"
        message = " ".join(err.format_message().split())
        click.echo(f"Error: {message} (see `{command} --help`)", err=True)
        sys.exit(err.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except ServecapError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    except ModuleNotFoundError as err:
        extra = _EXTRA_FOR_MODULE.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        click.echo(f"error: {err.name} is not installed: this command needs pip install 'servecap[{extra}]'", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
