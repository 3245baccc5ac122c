"""The deployment and request-stream settings as a person names them, and the one place they
become specs (catalog lookups, vLLM's defaults, a calibration's coefficients).

Every interface (the CLI's flags, the HTTP API's bodies, a stored run's settings) fills a
:class:`DeploymentFlags`; :func:`deployment_from_flags` turns it into a
:class:`~servecap.specs.deployment.Deployment` plus notes on the defaults it used. Plain frozen
dataclasses: ``servecap plan`` imports this module and stays free of pydantic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from servecap.app.defaults import OUTPUT_TOKENS, PROMPT_TOKENS
from servecap.errors import ServecapError

if TYPE_CHECKING:
    from servecap.specs.deployment import Deployment, RopeScaling
    from servecap.specs.perf import Efficiency

DEFAULT_MODEL = "meta-llama/Llama-3.1-70B"
DEFAULT_GPU = "H200"
# The worked example (DESIGN.md): Llama-3.1-70B, FP8 weights, one H200, 8K-token requests.
DEFAULT_EXAMPLE_WEIGHTS_DTYPE = "fp8"
DEFAULT_EXAMPLE_MAX_MODEL_LEN = 8192
HELP = "help"  # the metadata key of a settings field's help text


def doc(help_text: str) -> dict[str, str]:
    """A settings field's metadata: its help, written once beside its default
    (``field(default=..., metadata=doc("..."))``); the CLI's options (``cli/fields.py``), the
    HTTP bodies and the OpenAPI schema read both from the field."""
    return {HELP: help_text}


def flag_default(cls: type, name: str) -> object:
    """The default of dataclass ``cls``'s field ``name`` (its factory's value for a mutable one)."""
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
            raise KeyError(f"{cls.__name__}.{name} has no default")
    raise KeyError(f"{cls.__name__} has no field {name}")


def flag_help(cls: type, name: str) -> str | None:
    """The help of dataclass ``cls``'s field ``name`` (None when it has none)."""
    for f in fields(cls):
        if f.name == name:
            text = f.metadata.get(HELP)
            return text if isinstance(text, str) else None
    raise KeyError(f"{cls.__name__} has no field {name}")


