"""vLLM's defaults, resolved for a model and GPU, and the one place a Deployment is assembled.

- ``gpu_memory_utilization`` 0.9 (vLLM v0.11 ``CacheConfig``; v0.33 raised it to 0.92 — pass
  ``--gpu-memory-utilization 0.92`` to match a recent release);
- ``max_model_len``: the model's ``max_position_embeddings``;
- ``max_num_batched_tokens`` / ``max_num_seqs`` for the OpenAI API server
  (``EngineArgs.get_batch_defaults``): 8192 / 1024 on GPUs with at least 70 GiB that are not
  A100s, else 2048 / 256;
- block size: 16, 64 for MLA models (FlashMLA), raised for hybrid state models (see blocks.py);
  a given ``--block-size`` must be one vLLM accepts (``vllm/config/cache.py``:
  ``BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]``);
- ``max_model_len`` beyond the trained context (``max_position_embeddings``) is refused, as
  vLLM's ``ModelConfig._get_and_verify_max_len`` refuses it, unless RoPE scaling stretches it.
"""

from __future__ import annotations

from servecap.core.kv import resolve_kv_dtype
from servecap.core.memory import resolve_weight_dtype
from servecap.core.parallel import check_parallelism
from servecap.errors import ServecapError
from servecap.specs.deployment import Deployment, EngineConfig, Parallelism, RopeScaling, SpecDecodeConfig
from servecap.specs.engines import DEFAULT_ENGINE, default_memory_fraction, engine_profile
from servecap.specs.gpu import GpuSpec
from servecap.specs.model import ModelSpec
from servecap.units import GIB_BYTES

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
LARGE_GPU_BYTES = 70 * GIB_BYTES
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)  # vllm/config/cache.py BlockSize


def default_batch_limits(gpu: GpuSpec) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM's API server picks for this GPU."""
    large = gpu.total_memory_bytes >= LARGE_GPU_BYTES and "a100" not in gpu.id.lower()
    return (8192, 1024) if large else (2048, 256)


def _positive(field: str, value: int | float | None, *, upper: float | None = None) -> None:
    if value is None:
        return
    if value <= 0:
        raise ServecapError(field, value, "must be positive")
    if upper is not None and value > upper:
        raise ServecapError(field, value, f"must be at most {upper:g}")


def build_deployment(
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    weights_dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    max_model_len: int | None = None,
    gpu_memory_utilization: float | None = None,
    block_size: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_cache_memory_bytes: int | None = None,
    rope_scaling: RopeScaling | None = None,
    engine: str = DEFAULT_ENGINE,
    dp: int = 1,
    ep: int = 1,
    gpus_per_node: int = 8,
    redundant_experts: int = 0,
    expert_skew: float = 0.0,
    a2a_mode: str = "auto",
    two_batch_overlap: bool = False,
    speculative: SpecDecodeConfig | None = None,
) -> Deployment:
    """Validate the knobs and resolve the engine's defaults (vLLM's unless ``engine`` names
    another profile, :mod:`servecap.specs.engines`) into a concrete Deployment."""
    profile = engine_profile(engine)
    _positive("tp", tp, upper=1024)
    _positive("pp", pp, upper=1024)
    _positive("max_model_len", max_model_len, upper=1e8)
    _positive("block_size", block_size, upper=1 << 20)
    _positive("max_num_seqs", max_num_seqs, upper=1e6)
    _positive("max_num_batched_tokens", max_num_batched_tokens, upper=1e8)
    _positive("kv_cache_memory_bytes", kv_cache_memory_bytes, upper=1e15)
    _positive("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    if block_size is not None and profile.id == "vllm" and block_size not in VLLM_BLOCK_SIZES:
        raise ServecapError(
            "block_size", block_size, "vLLM accepts " + ", ".join(map(str, VLLM_BLOCK_SIZES)) + " tokens"
        )
    if rope_scaling is not None and not 1.0 <= rope_scaling.factor <= 1024:
        raise ServecapError("rope_scaling.factor", rope_scaling.factor, "must be between 1 and 1024")
    if max_model_len is not None:
        check_context(model, max_model_len, rope_scaling)
    if max_model_len is None:
        if model.max_position_embeddings <= 0:
            raise ServecapError(
                "max_model_len", None, "the config has no max_position_embeddings; pass --max-model-len"
            )
        max_model_len = model.max_position_embeddings
    default_tokens, default_seqs = default_batch_limits(gpu)
    if profile.max_num_batched_tokens is not None:
        default_tokens = profile.max_num_batched_tokens
    if profile.max_num_seqs is not None:
        default_seqs = profile.max_num_seqs
    default_fraction = default_memory_fraction(profile, tp)  # vLLM: DEFAULT_GPU_MEMORY_UTILIZATION
    config = EngineConfig(
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization or default_fraction,
        block_size=block_size if block_size is not None else profile.block_size,
        max_num_seqs=max_num_seqs or default_seqs,
        max_num_batched_tokens=max_num_batched_tokens or default_tokens,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        rope_scaling=rope_scaling,
        engine=profile.id,
    )
    if model.attention is not None and model.attention.num_heads % tp:
        raise ServecapError("tp", tp, f"must divide the {model.attention.num_heads} attention heads")
    parallelism = Parallelism(
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        gpus_per_node=gpus_per_node,
        redundant_experts=redundant_experts,
        expert_skew=expert_skew,
        a2a_mode=a2a_mode,
        two_batch_overlap=two_batch_overlap,
    )
    check_parallelism(parallelism, model, gpu)
    return Deployment(
        model=model,
        gpu=gpu,
        parallelism=parallelism,
        speculative=speculative,
        weights_dtype=resolve_weight_dtype(weights_dtype, model),
        kv_dtype=resolve_kv_dtype(kv_cache_dtype, model),
        engine=config,
    )


def check_context(model: ModelSpec, max_model_len: int, rope_scaling: RopeScaling | None) -> None:
    """Refuse a context longer than the model was trained for, as vLLM does, unless RoPE scaling
    stretches it (then the plan warns; see :func:`servecap.core.plan.plan`)."""
    trained = model.max_position_embeddings
    if trained <= 0:
        return
    limit = rope_scaling.max_len(trained) if rope_scaling is not None else trained
    if max_model_len <= limit:
        return
    if rope_scaling is None:
        raise ServecapError(
            "max_model_len",
            max_model_len,
            f"exceeds the model's trained context of {trained:,} tokens (max_position_embeddings); "
            "vLLM refuses it; stretch it with RoPE scaling, e.g. --rope-scaling "
            f'\'{{"rope_type":"yarn","factor":{-(-max_model_len // trained)},'
            f'"original_max_position_embeddings":{trained}}}\', or pass --max-model-len {trained}',
        )
    raise ServecapError(
        "max_model_len",
        max_model_len,
        f"exceeds {limit:,} tokens, the context RoPE scaling ({rope_scaling.rope_type}, factor "
        f"{rope_scaling.factor:g}) gives this model; raise the factor or shorten the context",
    )
