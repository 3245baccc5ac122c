"""GPU memory: weights per GPU, vLLM's KV budget, and the estimated non-KV memory.

vLLM's budget (``Worker.determine_available_memory``, v0.11; shared/reference section 1.3)::

    requested     = total_gpu_memory x gpu_memory_utilization
    kv_budget     = requested - (weights + peak activation + non-torch memory) - cudagraph memory

``--kv-cache-memory-bytes`` replaces ``kv_budget`` outright (vLLM skips profiling).

Weights per GPU: quantized parameters at the format's bytes (scales included) and the rest
(embeddings, LM head, norms) at the model dtype, divided by ``tp``; with ``pp`` each stage holds
its own layers (split as vLLM's ``get_pp_indices``), the first stage the embedding and the last
the final norm and LM head (tied embeddings are held again on the last stage when ``pp > 1``).

Estimated peak activation (what vLLM's profiling run of one ``max_num_batched_tokens`` batch and a
dummy sampler pass of ``max_num_seqs`` rows allocate); an estimate, documented, and overridable:

    tokens x act_bytes x (2 x hidden + 3 x mlp_width / tp)        # residual, hidden, gate/up/act
    + max_num_seqs x vocab x 4 B x 2                              # fp32 logits and probabilities

``mlp_width`` is the dense intermediate size, or ``experts_per_token x expert_intermediate`` for
MoE layers (fused-MoE intermediate cache). Non-torch memory (CUDA context, NCCL buffers) is taken
as 0.35 GiB per GPU, the larger of the two single-GPU figures in the start-up logs in
tests/data/vllm_startup_logs.json (0.35 and 0.10 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass

from servecap.core.params import layer_params_table
from servecap.errors import ServecapError
from servecap.specs.dtypes import WeightDtype, weight_dtype_named
from servecap.specs.model import LayerSpec, ModelSpec
from servecap.units import GIB_BYTES

NON_TORCH_BYTES_PER_GPU = int(0.35 * GIB_BYTES)
LOGITS_BYTES_PER_ELEMENT = 4  # the sampler works on fp32 logits
_MODEL_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM's ``get_pp_indices``: even split, the remainder going
    one layer each to the stages before the last."""
    if pp < 1 or pp > num_layers:
        raise ServecapError("pp", pp, f"must be between 1 and the number of layers ({num_layers})")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def stage_layers(model: ModelSpec, pp: int) -> list[tuple[LayerSpec, ...]]:
    parts = pp_partition(model.num_layers, pp)
    out, start = [], 0
    for n in parts:
        out.append(model.layers[start : start + n])
        start += n
    return out


def resolve_weight_dtype(name: str, model: ModelSpec) -> WeightDtype:
    """``auto``: the checkpoint's quantization if it ships one, else its torch dtype."""
    if name == "auto":
        return weight_dtype_named(model.quantization or model.torch_dtype)
    return weight_dtype_named(name)


@dataclass(frozen=True, slots=True)
class StageWeights:
    quantized_params: int
    unquantized_params: int
    weights_bytes_per_gpu: int


def stage_weights(
    model: ModelSpec,
    layers: tuple[LayerSpec, ...],
    *,
    first: bool,
    last: bool,
    pp: int,
    tp: int,
    weights_dtype: WeightDtype,
    dp: int = 1,
    redundant_experts: int = 0,
) -> StageWeights:
    """Bytes of weights one GPU of one pipeline stage holds.

    With attention data parallelism (``dp`` ranks) the routed experts spread over all
    ``tp x dp`` GPUs of the stage and ``redundant_experts`` extra copies (EPLB) add
    ``redundant / E`` of them; everything else is split over ``tp`` and replicated per rank
    (:mod:`servecap.core.parallel`)."""
    experts_only = (
        weights_dtype.quantized and model.quantized_scope == "experts" and weights_dtype.name == model.quantization
    )
    quantized = unquantized = 0
    routed = 0  # routed expert params of the stage (their bytes are spread over tp x dp)
    table = layer_params_table(model)
    for layer in layers:
        p = table[layer]
        routed += p.routed_experts
        if not weights_dtype.quantized:
            unquantized += p.total
        elif experts_only:
            quantized += p.routed_experts
            unquantized += p.total - p.routed_experts
        else:
            quantized += p.total - p.norms
            unquantized += p.norms
    embedding = model.vocab_size * model.hidden_size
    if first:
        unquantized += embedding + model.vision_params
    if last:
        unquantized += model.hidden_size  # final norm
        if not model.tie_word_embeddings or pp > 1:
            unquantized += embedding  # LM head (a tied one is a second copy on the last stage)
    base = _MODEL_DTYPE_BYTES[model.torch_dtype]
    unquantized_bytes = unquantized * (weights_dtype.bytes_per_param if not weights_dtype.quantized else base)
    total = quantized * weights_dtype.bytes_per_param + unquantized_bytes
    if dp == 1 and redundant_experts == 0:
        return StageWeights(quantized, unquantized, int(total / tp))
    routed_bytes = routed * (weights_dtype.bytes_per_param if weights_dtype.quantized else base)
    num_experts = model.moe.num_experts if model.moe is not None else 1
    expert_bytes = routed_bytes * (num_experts + redundant_experts) / num_experts / (tp * dp)
    return StageWeights(quantized, unquantized, int((total - routed_bytes) / tp + expert_bytes))