@dataclass(frozen=True, slots=True)
class DeploymentFlags:
    """The deployment as the flags name it (before any lookup or default): one value that every
    command taking a deployment receives as ``deployment``, and that runs store as settings."""

    model: str | None = field(
        default=None, metadata=doc("Catalog id (e.g. meta-llama/Llama-3.1-8B) or path to a config.json.")
    )
    gpu: str | None = field(default=None, metadata=doc("GPU name, e.g. H100, h200, A100-40GB, MI300X."))
    gpu_file: Path | None = field(default=None, metadata=doc("TOML file adding [[gpu]] rows."))
    num_gpus: int | None = field(
        default=None, metadata=doc("GPUs per replica (= tp x pp; sets tp when tp is not given).")
    )
    tp: int | None = field(default=None, metadata=doc("Tensor-parallel size."))
    pp: int = field(default=1, metadata=doc("Pipeline-parallel size."))
    weights_dtype: str | None = field(default=None, metadata=doc("auto|bf16|fp16|fp8|int8|int4|nvfp4|mxfp4."))
    kv_cache_dtype: str = field(default="auto", metadata=doc("auto|bf16|fp16|fp8."))
    max_model_len: int | None = field(default=None, metadata=doc("Context length (default: the model's)."))
    gpu_memory_utilization: float | None = field(
        default=None, metadata=doc("vLLM's share of GPU memory (default 0.9).")
    )
    kv_cache_memory_bytes: int | None = field(
        default=None,
        metadata=doc("KV budget per GPU in bytes, as vLLM's option (skips the estimate)."),
    )
    block_size: int | None = field(
        default=None,
        metadata=doc("Tokens per KV block: 1, 8, 16, 32, 64, 128 or 256 as vLLM (default 16; 64 for MLA)."),
    )
    max_num_seqs: int | None = field(default=None, metadata=doc("Max running requests (vLLM default by GPU)."))
    max_num_batched_tokens: int | None = field(
        default=None, metadata=doc("Token budget per step (vLLM default by GPU).")
    )
    rope_scaling: str | None = field(  # vLLM's --rope-scaling JSON
        default=None,
        metadata=doc(
            "vLLM's RoPE scaling JSON to run past the trained context, e.g. "
            '\'{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}\' '
            "(a bare number is a YaRN factor)."
        ),
    )
    dp: int = field(
        default=1,
        metadata=doc(
            "Attention data-parallel ranks per replica, 1-1024 (vLLM --data-parallel-size; SGLang "
            "--enable-dp-attention --dp): each rank its own batch, KV cache and scheduler; GPUs = tp x pp x dp."
        ),
    )
    ep: int = field(
        default=1,
        metadata=doc(
            "Expert-parallel size, 1-4096: whole experts spread over ep groups of the tp x dp GPUs "
            "(vLLM --enable-expert-parallel: ep = tp x dp; SGLang --ep-size); must divide tp x dp and the experts."
        ),
    )
    nodes: int | None = field(
        default=None, metadata=doc("Nodes per replica, 1-4096 (must divide tp x pp x dp; default: as --gpus-per-node).")
    )
    gpus_per_node: int | None = field(
        default=None, metadata=doc("GPUs per node, 1-72 (default 8): past it, collectives cross the NIC.")
    )
    redundant_experts: int = field(
        default=0, metadata=doc("Redundant expert replicas placed by EPLB, 0-4096 (vLLM/SGLang EPLB; needs --ep > 1).")
    )
    expert_skew: float = field(
        default=0.0,
        metadata=doc("Zipf exponent of the experts' token loads, 0 (uniform) to 4: the busiest GPU sets the pace."),
    )
    a2a_mode: str = field(
        default="auto",
        metadata=doc(
            "MoE all-to-all kernels: normal, low_latency (DeepEP) or auto (low-latency up to 256 tokens per rank)."
        ),
    )
    two_batch_overlap: bool = field(
        default=False,
        metadata=doc("Two micro-batches hide dispatch/combine behind compute (SGLang --enable-two-batch-overlap)."),
    )
    speculative: str | None = field(
        default=None,
        metadata=doc("Speculative decoding: mtp, eagle, eagle3, draft or ngram (vLLM --speculative-config method)."),
    )
    num_speculative_tokens: int | None = field(
        default=None, metadata=doc("Draft tokens per step, 1-16 (default: the method's published setting).")
    )
    spec_acceptance: str | None = field(
        default=None,
        metadata=doc(
            "Per-position acceptance, comma-separated probabilities in (0, 1] (position i accepted given "
            "the ones before were), or a mean acceptance length such as 'al=3.2' (default: the method's published one)."
        ),
    )
    draft_model: str | None = field(
        default=None, metadata=doc("Draft model for --speculative draft: catalog id or config.json path.")
    )
    engine: str = field(  # the engine profile: vllm, sglang, trtllm, trtllm-max-utilization
        default="vllm",
        metadata=doc(
            "Serving engine profile: its defaults (memory fraction, block size, batch limits) and "
            "scheduler (vLLM recompute preemption; SGLang output reservation; TensorRT-LLM "
            "GUARANTEED_NO_EVICT or MAX_UTILIZATION)."
        ),
    )

    def with_model(self, model: str | None) -> DeploymentFlags:
        return replace(self, model=model)

    def to_settings(self) -> dict[str, str | int | float | None]:
        """JSON-able, as stored with a run or served by the emulator."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> DeploymentFlags:
        """The inverse of :meth:`to_settings` (unknown keys, such as prefix caching, are ignored)."""
        kw = {k: settings[k] for k in FLAG_NAMES if settings.get(k) is not None}
        if "gpu_file" in kw:
            kw["gpu_file"] = Path(kw["gpu_file"])
        return cls(**kw)


FLAG_NAMES = tuple(f.name for f in fields(DeploymentFlags))


class StreamKwargs(TypedDict):
    """:class:`StreamFlags` as keyword arguments of :func:`servecap.workload.workload_from_flags`."""

    prompt_tokens: int
    output_tokens: int
    prompt_sigma: float | None
    output_sigma: float | None
    arrival: str
    cv: float | None


@dataclass(frozen=True, slots=True)
class StreamFlags:
    """The request stream's shape, the same flags on `simulate`, `capacity` and `bench`: the same
    flags and seed give the same requests in a simulated and a measured run."""

    prompt_tokens: int = field(
        default=PROMPT_TOKENS, metadata=doc("Prompt tokens (median when --prompt-sigma is given).")
    )
    output_tokens: int = field(
        default=OUTPUT_TOKENS, metadata=doc("Output tokens (median when --output-sigma is given).")
    )
    prompt_sigma: float | None = field(default=None, metadata=doc("Log-normal sigma of prompt lengths (0: fixed)."))
    output_sigma: float | None = field(default=None, metadata=doc("Log-normal sigma of output lengths (0: fixed)."))
    arrival: str = field(default="poisson", metadata=doc("Arrival process."))
    cv: float | None = field(default=None, metadata=doc("Gamma arrivals: coefficient of variation (burstiness)."))

    def workload_kwargs(self) -> StreamKwargs:
        """Keyword arguments of :func:`servecap.workload.workload_from_flags`."""
        return StreamKwargs(
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            prompt_sigma=self.prompt_sigma,
            output_sigma=self.output_sigma,
            arrival=self.arrival,
            cv=self.cv,
        )


@dataclass(frozen=True, slots=True)
class LoadFlags:
    """The load and length of a run as the flags name them: an open loop at ``rate`` req/s or
    ``users`` chat users thinking ``think_time_s`` between answers, stopped after
    ``num_requests`` or at ``duration_s`` (simulate, capacity, fleet simulate)."""

    rate: float | None = field(default=None, metadata=doc("Open loop: requests per second."))
    users: int | None = field(default=None, metadata=doc("Closed loop: number of chat users."))
    think_time_s: float | None = field(
        default=None,
        metadata=doc(
            "Mean think time between a user's turns in seconds (closed loop; default: 30 s per request minus "
            "the answer)."
        ),
    )
    duration_s: float | None = field(default=None, metadata=doc("Stop arrivals at this simulated time."))
    num_requests: int | None = field(default=None, metadata=doc("Stop after this many requests."))


def resolve_parallelism(num_gpus: int | None, tp: int | None, pp: int, dp: int = 1) -> tuple[int, int]:
    if not isinstance(dp, int) or dp < 1 or dp > 1024:
        raise ServecapError("dp", dp, "must be a whole number from 1 to 1024")
    if tp is None:
        if num_gpus is None:
            return 1, pp
        if num_gpus % (pp * dp):
            raise ServecapError("num_gpus", num_gpus, f"must be a multiple of pp x dp = {pp * dp}")
        return num_gpus // (pp * dp), pp
    if num_gpus is not None and num_gpus != tp * pp * dp:
        what = "tp x pp" if dp == 1 else "tp x pp x dp"
        raise ServecapError("num_gpus", num_gpus, f"must equal {what} = {tp * pp * dp}")
    return tp, pp


def parse_rope_scaling(text: str | None) -> RopeScaling | None:
    """vLLM's ``--rope-scaling`` JSON (``{"rope_type": "yarn", "factor": 4.0,
    "original_max_position_embeddings": 32768}``), or a bare YaRN factor (``4``)."""
    from servecap.specs.deployment import RopeScaling

    if text is None:
        return None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise ServecapError(
            "rope_scaling",
            text,
            'must be JSON such as \'{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}\'',
        ) from None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        if not math.isfinite(raw) or raw <= 0:
            raise ServecapError("rope_scaling", text, "a YaRN factor must be a positive finite number")
        return RopeScaling("yarn", float(raw))
    if not isinstance(raw, dict):
        raise ServecapError("rope_scaling", text, "must be a JSON object or a YaRN factor")
    unknown = set(raw) - {"rope_type", "type", "factor", "original_max_position_embeddings"}
    if unknown:
        raise ServecapError("rope_scaling", text, f"unknown keys {sorted(unknown)}")
    rope_type, factor = raw.get("rope_type", raw.get("type", "yarn")), raw.get("factor")
    original = raw.get("original_max_position_embeddings")
    if not isinstance(factor, int | float) or isinstance(factor, bool) or not math.isfinite(factor) or factor <= 0:
        raise ServecapError("rope_scaling.factor", factor, "must be a positive finite number")
    if original is not None and (not isinstance(original, int) or original <= 0):
        raise ServecapError("rope_scaling.original_max_position_embeddings", original, "must be a positive integer")
    return RopeScaling(str(rope_type), float(factor), original)


def fp4_note(asked: str | None, name: str, compute: str, gpu: Any) -> str | None:
    """What a 4-bit float weight format means on this GPU: ``-w fp4`` is read as NVFP4 (said,
    not silent), and on a GPU without FP4 tensor cores (Hopper, Ampere) the weights still take
    4.5 bits but their GEMMs are priced at the next wider rate it has (``GpuSpec.dense_tflops``);
    None when there is nothing to say."""
    if compute != "fp4":
        return None
    parts = []
    if asked is not None and asked.strip().lower() == "fp4":
        parts.append(f"-w fp4 read as {name} (NVIDIA's FP4 format; -w mxfp4 for the OCP one)")
    if not getattr(gpu, "fp4_dense_tflops", None):
        rate = "FP8" if getattr(gpu, "fp8_dense_tflops", None) else "BF16"
        parts.append(
            f"{gpu.id} has no FP4 tensor cores: {name} weights take 4.5 bits each, their GEMMs are priced at "
            f"its {rate} rate"
        )
    return "; ".join(parts) or None


def deployment_from_flags(flags: DeploymentFlags) -> tuple[Deployment, list[str]]:
    """Specs from names, vLLM's defaults resolved; also returns notes on the defaults used."""
    from servecap.catalog import load_gpu_file, lookup_gpu, resolve_draft_model, resolve_model
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
            "no --model/--gpu given: the built-in example (Llama-3.1-70B, FP8 weights, one H200, 8,192-token context)"
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
    tp_, pp_ = resolve_parallelism(flags.num_gpus, flags.tp, flags.pp, flags.dp)
    from servecap.core.parallel import resolve_nodes

    gpus_per_node = resolve_nodes(flags.nodes, flags.gpus_per_node, tp_ * pp_ * flags.dp)
    speculative = None
    if flags.speculative is not None or flags.num_speculative_tokens is not None or flags.spec_acceptance is not None:
        from servecap.core.spec_decode import spec_config_from_flags

        speculative = spec_config_from_flags(
            spec_model,
            flags.speculative,
            flags.num_speculative_tokens,
            flags.spec_acceptance,
            resolve_draft_model(flags.draft_model),
        )
    elif flags.draft_model is not None:
        raise ServecapError("draft_model", flags.draft_model, "needs --speculative draft")
    dep = build_deployment(
        spec_model,
        spec_gpu,
        tp=tp_,
        pp=pp_,
        weights_dtype=weights_dtype or "auto",
        kv_cache_dtype=flags.kv_cache_dtype,
        max_model_len=max_model_len,
        gpu_memory_utilization=flags.gpu_memory_utilization,
        block_size=flags.block_size,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_cache_memory_bytes=flags.kv_cache_memory_bytes,
        rope_scaling=parse_rope_scaling(flags.rope_scaling),
        engine=flags.engine,
        dp=flags.dp,
        ep=flags.ep,
        gpus_per_node=gpus_per_node,
        redundant_experts=flags.redundant_experts,
        expert_skew=flags.expert_skew,
        a2a_mode=flags.a2a_mode,
        two_batch_overlap=flags.two_batch_overlap,
        speculative=speculative,
    )
    if speculative is not None:
        notes.append(speculative.source)
    if max_model_len is None:
        notes.append(f"max_model_len {dep.engine.max_model_len} (the model's max_position_embeddings)")
    fp4 = fp4_note(weights_dtype, dep.weights_dtype.name, dep.weights_dtype.compute, spec_gpu)
    if fp4:
        notes.append(fp4)
    if max_num_seqs is None or max_num_batched_tokens is None:
        if dep.engine.engine == "vllm":
            notes.append(
                f"vLLM API-server defaults for {spec_gpu.id}: max_num_seqs {dep.engine.max_num_seqs}, "
                f"max_num_batched_tokens {dep.engine.max_num_batched_tokens}"
            )
        else:
            notes.append(engine_note(dep))
    return dep, notes


