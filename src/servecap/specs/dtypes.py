"""Storage formats for weights and the KV cache, with their bytes per element.

Quantized weight formats carry scale overhead (bytes per parameter, scales included):

- ``fp8``: 1 byte + one fp32 scale per 128x128 block = 1 + 4/16384 B (DeepSeek-V3's
  ``quantization_config.weight_block_size = [128, 128]``; per-channel FP8 checkpoints are
  within 0.1% of this).
- ``int8`` (W8A8, per-output-channel fp32 scale): 1 + 4/4096 B, taking in_features = 4096;
  under 0.1% for any larger layer.
- ``int4`` (AWQ/GPTQ, group size 128, fp16 scale and 4-bit zero point per group):
  0.5 + (2 + 0.5)/128 B.
- ``nvfp4``: 4 bits + one FP8 (E4M3) scale per 16 elements = 0.5 + 1/16 B (NVIDIA's NVFP4
  format; the per-tensor fp32 scale is negligible).
- ``mxfp4``: 4 bits + one 8-bit (E8M0) scale per 32 elements = 0.5 + 1/32 B (OCP
  Microscaling Formats spec v1.0; gpt-oss ships its MoE experts this way).

Which tensor-core rate a format runs at (``compute``) follows what vLLM's kernels do: FP8
weights run FP8 GEMMs where the GPU has FP8 tensor cores (else weight-only dequantisation to
BF16, as Marlin does on Ampere); INT4 is weight-only (W4A16); FP4 formats run FP4 GEMMs on
GPUs with FP4 tensor cores, else dequantise to BF16/FP8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from servecap.errors import ServecapError, did_you_mean

ComputeRate = Literal["bf16", "fp8", "fp4"]


@dataclass(frozen=True, slots=True)
class WeightDtype:
    name: str
    bytes_per_param: float
    compute: ComputeRate
    quantized: bool


@dataclass(frozen=True, slots=True)
class KvDtype:
    name: str
    bytes_per_element: int


_WEIGHT_DTYPES: dict[str, WeightDtype] = {
    "fp32": WeightDtype("fp32", 4.0, "bf16", False),
    "bf16": WeightDtype("bf16", 2.0, "bf16", False),
    "fp16": WeightDtype("fp16", 2.0, "bf16", False),
    "fp8": WeightDtype("fp8", 1.0 + 4.0 / 16384.0, "fp8", True),
    "int8": WeightDtype("int8", 1.0 + 4.0 / 4096.0, "fp8", True),
    "int4": WeightDtype("int4", 0.5 + 2.5 / 128.0, "bf16", True),
    "nvfp4": WeightDtype("nvfp4", 0.5 + 1.0 / 16.0, "fp4", True),
    "mxfp4": WeightDtype("mxfp4", 0.5 + 1.0 / 32.0, "fp4", True),
}
_WEIGHT_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "fp8_e4m3": "fp8",
    "e4m3": "fp8",
    "w8a8": "int8",
    "awq": "int4",
    "gptq": "int4",
    "w4a16": "int4",
    "fp4": "nvfp4",
}

_KV_DTYPES: dict[str, KvDtype] = {
    "bf16": KvDtype("bf16", 2),
    "fp16": KvDtype("fp16", 2),
    "fp32": KvDtype("fp32", 4),
    "fp8": KvDtype("fp8", 1),
}
_KV_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_inc": "fp8",
}

WEIGHT_DTYPE_NAMES = ("auto", *_WEIGHT_DTYPES)
KV_DTYPE_NAMES = ("auto", *_KV_DTYPES)


def weight_dtype_named(name: str, *, field: str = "weights_dtype") -> WeightDtype:
    key = name.strip().lower()
    key = _WEIGHT_ALIASES.get(key, key)
    if key not in _WEIGHT_DTYPES:
        raise ServecapError(
            field,
            name,
            "unknown weights dtype; choose one of "
            + ", ".join(WEIGHT_DTYPE_NAMES)
            + did_you_mean(name, [*_WEIGHT_DTYPES, *_WEIGHT_ALIASES]),
        )
    return _WEIGHT_DTYPES[key]


def kv_dtype_named(name: str, *, field: str = "kv_cache_dtype") -> KvDtype:
    key = name.strip().lower()
    key = _KV_ALIASES.get(key, key)
    if key not in _KV_DTYPES:
        raise ServecapError(
            field,
            name,
            "unknown KV cache dtype; choose one of "
            + ", ".join(KV_DTYPE_NAMES)
            + did_you_mean(name, [*_KV_DTYPES, *_KV_ALIASES]),
        )
    return _KV_DTYPES[key]
