"""How a model is deployed: GPUs, parallelism, storage dtypes and the serving engine's settings."""

from __future__ import annotations

from dataclasses import dataclass

from servecap.specs.dtypes import KvDtype, WeightDtype
from servecap.specs.gpu import GpuSpec
from servecap.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class Parallelism:
    tp: int = 1  # tensor parallel: every layer split over tp GPUs
    pp: int = 1  # pipeline parallel: layers split into pp stages

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp


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

    @property
    def num_gpus(self) -> int:
        return self.parallelism.num_gpus
