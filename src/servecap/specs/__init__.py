"""Frozen value types shared by every layer: model, GPU, precision, deployment, workload shape."""

from servecap.specs.deployment import Deployment, EngineConfig, Parallelism
from servecap.specs.dtypes import KvDtype, WeightDtype, kv_dtype_named, weight_dtype_named
from servecap.specs.gpu import GpuSpec
from servecap.specs.model import (
    AttentionKind,
    LayerSpec,
    MambaState,
    MlaShape,
    ModelSpec,
    MoeShape,
)
from servecap.specs.perf import CostInputs, Efficiency, RequestShape, Slo

__all__ = [
    "AttentionKind",
    "CostInputs",
    "Deployment",
    "Efficiency",
    "EngineConfig",
    "GpuSpec",
    "KvDtype",
    "LayerSpec",
    "MambaState",
    "MlaShape",
    "ModelSpec",
    "MoeShape",
    "Parallelism",
    "RequestShape",
    "Slo",
    "WeightDtype",
    "kv_dtype_named",
    "weight_dtype_named",
]
