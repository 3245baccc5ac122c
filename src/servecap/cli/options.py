"""Options shared by every command that takes a deployment (plan, simulate, emulate, ...).

Stack these click decorators on a command (``@deployment_options``, ``@calibration_option``,
``@json_option``) and pass the values to :func:`deployment_from_options`; one place turns names
into specs and resolves vLLM's defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from servecap.app.flags import (
    DEFAULT_EXAMPLE_MAX_MODEL_LEN,
    DEFAULT_EXAMPLE_WEIGHTS_DTYPE,
    DEFAULT_GPU,
    DEFAULT_MODEL,
    FLAG_NAMES,
    DeploymentFlags,
    LoadFlags,
    StreamFlags,
    deployment_from_flags,
    efficiency_from_file,
    resolve_parallelism,
)
from servecap.cli.fields import field_option
from servecap.cli.numbers import FINITE
from servecap.specs.engines import ENGINE_PROFILES

if TYPE_CHECKING:
    from servecap.specs.deployment import Deployment
    from servecap.specs.perf import Efficiency

__all__ = [
    "DEFAULT_EXAMPLE_MAX_MODEL_LEN",
    "DEFAULT_EXAMPLE_WEIGHTS_DTYPE",
    "DEFAULT_GPU",
    "DEFAULT_MODEL",
    "DeploymentFlags",
    "StreamFlags",
    "deployment_from_options",
    "efficiency_from_options",
    "resolve_parallelism",
]

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

PATH = click.Path(path_type=Path)


class _OutputPath(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """A file to write: the text kept as given (``Path("")`` would read as ``.``), so the one
    writer (:mod:`servecap.outputs`) can refuse an empty name by name."""

    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        from servecap.outputs import check_target

        if isinstance(value, Path):
            return value
        flag = param.opts[0] if param is not None and param.opts else "output"
        return check_target(str(value), flag)


OUT_PATH = _OutputPath()
"""An output file's flag: checked when the flags are read, before any work (see :mod:`servecap.outputs`)."""


def stack(*decorators: Decorator) -> Callable[[F], F]:
    """One decorator applying ``decorators`` as if written top to bottom (help lists them in order)."""

    def apply(f: F) -> F:
        for decorator in reversed(decorators):
            f = cast(F, decorator(f))
        return f

    return apply


model_option = field_option(DeploymentFlags, "model", "--model", "-m", type=click.STRING)
gpu_file_option = field_option(DeploymentFlags, "gpu_file", "--gpu-file", type=PATH)
max_model_len_option = field_option(DeploymentFlags, "max_model_len", "--max-model-len", "-l", type=click.INT)
calibration_option = click.option(
    "--calibration", type=PATH, default=None, help="Calibration file from `servecap calibrate`."
)
json_option = click.option(
    "--json", "as_json", is_flag=True, default=False, help="Print one JSON object (SI units) instead of tables."
)


def slo_options(ttft_default_ms: float | None, tpot_default_ms: float | None, what: str) -> Callable[[F], F]:
    """``--ttft-slo-ms`` / ``--tpot-slo-ms``: the same two flags, in milliseconds, on every command."""
    return stack(
        click.option("--ttft-slo-ms", type=FINITE, default=ttft_default_ms, help=f"TTFT SLO in ms ({what})."),
        click.option("--tpot-slo-ms", type=FINITE, default=tpot_default_ms, help=f"TPOT SLO in ms ({what})."),
    )


think_time_option = field_option(LoadFlags, "think_time_s", "--think-time-s", type=FINITE)
turns_option = click.option(
    "--turns",
    type=click.IntRange(1, 1000),
    default=None,
    help="Turns per chat; each turn resends the history (default 1).",
)
db_option = click.option("--db", type=PATH, default=None, help="Results database (default: under the user data dir).")

engine_option = field_option(
    DeploymentFlags,
    "engine",
    "--engine",
    "-e",
    type=click.Choice(list(ENGINE_PROFILES), case_sensitive=False),
    show_default=True,
)


def _hw(name: str, *decls: str, **attrs: Any) -> Decorator:
    return field_option(DeploymentFlags, name, *decls, **attrs)


