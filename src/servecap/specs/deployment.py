"""How a model is deployed: GPUs, parallelism, storage dtypes and the serving engine's settings."""

from __future__ import annotations

from dataclasses import dataclass

from servecap.specs.dtypes import KvDtype, WeightDtype
from servecap.specs.gpu import GpuSpec
from servecap.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class Parallelism:
    """How one replica spreads over GPUs (vLLM's and SGLang's layouts; see core/parallel.py).

    - ``tp`` x ``pp`` GPUs per attention data-parallel rank; ``dp`` ranks, each with its own
      batch, KV cache and scheduler, the attention weights replicated on every rank;
    - the MoE layers of all ``tp x dp`` GPUs of a stage form one group (vLLM: "expert layers
      form an EP or TP group of size DP x TP"): with ``ep > 1`` each of ``ep`` groups holds
      ``(experts + redundant_experts) / ep`` whole experts, with ``ep = 1`` every expert is split;
    - ``gpus_per_node`` and ``nodes``: where the GPUs sit, which picks the link an all-to-all
      or an all-reduce crosses (NVLink/xGMI inside a node, the NIC between nodes);
    - ``a2a_mode``: DeepEP's ``normal`` (throughput) or ``low_latency`` kernels, or ``auto``
      (normal for a step that prefills, low-latency for a pure decode step, as SGLang's ``auto``);
    - ``expert_skew``: Zipf exponent of the experts' token loads (0 uniform), placed by EPLB
      with ``redundant_experts`` replicas; ``two_batch_overlap``: two micro-batches hide the
      dispatch/combine behind the other's compute (SGLang ``--enable-two-batch-overlap``).
    """

    tp: int = 1  # tensor parallel: every layer split over tp GPUs
    pp: int = 1  # pipeline parallel: layers split into pp stages
    dp: int = 1  # attention data parallel ranks per replica
    ep: int = 1  # expert parallel size (1: experts tensor-split over tp x dp GPUs)
    gpus_per_node: int = 8
    redundant_experts: int = 0
    expert_skew: float = 0.0
    a2a_mode: str = "auto"  # auto | normal | low_latency
    two_batch_overlap: bool = False

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def moe_shards(self) -> int:
        """GPUs one MoE layer's experts are spread over (tp x dp)."""
        return self.tp * self.dp

    @property
    def nodes(self) -> int:
        return -(-self.num_gpus // self.gpus_per_node)


@dataclass(frozen=True, slots=True)
class SpecDecodeConfig:
    """Speculative decoding: ``method`` (``draft``, ``eagle``, ``eagle3``, ``mtp``, ``ngram``)
    proposes ``num_speculative_tokens`` tokens a step, the target verifies them (k + 1 query
    tokens a sequence); ``acceptance`` is the probability that draft position ``i`` is accepted
    given positions before it were (a conditional per-position rate, vLLM's
    ``num_accepted_tokens_per_pos / num_drafts`` read as ratios of successive positions; n-gram
    proposes from the context at no GPU cost;
    EAGLE/MTP heads are costed from the target's own layer shapes, a draft model from its config)."""

    method: str
    num_speculative_tokens: int
    acceptance: tuple[float, ...]
    draft_model: ModelSpec | None = None  # the separate draft model of method "draft"
    source: str = ""
    acceptance_low: tuple[float, ...] | None = None  # the published spread, where a source gives one
    acceptance_high: tuple[float, ...] | None = None


@dataclass(frozen=True, slots=True)
class RopeScaling:
    """RoPE scaling that stretches a model past its trained context (vLLM ``--rope-scaling``).

    vLLM's derived maximum length (``ModelConfig._get_and_verify_max_len``): for ``yarn``,
    ``original_max_position_embeddings x factor``; for other types except ``su``/``longrope``/
    ``llama3``, ``max_position_embeddings x factor``.
    """

    rope_type: str
    factor: float
    original_max_position_embeddings: int | None = None

    def max_len(self, max_position_embeddings: int) -> int:
        if self.rope_type in ("su", "longrope", "llama3"):
            return max_position_embeddings
        base = max_position_embeddings
        if self.rope_type == "yarn" and self.original_max_position_embeddings is not None:
            base = self.original_max_position_embeddings
        return int(base * self.factor)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """vLLM's memory and scheduler settings, with the engine's defaults resolved.

    ``None`` in the CLI/API means "vLLM's default"; by the time an EngineConfig exists every
    field but ``block_size`` is concrete (see :func:`servecap.core.defaults.build_deployment`).
    """

    max_model_len: int
    gpu_memory_utilization: float
    block_size: int | None  # None: the engine picks (16; 64 for MLA; raised for hybrids)
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_memory_bytes: int | None = None  # vLLM --kv-cache-memory-bytes: skips profiling
    activation_bytes: int | None = None  # override the estimated peak activation memory
    non_torch_bytes: int | None = None  # override the estimated CUDA context / NCCL memory
    cudagraph_bytes: int = 0  # memory held by captured CUDA graphs, subtracted from the budget
    rope_scaling: RopeScaling | None = None  # vLLM --rope-scaling / --hf-overrides: a longer context
    engine: str = "vllm"  # the engine profile (servecap.specs.engines): defaults and scheduler


@dataclass(frozen=True, slots=True)
class Deployment:
    model: ModelSpec
    gpu: GpuSpec
    parallelism: Parallelism
    weights_dtype: WeightDtype
    kv_dtype: KvDtype
    engine: EngineConfig
    speculative: SpecDecodeConfig | None = None  # speculative decoding / MTP (core/spec_decode.py)

    @property
    def num_gpus(self) -> int:
        return self.parallelism.num_gpus
