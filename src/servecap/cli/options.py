"""Options shared by every command that takes a deployment (plan, simulate, emulate, ...).

Stack these click decorators on a command (``@deployment_options``, ``@calibration_option``,
``@json_option``) and pass the values to :func:`deployment_from_options`; one place turns names
into specs and resolves vLLM's defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

if TYPE_CHECKING:
    from servecap.specs.deployment import Deployment
    from servecap.specs.perf import Efficiency

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

DEFAULT_MODEL = "meta-llama/Llama-3.1-70B"
DEFAULT_GPU = "H200"
# The worked example (DESIGN.md): Llama-3.1-70B, FP8 weights, one H200, 8K-token requests.
DEFAULT_EXAMPLE_WEIGHTS_DTYPE = "fp8"
DEFAULT_EXAMPLE_MAX_MODEL_LEN = 8192

PATH = click.Path(path_type=Path)


def stack(*decorators: Decorator) -> Callable[[F], F]:
    """One decorator applying ``decorators`` as if written top to bottom (help lists them in order)."""

    def apply(f: F) -> F:
        for decorator in reversed(decorators):
            f = cast(F, decorator(f))
        return f

    return apply


model_option = click.option(
    "--model", "-m", type=click.STRING, default=None,
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
        click.option("--ttft-slo-ms", type=click.FLOAT, default=ttft_default_ms, help=f"TTFT SLO in ms ({what})."),
        click.option("--tpot-slo-ms", type=click.FLOAT, default=tpot_default_ms, help=f"TPOT SLO in ms ({what})."),
    )


db_option = click.option("--db", type=PATH, default=None, help="Results database (default: under the user data dir).")

_HARDWARE: Sequence[Decorator] = (
    click.option("--gpu", "-g", type=click.STRING, default=None, help="GPU name, e.g. H100, h200, A100-40GB, MI300X."),
    gpu_file_option,
    click.option("--num-gpus", "-n", type=click.INT, default=None,
                 help="GPUs per replica (= tp x pp; sets tp when tp is not given)."),
    click.option("--tp", type=click.INT, default=None, help="Tensor-parallel size."),
    click.option("--pp", type=click.INT, default=1, help="Pipeline-parallel size."),
    click.option("--weights-dtype", "-w", type=click.STRING, default=None, help="auto|bf16|fp16|fp8|int8|int4|nvfp4|mxfp4."),
    click.option("--kv-cache-dtype", "-k", type=click.STRING, default="auto", help="auto|bf16|fp16|fp8."),
    max_model_len_option,
    click.option("--gpu-memory-utilization", type=click.FLOAT, default=None,
                 help="vLLM's share of GPU memory (default 0.9)."),
    click.option("--kv-cache-memory-bytes", type=click.INT, default=None,
                 help="KV budget per GPU in bytes, as vLLM's option (skips the estimate)."),
    click.option("--block-size", type=click.INT, default=None, help="Tokens per KV block (default 16; 64 for MLA)."),
    click.option("--max-num-seqs", type=click.INT, default=None, help="Max running requests (vLLM default by GPU)."),
    click.option("--max-num-batched-tokens", type=click.INT, default=None,
                 help="Token budget per step (vLLM default by GPU)."),
)



@dataclass(frozen=True, slots=True)
class DeploymentFlags:
    """The deployment as the flags name it (before any lookup or default): one value that every
    command taking a deployment receives as ``deployment``, and that runs store as settings."""

    model: str | None = None
    gpu: str | None = None
    gpu_file: Path | None = None
    num_gpus: int | None = None
    tp: int | None = None
    pp: int = 1
    weights_dtype: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    block_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None

    def with_model(self, model: str | None) -> DeploymentFlags:
        return replace(self, model=model)

    def to_settings(self) -> dict[str, Any]:
        """JSON-able, as stored with a run or served by the emulator."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> DeploymentFlags:
        """The inverse of :meth:`to_settings` (unknown keys, such as prefix caching, are ignored)."""
        kw = {k: settings[k] for k in _FLAG_NAMES if settings.get(k) is not None}
        if "gpu_file" in kw:
            kw["gpu_file"] = Path(kw["gpu_file"])
        return cls(**kw)


_FLAG_NAMES = tuple(f.name for f in fields(DeploymentFlags))


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
    names = [n for n in _FLAG_NAMES if n != "model"]
    return stack(*_HARDWARE)(_collect_flags(DeploymentFlags, names, "deployment")(f))


def deployment_options(f: F) -> F:
    """--model, --gpu ... --max-num-batched-tokens as ``deployment: DeploymentFlags``."""
    return stack(model_option, *_HARDWARE)(_collect_flags(DeploymentFlags, _FLAG_NAMES, "deployment")(f))