_HARDWARE: Sequence[Decorator] = (
    engine_option,
    _hw("gpu", "--gpu", "-g", type=click.STRING),
    gpu_file_option,
    _hw("num_gpus", "--num-gpus", "-n", type=click.INT),
    _hw("tp", "--tp", type=click.INT),
    _hw("pp", "--pp", type=click.INT),
    _hw("weights_dtype", "--weights-dtype", "-w", type=click.STRING),
    _hw("kv_cache_dtype", "--kv-cache-dtype", "-k", type=click.STRING),
    max_model_len_option,
    _hw("gpu_memory_utilization", "--gpu-memory-utilization", type=FINITE),
    _hw("kv_cache_memory_bytes", "--kv-cache-memory-bytes", type=click.INT),
    _hw("block_size", "--block-size", type=click.INT),
    _hw("max_num_seqs", "--max-num-seqs", type=click.INT),
    _hw("max_num_batched_tokens", "--max-num-batched-tokens", type=click.INT),
    _hw("rope_scaling", "--rope-scaling", type=click.STRING),
    _hw("dp", "--dp", type=click.INT),
    _hw("ep", "--ep", type=click.INT),
    _hw("nodes", "--nodes", type=click.INT),
    _hw("gpus_per_node", "--gpus-per-node", type=click.INT),
    _hw("redundant_experts", "--redundant-experts", type=click.INT),
    _hw("expert_skew", "--expert-skew", type=FINITE),
    _hw("a2a_mode", "--a2a-mode", type=click.Choice(["auto", "normal", "low_latency"])),
    _hw("two_batch_overlap", "--two-batch-overlap/--no-two-batch-overlap"),
    _hw("speculative", "--speculative", type=click.Choice(["mtp", "eagle", "eagle3", "draft", "ngram"])),
    _hw("num_speculative_tokens", "--num-speculative-tokens", type=click.INT),
    _hw("spec_acceptance", "--spec-acceptance", type=click.STRING),
    _hw("draft_model", "--draft-model", type=click.STRING),
)


def _collect_flags(cls: Callable[..., Any], names: Sequence[str], into: str) -> Callable[[F], F]:
    """Gather the keyword arguments ``names`` into one argument ``into`` of type ``cls``."""

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs[into] = cls(**{k: kwargs.pop(k) for k in names if k in kwargs})
            return f(*args, **kwargs)

        return cast(F, wrapper)

    return decorate


def hardware_options(f: F) -> F:
    """--gpu ... --max-num-batched-tokens as ``deployment: DeploymentFlags`` (no --model: bench
    names the served model itself and keeps its own ``model`` argument)."""
    names = [n for n in FLAG_NAMES if n != "model"]
    return stack(*_HARDWARE)(_collect_flags(DeploymentFlags, names, "deployment")(f))


def deployment_options(f: F) -> F:
    """--model, --gpu ... --max-num-batched-tokens as ``deployment: DeploymentFlags``."""
    return stack(model_option, *_HARDWARE)(_collect_flags(DeploymentFlags, FLAG_NAMES, "deployment")(f))


_STREAM_OPTIONS: Sequence[Decorator] = (
    field_option(StreamFlags, "prompt_tokens", "--prompt-tokens", "-p", type=click.INT),
    field_option(StreamFlags, "output_tokens", "--output-tokens", "-o", type=click.INT),
    field_option(StreamFlags, "prompt_sigma", "--prompt-sigma", type=FINITE),
    field_option(StreamFlags, "output_sigma", "--output-sigma", type=FINITE),
    field_option(StreamFlags, "arrival", "--arrival", type=click.Choice(["constant", "poisson", "gamma"])),
    field_option(StreamFlags, "cv", "--cv", type=FINITE),
)


def request_stream_options(f: F) -> F:
    """--prompt-tokens ... --cv as ``stream: StreamFlags``."""
    names = [fl.name for fl in fields(StreamFlags)]
    return stack(*_STREAM_OPTIONS)(_collect_flags(StreamFlags, names, "stream")(f))


def deployment_from_options(flags: DeploymentFlags) -> tuple[Deployment, list[str]]:
    """Specs from the flags (kept here for the commands that import it from the CLI)."""
    return deployment_from_flags(flags)


def efficiency_from_options(
    calibration: Path | None, deployment: Deployment | None = None
) -> tuple[Efficiency, str | None]:
    """Default efficiency factors, or a calibration file's (checked against ``deployment``)."""
    return efficiency_from_file(calibration, deployment)