def activation_peak_bytes(model: ModelSpec, *, tp: int, max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """Estimated torch peak of vLLM's profiling run (see the module docstring)."""
    act = _MODEL_DTYPE_BYTES[model.torch_dtype]
    widths = [model.dense_intermediate_size if any(layer.mlp == "dense" for layer in model.layers) else 0]
    if model.moe is not None:
        widths.append(
            model.moe.experts_per_token * model.moe.expert_intermediate_size + model.moe.shared_intermediate_size
        )
    mlp_width = max(widths)
    per_token = act * (2 * model.hidden_size + 3 * mlp_width / tp)
    logits = min(max_num_seqs, max_num_batched_tokens) * model.vocab_size * LOGITS_BYTES_PER_ELEMENT * 2
    return int(max_num_batched_tokens * per_token + logits)


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    total_gpu_memory_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_budget_bytes: int
    kv_budget_overridden: bool

    @property
    def non_kv_bytes(self) -> int:
        return self.weights_bytes + self.activation_bytes + self.non_torch_bytes + self.cudagraph_bytes


def memory_budget(
    *,
    total_gpu_memory_bytes: int,
    gpu_memory_utilization: float,
    weights_bytes: int,
    activation_bytes: int,
    non_torch_bytes: int,
    cudagraph_bytes: int = 0,
    kv_cache_memory_bytes: int | None = None,
    memory_base: str = "total",
) -> MemoryBudget:
    """The KV budget of one GPU. ``memory_base`` says what ``gpu_memory_utilization`` is a
    fraction of (:class:`servecap.specs.engines.EngineProfile`):

    - ``"total"`` (vLLM): ``kv = total x f - weights - activation - non_torch - cudagraph``;
    - ``"free_after_weights"`` (TensorRT-LLM ``free_gpu_memory_fraction``, of the memory free
      after the weights are loaded and the activations profiled):
      ``kv = f x (total - weights - activation - non_torch - cudagraph)``;
    - ``"static"`` (SGLang ``mem_fraction_static``: weights and KV pool share ``total x f``, the
      activations live in the rest): ``kv = total x f - weights - non_torch - cudagraph``.

    ``requested_bytes`` is what the engine takes (non-KV memory plus the KV budget).
    """
    if memory_base == "free_after_weights":
        free = total_gpu_memory_bytes - weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes
        kv = int(free * gpu_memory_utilization)
        requested = total_gpu_memory_bytes - free + kv
    elif memory_base == "static":
        requested = int(total_gpu_memory_bytes * gpu_memory_utilization) + activation_bytes
        kv = requested - weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes
    elif memory_base == "total":
        requested = int(total_gpu_memory_bytes * gpu_memory_utilization)
        kv = requested - weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes
    else:
        raise ServecapError("memory_base", memory_base, "must be total, free_after_weights or static")
    if kv_cache_memory_bytes is not None:
        kv = kv_cache_memory_bytes
    return MemoryBudget(
        total_gpu_memory_bytes=total_gpu_memory_bytes,
        gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=requested,
        weights_bytes=weights_bytes,
        activation_bytes=activation_bytes,
        non_torch_bytes=non_torch_bytes,
        cudagraph_bytes=cudagraph_bytes,
        kv_budget_bytes=kv,
        kv_budget_overridden=kv_cache_memory_bytes is not None,
    )
