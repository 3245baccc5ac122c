"""Engine profiles: what differs between vLLM, SGLang and TensorRT-LLM for the planner and the
simulator. A profile is data — the engine's defaults (memory fraction and what it is a fraction
of, KV block size, batch and token limits) and the name of its scheduler's admission rule — with
the source of every value. The simulator's scheduler policy (:mod:`servecap.sim.scheduler_policy`)
reads ``admission`` and ``reserve_output_ratio``; the planner (:func:`servecap.core.defaults.
build_deployment`, :func:`servecap.core.memory.memory_budget`) reads the rest.

Admission rules (how a waiting request is let into the running batch, and what happens when the
KV pool runs out):

- ``"recompute"`` — vLLM V1 (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``): admit
  a request when the blocks of its next chunk are free; when a running request cannot grow, the
  youngest is preempted and later recomputed. TensorRT-LLM's ``MAX_UTILIZATION`` capacity policy
  behaves the same way ("pack as many requests as possible at each iteration ... at the risk of
  having to pause requests if the KV cache size limit is reached", TensorRT-LLM performance
  tuning guide, "Useful Runtime Options: Capacity Scheduler Policy").
- ``"reserve"`` — admit a request only when the pool can hold, beside what it takes now, the rest
  of its prompt plus ``reserve_output_ratio`` of its output, on top of what the running requests
  have reserved the same way. TensorRT-LLM's default ``GUARANTEED_NO_EVICT`` reserves the whole
  output (ratio 1: "guarantee that a started request is never paused", the same guide;
  ``SchedulerConfig.capacity_scheduler_policy`` defaults to it in ``tensorrt_llm.llmapi``).
  SGLang's ``PrefillAdder`` (``python/sglang/srt/managers/schedule_policy.py``) subtracts
  ``min(max_new_tokens - generated, CLIP_MAX_NEW_TOKENS) x new_token_ratio`` per running
  request from the free and evictable tokens (``rem_total_tokens``) before admitting; the ratio
  starts at ``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7 x ``schedule_conservativeness`` 1.0, decays each
  decode step towards 0.7 x 0.14 = 0.098 over 600 steps (``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR``,
  ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS``, ``python/sglang/global_config.py``) and is reset when
  the scheduler idles; a decode step that runs out of memory retracts requests (freed,
  recomputed later) and re-estimates the ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from servecap.errors import ServecapError, did_you_mean

Admission = Literal["recompute", "reserve"]
MemoryBase = Literal["total", "free_after_weights", "static"]

DEFAULT_ENGINE = "vllm"


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """One serving engine's defaults and scheduler semantics (the module docstring gives the
    admission rules; each field's source is in ``sources``).

    - ``memory_fraction`` of ``memory_base``: ``"total"`` (vLLM ``gpu_memory_utilization``: the
      weights, activations and KV cache share ``fraction x total``), ``"free_after_weights"``
      (TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction``: the KV cache takes ``fraction x``
      the memory left after the weights and the activations), ``"static"`` (SGLang
      ``mem_fraction_static``: weights and KV cache share ``fraction x total``; activations live
      in the rest).
    - ``block_size``: tokens per KV block (``None``: vLLM's rule, 16, 64 for MLA).
    - ``max_num_seqs`` / ``max_num_batched_tokens``: ``None`` takes vLLM's API-server defaults
      by GPU (:func:`servecap.core.defaults.default_batch_limits`).
    - ``reserve_output_ratio`` / ``min_reserve_output_ratio`` / ``reserve_decay_steps``: the
      ``"reserve"`` rule's share of a request's output held back on admission, the floor it
      decays to and the decode steps it takes (equal ratios: a constant share).
    - ``reserve_output_clip_tokens``: SGLang's ``CLIP_MAX_NEW_TOKENS`` (4,096): the output
      counted for one request is clipped to it (``None``: not clipped).
    - ``fused_elementwise``: rotary embedding and the KV-cache write run inside the attention
      kernel and SiLU-and-mul in the gated GEMM's epilogue, so only the residual-add RMSNorms move
      activations on their own (:mod:`servecap.core.activation_traffic`). TensorRT-LLM: its
      attention op applies RoPE and writes K and V to the cache in its own pre-processing
      (``docs/source/advanced/gpt-attention.md``, "the GPT attention operator"; the
      ``applyBiasRopeUpdateKVCache`` kernel) and fuses the SwiGLU into the FP8 gate/up GEMM
      (``fused_gated_gemm``). vLLM and SGLang run them as separate kernels.
    - ``cuda_graph_max_batch``: the largest step (tokens) the engine replays as a captured CUDA
      graph; larger steps launch every kernel eagerly (the operation step's ``eager_launch``).
      vLLM: ``max_cudagraph_capture_size`` defaults to ``min(2 x max_num_seqs, 512)``
      (``vllm/config/compilation.py``, ``CompilationConfig``), 512 at its default batch limits.
      ``None`` where servecap has no sourced value: no eager launch is priced.
    - ``mixed_prefill_decode``: prefill chunks and decodes share a step (vLLM's chunked prefill,
      TensorRT-LLM's in-flight batching). SGLang by default does not (``--enable-mixed-chunk``
      is off): a step that can prefill runs prefill only and the decoders wait for the next.
    """

    id: str
    name: str
    version: str
    memory_fraction: float
    memory_base: MemoryBase
    block_size: int | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    admission: Admission
    reserve_output_ratio: float = 0.0
    min_reserve_output_ratio: float = 0.0
    reserve_decay_steps: int = 0
    reserve_output_clip_tokens: int | None = None
    mixed_prefill_decode: bool = True
    fused_elementwise: bool = False
    cuda_graph_max_batch: int | None = None
    sources: tuple[str, ...] = ()


VLLM = EngineProfile(
    id="vllm",
    name="vLLM",
    version="V1 engine (0.11 and later)",
    memory_fraction=0.9,
    memory_base="total",
    block_size=None,
    max_num_seqs=None,
    max_num_batched_tokens=None,
    admission="recompute",
    cuda_graph_max_batch=512,
    sources=(
        "gpu_memory_utilization 0.9: vllm/config/cache.py CacheConfig (v0.11; 0.92 from v0.33)",
        "block size 16 (64 for MLA): vllm/config/cache.py, FlashMLA's kernel block",
        "max_num_seqs / max_num_batched_tokens: EngineArgs.get_batch_defaults (8192 / 1024 on "
        "GPUs of at least 70 GiB that are not A100s, else 2048 / 256)",
        "recompute preemption: vllm/v1/core/sched/scheduler.py Scheduler.schedule",
    ),
)

TRTLLM = EngineProfile(
    id="trtllm",
    name="TensorRT-LLM",
    version="1.0 (PyTorch backend), capacity policy GUARANTEED_NO_EVICT",
    memory_fraction=0.9,
    memory_base="free_after_weights",
    block_size=32,
    max_num_seqs=2048,
    max_num_batched_tokens=8192,
    admission="reserve",
    reserve_output_ratio=1.0,
    min_reserve_output_ratio=1.0,
    fused_elementwise=True,
    sources=(
        "free_gpu_memory_fraction 0.9 of the free memory after loading the weights: "
        "docs/source/examples/kvcacheconfig.md ('TensorRT-LLM tries to allocate 90% of free GPU "
        "memory (after loading weights) for KV cache')",
        "tokens_per_block 32: tensorrt_llm/llmapi/llm_args.py KvCacheConfig",
        "max_batch_size 2048: tensorrt_llm/llmapi/llm_args.py BaseLlmArgs",
        "max_num_tokens 8192: tensorrt_llm/llmapi/llm_args.py BaseLlmArgs (BuildConfig default)",
        "GUARANTEED_NO_EVICT by default: SchedulerConfig.capacity_scheduler_policy; the "
        "performance tuning guide, 'Capacity Scheduler Policy'",
    ),
)

TRTLLM_MAX_UTILIZATION = EngineProfile(
    id="trtllm-max-utilization",
    name="TensorRT-LLM",
    version="1.0 (PyTorch backend), capacity policy MAX_UTILIZATION",
    memory_fraction=TRTLLM.memory_fraction,
    memory_base=TRTLLM.memory_base,
    block_size=TRTLLM.block_size,
    max_num_seqs=TRTLLM.max_num_seqs,
    max_num_batched_tokens=TRTLLM.max_num_batched_tokens,
    admission="recompute",
    fused_elementwise=TRTLLM.fused_elementwise,
    sources=(
        *TRTLLM.sources[:4],
        "MAX_UTILIZATION packs as many requests as fit each iteration and pauses requests when "
        "the KV cache runs out: the performance tuning guide, 'Capacity Scheduler Policy'",
    ),
)

SGLANG = EngineProfile(
    id="sglang",
    name="SGLang",
    version="0.4-0.5 (radix cache, chunked prefill)",
    memory_fraction=0.88,
    memory_base="static",
    block_size=1,
    max_num_seqs=2048,
    max_num_batched_tokens=8192,
    admission="reserve",
    reserve_output_ratio=0.7,
    min_reserve_output_ratio=0.7 * 0.14,
    reserve_decay_steps=600,
    reserve_output_clip_tokens=4096,
    mixed_prefill_decode=False,
    sources=(
        "mem_fraction_static 0.88 at tp 1 (0.87 tp 2, 0.85 tp 4, 0.81 tp 8, 0.79 tp 16): "
        "python/sglang/srt/server_args.py ServerArgs.__post_init__",
        "page_size 1: ServerArgs.page_size",
        "chunked_prefill_size 8192 on GPUs of 25 GB or more (2048 below): ServerArgs.__post_init__",
        "max_running_requests 2048: the lower bound of the request pool ModelRunner sizes "
        "(between 2048 and 4096 by the KV pool); the KV pool is usually the tighter limit",
        "new_token_ratio 0.7 decaying to 0.098 over 600 steps, CLIP_MAX_NEW_TOKENS 4096: "
        "python/sglang/global_config.py, python/sglang/srt/managers/schedule_policy.py",
        "prefill batches before decode batches, not mixed (enable_mixed_chunk False): "
        "Scheduler.get_next_batch_to_run, ServerArgs.enable_mixed_chunk",
    ),
)

ENGINE_PROFILES: dict[str, EngineProfile] = {p.id: p for p in (VLLM, SGLANG, TRTLLM, TRTLLM_MAX_UTILIZATION)}
"""Every engine ``--engine`` accepts, by id."""

SGLANG_MEM_FRACTION_BY_TP: tuple[tuple[int, float], ...] = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
"""SGLang's ``mem_fraction_static`` default by tensor parallelism (``ServerArgs.__post_init__``)."""


def engine_profile(engine_id: str) -> EngineProfile:
    """The profile of ``engine_id`` (``vllm``, ``sglang``, ``trtllm``, ``trtllm-max-utilization``);
    an unknown name is one clear error."""
    profile = ENGINE_PROFILES.get(engine_id.lower().strip())
    if profile is None:
        raise ServecapError(
            "engine",
            engine_id,
            "must be one of " + ", ".join(ENGINE_PROFILES) + did_you_mean(engine_id, ENGINE_PROFILES),
        )
    return profile


def default_memory_fraction(profile: EngineProfile, tp: int) -> float:
    """The profile's default memory fraction for ``tp`` GPUs (SGLang's depends on it)."""
    if profile.id == SGLANG.id:
        for min_tp, fraction in SGLANG_MEM_FRACTION_BY_TP:
            if tp >= min_tp:
                return fraction
    return profile.memory_fraction


def engine_id_for_source(engine_name: str) -> str:
    """The profile id of an engine as a corpus source names it ("TensorRT-LLM", "vLLM (ROCm)",
    "SGLang 0.4"): the first profile whose name it starts with, vLLM otherwise."""
    lowered = engine_name.lower()
    if lowered.startswith(("tensorrt", "trt")):
        return TRTLLM.id
    if lowered.startswith("sglang"):
        return SGLANG.id
    return VLLM.id
