"""Bytes a token moves through the memory-bound kernels between a layer's GEMMs (no weights, no KV
reads): what a prefill pays per prompt token beyond its GEMM FLOPs, and a decode step per token.

vLLM's decoder layer (``vllm/model_executor/models/llama.py``, ``LlamaDecoderLayer.forward``)
runs, per token, beside its matmuls and attention:

- two fused residual-add RMSNorms (``fused_add_rms_norm``: read the hidden state and the residual,
  write both): ``2 x 4h`` elements, on every tensor-parallel rank (the hidden state is whole);
- rotary embedding in place on q and k (read and write): ``2 (q + k)``, ``q = heads x head_dim``,
  ``k = kv_heads x head_dim`` per rank;
- the KV-cache write (``reshape_and_cache_flash``: read k and v, write them): ``4 kv``,
  ``kv = kv_heads x head_dim`` per rank;
- SiLU-and-mul (read the gate and up halves ``2I``, write ``I``): ``3 I`` per rank, ``I`` the
  dense MLP's width, or for an MoE layer ``k`` routed experts' width plus the shared experts'.

Elements are of the model's activation dtype (2 bytes at BF16/FP16). Layers without softmax
attention (MLA, recurrent state) count the norms and the MLP only. Llama-3.1-8B (``h`` 4,096,
``q`` 4,096, ``kv`` 1,024, ``I`` 14,336, 32 layers, tp 1): ``8 x 4096 + 2 x 5120 + 4 x 1024 +
3 x 14336 = 90,112`` elements, 180,224 bytes per layer, 5,767,168 bytes per token
(``tests/core/test_activation_traffic.py``).

An engine that fuses rotary and the KV-cache write into its attention kernel and SiLU-and-mul into
the gated GEMM (TensorRT-LLM, ``EngineProfile.fused_elementwise``) moves the norms' ``8h`` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from servecap.core.kv import kv_heads_per_rank
from servecap.specs.model import AttentionKind, LayerSpec, ModelSpec

_ACT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def activation_bytes_per_token(model: ModelSpec, layers: Sequence[LayerSpec], tp: int, *, fused: bool = False) -> float:
    """Bytes one token reads and writes outside the GEMMs, attention and KV reads, over ``layers``,
    on one of ``tp`` ranks (module docstring); ``fused``: the engine runs rotary, the KV-cache
    write and SiLU-and-mul inside other kernels (``EngineProfile.fused_elementwise``), and only
    the norms count."""
    h = model.hidden_size
    elements = 0.0
    for layer in layers:
        elements += 8.0 * h
        if fused:
            continue
        a = model.attention
        if a is not None and layer.mixer in (AttentionKind.FULL, AttentionKind.SLIDING):
            q = max(1, a.num_heads // tp) * a.head_dim
            kv = kv_heads_per_rank(a.num_kv_heads, tp) * a.head_dim
            elements += 2.0 * (q + kv) + 4.0 * kv
        moe = model.moe
        if layer.mlp == "moe" and moe is not None:
            width = moe.expert_intermediate_size * moe.experts_per_token + moe.shared_intermediate_size
            elements += 3.0 * width / tp
        elif layer.mlp == "dense":
            elements += 3.0 * model.dense_intermediate_size / tp
    return elements * _ACT_BYTES[model.torch_dtype]
