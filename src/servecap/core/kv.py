"""KV cache bytes per token (attention layers) and per request (recurrent state), per GPU.

Sources: vLLM ``ModelConfig.get_num_kv_heads`` / ``get_head_size`` and
``vllm/v1/kv_cache_interface.py`` (``AttentionSpec``, ``MLAAttentionSpec``, ``MambaSpec``), as
summarised in shared/reference/vllm-kv-arithmetic.md section 1.1.

- full / sliding attention: ``2 (K and V) x kv_heads_per_rank x head_dim x kv_bytes`` per token
  per layer, ``kv_heads_per_rank = max(1, num_kv_heads // tp)`` (heads are replicated when
  ``tp > num_kv_heads``);
- MLA: one latent of ``(kv_lora_rank + qk_rope_head_dim) x kv_bytes`` per token per layer, no
  factor 2, and **not** divided by TP (every rank holds the whole latent);
- Gated DeltaNet / Mamba: a fixed state per request and layer of
  ``conv_channels/tp x (conv_kernel - 1) x conv_bytes + ssm_heads/tp x head_dim x state_dim x
  ssm_bytes``; the conv state uses the model dtype (vLLM ``--mamba-cache-dtype auto``) and the
  SSM state the checkpoint's ``mamba_ssm_dtype`` where it pins one (Qwen3.5: fp32).
"""

from __future__ import annotations

from servecap.specs.dtypes import KvDtype, kv_dtype_named
from servecap.specs.model import AttentionKind, MambaState, ModelSpec

_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


def kv_heads_per_rank(num_kv_heads: int, tp: int) -> int:
    """vLLM ``get_num_kv_heads``: KV heads split over TP ranks, at least one (replicated)."""
    return max(1, num_kv_heads // tp)


def resolve_kv_dtype(name: str, model: ModelSpec) -> KvDtype:
    """``auto`` means the model's dtype (vLLM ``--kv-cache-dtype auto``)."""
    return kv_dtype_named(model.torch_dtype if name == "auto" else name)


def attention_bytes_per_token_per_layer(model: ModelSpec, kind: AttentionKind, tp: int, kv_dtype: KvDtype) -> int:
    """Bytes one token adds to one attention layer's cache on one GPU."""
    if kind is AttentionKind.MLA:
        assert model.mla is not None
        return (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_dtype.bytes_per_element
    if kind in (AttentionKind.FULL, AttentionKind.SLIDING):
        assert model.attention is not None
        heads = kv_heads_per_rank(model.attention.num_kv_heads, tp)
        return 2 * heads * model.attention.head_dim * kv_dtype.bytes_per_element
    return 0


def state_bytes_per_layer(state: MambaState, model_dtype: str, tp: int) -> int:
    """Bytes of one recurrent layer's state for one request on one GPU (vLLM ``MambaSpec``)."""
    conv_bytes = _DTYPE_BYTES[model_dtype]
    ssm_bytes = _DTYPE_BYTES[state.ssm_dtype or model_dtype]
    conv = (state.conv_channels // tp) * (state.conv_kernel - 1) * conv_bytes
    ssm = (state.ssm_heads // tp) * state.ssm_head_dim * state.ssm_state_dim * ssm_bytes
    return conv + ssm


def kv_bytes_per_token(model: ModelSpec, tp: int, kv_dtype: KvDtype) -> int:
    """Bytes per token summed over every attention layer that keeps the whole context
    (full and MLA), on one GPU. Sliding-window layers are counted separately."""
    return _bytes_per_token_of(model, (AttentionKind.FULL, AttentionKind.MLA), tp, kv_dtype)


def sliding_bytes_per_token(model: ModelSpec, tp: int, kv_dtype: KvDtype) -> int:
    """Bytes per token summed over sliding-window layers (held for the last `window` tokens)."""
    return _bytes_per_token_of(model, (AttentionKind.SLIDING,), tp, kv_dtype)


def _bytes_per_token_of(model: ModelSpec, kinds: tuple[AttentionKind, ...], tp: int, kv_dtype: KvDtype) -> int:
    """Bytes per token over the layers of ``kinds``: every layer of one kind adds the same bytes,
    so each kind present is priced once and multiplied by its layer count."""
    total = 0
    for kind in kinds:
        layers = sum(1 for layer in model.layers if layer.mixer is kind)
        if layers:
            total += layers * attention_bytes_per_token_per_layer(model, kind, tp, kv_dtype)
    return total


def state_bytes_per_request(model: ModelSpec, tp: int) -> int:
    """Fixed recurrent-state bytes of one request over every recurrent layer, on one GPU."""
    if model.state is None:
        return 0
    per_layer = state_bytes_per_layer(model.state, model.torch_dtype, tp)
    return per_layer * sum(1 for layer in model.layers if layer.mixer.holds_state)


def kv_bytes_for_context(model: ModelSpec, tp: int, kv_dtype: KvDtype, tokens: int) -> int:
    """Exact (unpaged) KV bytes one request of ``tokens`` tokens holds on one GPU."""
    window_total = 0
    for layer in model.layers:
        if layer.mixer is AttentionKind.SLIDING:
            assert layer.window_tokens is not None
            held = min(tokens, layer.window_tokens)
            window_total += held * attention_bytes_per_token_per_layer(model, layer.mixer, tp, kv_dtype)
    return kv_bytes_per_token(model, tp, kv_dtype) * tokens + window_total + state_bytes_per_request(model, tp)