def engine_note(dep: Deployment) -> str:
    """One line on a non-vLLM engine profile's defaults and admission rule."""
    from servecap.specs.engines import engine_profile

    p = engine_profile(dep.engine.engine)
    e = dep.engine
    if p.admission == "reserve" and p.reserve_output_ratio >= 1.0:
        rule = "reserves KV for prompt + output on admission, never preempts"
    elif p.admission == "reserve":
        rule = (
            f"reserves {p.reserve_output_ratio:g} (decaying to {p.min_reserve_output_ratio:.3g}) of the output "
            "on admission, retracts and recomputes when the pool runs out"
        )
    else:
        rule = "admits on the next chunk's blocks, preempts by recompute"
    base = {
        "total": "of GPU memory",
        "free_after_weights": "of the memory free after the weights",
        "static": "of GPU memory for weights and KV (static)",
    }[p.memory_base]
    return (
        f"{p.name} ({p.version}) defaults: memory fraction {e.gpu_memory_utilization:g} {base}, "
        f"block size {e.block_size if e.block_size is not None else 16}, max batch {e.max_num_seqs}, "
        f"token budget {e.max_num_batched_tokens}; scheduler {rule}"
    )


def _gpu_id(name: str) -> str:
    """A calibration's GPU as its catalog id (``H100`` is ``H100-SXM``); an unknown name as given."""
    from servecap.catalog.gpus import lookup_gpu

    try:
        return lookup_gpu(name).id
    except ServecapError:
        return name