@dataclass(frozen=True, slots=True)
class StreamFlags:
    """The request stream's shape, the same flags on `simulate`, `capacity` and `bench`: the same
    flags and seed give the same requests in a simulated and a measured run."""

    prompt_tokens: int = 1024
    output_tokens: int = 128
    prompt_sigma: float | None = None
    output_sigma: float | None = None
    arrival: str = "poisson"
    cv: float | None = None

    def workload_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`servecap.workload.workload_from_flags`."""
        return asdict(self)


_STREAM_OPTIONS: Sequence[Decorator] = (
    click.option("--prompt-tokens", "-p", type=click.INT, default=1024,
                 help="Prompt tokens (median when --prompt-sigma is given)."),
    click.option("--output-tokens", "-o", type=click.INT, default=128,
                 help="Output tokens (median when --output-sigma is given)."),
    click.option("--prompt-sigma", type=click.FLOAT, default=None, help="Log-normal sigma of prompt lengths (0: fixed)."),
    click.option("--output-sigma", type=click.FLOAT, default=None, help="Log-normal sigma of output lengths (0: fixed)."),
    click.option("--arrival", type=click.STRING, default="poisson", help="constant|poisson|gamma."),
    click.option("--cv", type=click.FLOAT, default=None, help="Gamma arrivals: coefficient of variation (burstiness)."),
)


def request_stream_options(f: F) -> F:
    """--prompt-tokens ... --cv as ``stream: StreamFlags``."""
    names = [fl.name for fl in fields(StreamFlags)]
    return stack(*_STREAM_OPTIONS)(_collect_flags(StreamFlags, names, "stream")(f))


def resolve_parallelism(num_gpus: int | None, tp: int | None, pp: int) -> tuple[int, int]:
    from servecap.errors import ServecapError

    if tp is None:
        if num_gpus is None:
            return 1, pp
        if num_gpus % pp:
            raise ServecapError("num_gpus", num_gpus, f"must be a multiple of pp={pp}")
        return num_gpus // pp, pp
    if num_gpus is not None and num_gpus != tp * pp:
        raise ServecapError("num_gpus", num_gpus, f"must equal tp x pp = {tp * pp}")
    return tp, pp


def deployment_from_options(flags: DeploymentFlags) -> tuple[Deployment, list[str]]:
    """Specs from names, vLLM's defaults resolved; also returns notes on the defaults used."""
    from servecap.catalog import load_gpu_file, lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment

    model, gpu, weights_dtype, max_model_len = flags.model, flags.gpu, flags.weights_dtype, flags.max_model_len
    max_num_seqs, max_num_batched_tokens = flags.max_num_seqs, flags.max_num_batched_tokens
    notes: list[str] = []
    if model is None and gpu is None:
        model, gpu = DEFAULT_MODEL, DEFAULT_GPU
        if weights_dtype is None:
            weights_dtype = DEFAULT_EXAMPLE_WEIGHTS_DTYPE
        if max_model_len is None:
            max_model_len = DEFAULT_EXAMPLE_MAX_MODEL_LEN
        notes.append(
            "no --model/--gpu given: the built-in example (Llama-3.1-70B, FP8 weights, one H200, "
            "8,192-token context)"
        )
    elif model is None:
        model = DEFAULT_MODEL
        notes.append(f"no --model given: {DEFAULT_MODEL}")
    elif gpu is None:
        gpu = DEFAULT_GPU
        notes.append(f"no --gpu given: {DEFAULT_GPU}")
    assert model is not None and gpu is not None
    extra = load_gpu_file(flags.gpu_file) if flags.gpu_file is not None else None
    spec_gpu = lookup_gpu(gpu, extra)
    spec_model = resolve_model(model)
    tp_, pp_ = resolve_parallelism(flags.num_gpus, flags.tp, flags.pp)
    dep = build_deployment(
        spec_model, spec_gpu, tp=tp_, pp=pp_, weights_dtype=weights_dtype or "auto",
        kv_cache_dtype=flags.kv_cache_dtype, max_model_len=max_model_len,
        gpu_memory_utilization=flags.gpu_memory_utilization, block_size=flags.block_size,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        kv_cache_memory_bytes=flags.kv_cache_memory_bytes,
    )
    if max_model_len is None:
        notes.append(f"max_model_len {dep.engine.max_model_len} (the model's max_position_embeddings)")
    if max_num_seqs is None or max_num_batched_tokens is None:
        notes.append(
            f"vLLM API-server defaults for {spec_gpu.id}: max_num_seqs {dep.engine.max_num_seqs}, "
            f"max_num_batched_tokens {dep.engine.max_num_batched_tokens}"
        )
    return dep, notes


def efficiency_from_options(calibration: Path | None) -> tuple[Efficiency, str | None]:
    """Default efficiency factors, or a calibration file's fitted coefficients."""
    if calibration is None:
        from servecap.specs.perf import Efficiency

        return Efficiency(), None
    from servecap.calibration import load_calibration

    cal = load_calibration(calibration)
    return cal.efficiency(), f"step-time coefficients from {calibration}"
