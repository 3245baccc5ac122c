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
    StreamFlags,
    deployment_from_flags,
    efficiency_from_file,
    resolve_parallelism,
)
from servecap.cli.numbers import FINITE

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


def stack(*decorators: Decorator) -> Callable[[F], F]:
    """One decorator applying ``decorators`` as if written top to bottom (help lists them in order)."""

    def apply(f: F) -> F:
        for decorator in reversed(decorators):
            f = cast(F, decorator(f))
        return f

    return apply


model_option = click.option(
    "--model",
    "-m",
    type=click.STRING,
    default=None,
    help="Catalog id (e.g. meta-llama/Llama-3.1-8B) or path to a config.json.",
)
gpu_file_option = click.option("--gpu-file", type=PATH, default=None, help="TOML file adding [[gpu]] rows.")
max_model_len_option = click.option(
    "--max-model-len", "-l", type=click.INT, default=None, help="Context length (default: the model's)."
)
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


think_time_option = click.option(
    "--think-time-s",
    type=FINITE,
    default=None,
    help="Mean think time between a user's turns in seconds (closed loop; default: 30 s per request minus the answer).",
)
turns_option = click.option(
    "--turns",
    type=click.IntRange(1, 1000),
    default=None,
    help="Turns per chat; each turn resends the history (default 1).",
)
db_option = click.option("--db", type=PATH, default=None, help="Results database (default: under the user data dir).")

engine_option = click.option(
    "--engine",
    "-e",
    type=click.Choice(["vllm", "sglang", "trtllm", "trtllm-max-utilization"], case_sensitive=False),
    default="vllm",
    show_default=True,
    help="Serving engine profile: its defaults (memory fraction, block size, batch limits) and "
    "scheduler (vLLM recompute preemption; SGLang output reservation; TensorRT-LLM "
    "GUARANTEED_NO_EVICT or MAX_UTILIZATION).",
)

_HARDWARE: Sequence[Decorator] = (
    engine_option,
    click.option("--gpu", "-g", type=click.STRING, default=None, help="GPU name, e.g. H100, h200, A100-40GB, MI300X."),
    gpu_file_option,
    click.option(
        "--num-gpus",
        "-n",
        type=click.INT,
        default=None,
        help="GPUs per replica (= tp x pp; sets tp when tp is not given).",
    ),
    click.option("--tp", type=click.INT, default=None, help="Tensor-parallel size."),
    click.option("--pp", type=click.INT, default=1, help="Pipeline-parallel size."),
    click.option(
        "--weights-dtype", "-w", type=click.STRING, default=None, help="auto|bf16|fp16|fp8|int8|int4|nvfp4|mxfp4."
    ),
    click.option("--kv-cache-dtype", "-k", type=click.STRING, default="auto", help="auto|bf16|fp16|fp8."),
    max_model_len_option,
    click.option(
        "--gpu-memory-utilization", type=FINITE, default=None, help="vLLM's share of GPU memory (default 0.9)."
    ),
    click.option(
        "--kv-cache-memory-bytes",
        type=click.INT,
        default=None,
        help="KV budget per GPU in bytes, as vLLM's option (skips the estimate).",
    ),
    click.option(
        "--block-size",
        type=click.INT,
        default=None,
        help="Tokens per KV block: 1, 8, 16, 32, 64, 128 or 256 as vLLM (default 16; 64 for MLA).",
    ),
    click.option("--max-num-seqs", type=click.INT, default=None, help="Max running requests (vLLM default by GPU)."),
    click.option(
        "--max-num-batched-tokens", type=click.INT, default=None, help="Token budget per step (vLLM default by GPU)."
    ),
    click.option(
        "--rope-scaling",
        type=click.STRING,
        default=None,
        help="vLLM's RoPE scaling JSON to run past the trained context, e.g. "
        '\'{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}\' '
        "(a bare number is a YaRN factor).",
    ),
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
    click.option(
        "--prompt-tokens",
        "-p",
        type=click.INT,
        default=1024,
        help="Prompt tokens (median when --prompt-sigma is given).",
    ),
    click.option(
        "--output-tokens",
        "-o",
        type=click.INT,
        default=128,
        help="Output tokens (median when --output-sigma is given).",
    ),
    click.option("--prompt-sigma", type=FINITE, default=None, help="Log-normal sigma of prompt lengths (0: fixed)."),
    click.option("--output-sigma", type=FINITE, default=None, help="Log-normal sigma of output lengths (0: fixed)."),
    click.option(
        "--arrival", type=click.Choice(["constant", "poisson", "gamma"]), default="poisson", help="Arrival process."
    ),
    click.option("--cv", type=FINITE, default=None, help="Gamma arrivals: coefficient of variation (burstiness)."),
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