def efficiency_from_file(
    calibration: Path | None, deployment: Deployment | None = None
) -> tuple[Efficiency, str | None]:
    """Default efficiency factors (step model ``auto``: specs.step_choice), or a calibration
    file's fitted coefficients (and a note on them; the roofline's, which they were fitted on). Given the deployment they are applied to, a file fitted for another model, GPU or
    parallelism is refused: its efficiencies describe other kernels on other hardware."""
    if calibration is None:
        from servecap.specs.perf import Efficiency

        return Efficiency(step_model="auto"), None  # the step model the class's evidence favours
    from servecap.calibration import load_calibration

    cal = load_calibration(calibration)
    note = f"step-time coefficients from {calibration}"
    if deployment is not None:
        fitted = {"model": cal.model, "gpu": _gpu_id(cal.gpu), "tp": cal.tp, "pp": cal.pp}
        here = {
            "model": deployment.model.id,
            "gpu": deployment.gpu.id,
            "tp": deployment.parallelism.tp,
            "pp": deployment.parallelism.pp,
        }
        differ = [k for k in fitted if str(fitted[k]).lower() != str(here[k]).lower()]
        if differ:
            what = ", ".join(f"{k} {fitted[k]} (here {here[k]})" for k in differ)
            raise ServecapError(
                "calibration",
                str(calibration),
                f"was fitted for another deployment: {what}; calibrate this deployment from its own runs "
                "or drop --calibration",
            )
        dtypes = [
            (k, getattr(cal, k), v)
            for k, v in (("weights_dtype", deployment.weights_dtype.name), ("kv_cache_dtype", deployment.kv_dtype.name))
            if getattr(cal, k) not in ("auto", v)
        ]
        if dtypes:
            note += "; warning: fitted with " + ", ".join(f"{k} {a} (here {b})" for k, a, b in dtypes)
    return cal.efficiency(), note


def with_step_model(eff: Efficiency, step_model: str, calibration: Path | None) -> Efficiency:
    """``eff`` under the requested ``step_model``; ``auto`` (the default) leaves a calibration
    file's coefficients on the roofline they were fitted on."""
    if step_model == eff.step_model or (calibration is not None and step_model == "auto"):
        return eff
    return replace(eff, step_model=step_model)
