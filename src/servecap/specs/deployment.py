"""How a model is deployed: GPUs, parallelism, storage dtypes and the engine's (vLLM's) settings."""

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
class EngineConfig:
    """vLLM's memory and scheduler settings, with the engine's defaults resolved.

    ``None`` in the CLI/API means "vLLM's default"; by the time an EngineConfig exists every
    field is concrete (see :func:`servecap.core.defaults.resolve_engine`).
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
