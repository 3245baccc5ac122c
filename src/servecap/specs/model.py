"""A model's architecture as capacity planning needs it: per-layer mixer kind and tensor shapes.

Built from a Hugging Face ``config.json`` by :mod:`servecap.catalog.hf_config`; the arithmetic
on it (parameter counts, KV bytes) lives in :mod:`servecap.core`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Literal


class AttentionKind(StrEnum):
    """What a layer's token mixer keeps per request (vLLM's KV cache spec type)."""

    FULL = "full"  # MHA/GQA/MQA over the whole context: K and V for every token
    SLIDING = "sliding"  # attention over the last `window` tokens only
    MLA = "mla"  # DeepSeek multi-head latent attention: one compressed latent per token
    LINEAR = "linear"  # Gated DeltaNet / linear attention: a fixed state per request
    MAMBA = "mamba"  # Mamba / Mamba2 selective SSM: a fixed state per request
    NONE = "none"  # no token mixer (an MLP-only layer in Nemotron-H style hybrids)

    @property
    def holds_state(self) -> bool:
        return self in (AttentionKind.LINEAR, AttentionKind.MAMBA)

    @property
    def holds_kv(self) -> bool:
        return self in (AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.MLA)


MlpKind = Literal["dense", "moe", "none"]


@dataclass(frozen=True, slots=True)
class LayerSpec:
    mixer: AttentionKind
    mlp: MlpKind
    window_tokens: int | None = None  # sliding-window layers only


@dataclass(frozen=True, slots=True)
class AttentionShape:
    num_heads: int
    num_kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    o_bias: bool = False
    output_gate: bool = False  # q_proj also emits a per-head gate (Qwen3-Next, Qwen3.5)
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Gemma 3)
    sinks: bool = False  # one learned attention-sink logit per head (gpt-oss)


@dataclass(frozen=True, slots=True)
class MlaShape:
    """DeepSeek-V2/V3 multi-head latent attention (arXiv:2405.04434, section 2.1)."""

    num_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class MambaState:
    """A recurrent mixer's fixed per-request state and its parameter shapes.

    Covers Gated DeltaNet (Qwen3-Next, Qwen3.5), Mamba2 (Nemotron-H, Granite 4.0-H) and Mamba1
    (Jamba): a causal-conv state of ``conv_channels x (conv_kernel - 1)`` and a recurrent state of
    ``ssm_heads x ssm_head_dim x ssm_state_dim`` elements.
    """

    variant: Literal["gdn", "mamba2", "mamba1"]
    conv_channels: int
    conv_kernel: int
    ssm_heads: int
    ssm_head_dim: int
    ssm_state_dim: int
    ssm_dtype: str | None  # e.g. "fp32" when the checkpoint pins it (Qwen3.5); None = model dtype
    params_per_layer: int  # the mixer's own parameters (in/out projections, conv, A, D, dt, norm)


@dataclass(frozen=True, slots=True)
class MoeShape:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0  # total width of the shared expert(s)
    shared_expert_gate: bool = False  # Qwen2-MoE/Qwen3-Next: a sigmoid gate on the shared expert
    expert_bias: bool = False  # gpt-oss: biases on expert projections
    router_bias: bool = False


@dataclass(frozen=True, slots=True)
class ModelSpec:
    id: str
    model_type: str
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    torch_dtype: str  # "bf16" | "fp16" | "fp32": the unquantized storage dtype
    layers: tuple[LayerSpec, ...]
    attention: AttentionShape | None
    mla: MlaShape | None
    state: MambaState | None
    dense_intermediate_size: int
    moe: MoeShape | None
    mlp_gated: bool = True  # SwiGLU/GeGLU (gate, up, down); False: up and down only (Nemotron-H)
    quantization: str | None = None  # weights format the checkpoint ships in ("fp8", "mxfp4", ...)
    quantized_scope: Literal["linear", "experts"] = "linear"
    norms_per_layer: int = 2
    vision_params: int = 0  # a multimodal checkpoint's vision tower + projector (resident, BF16)
    mtp_layers: int = 0  # multi-token-prediction modules shipped beside the model (not served)
    source: str = ""
    notes: tuple[str, ...] = ()  # defaults the parser had to assume, quirks worth telling the user
    # the hash, computed once: a plan hashes its deployment (a cache key) and the model's
    # per-layer tuple dominates that; never pickled (string hashes differ between processes)
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> tuple[object, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if f.init)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for f, value in zip((f for f in fields(self) if f.init), state, strict=True):
            object.__setattr__(self, f.name, value)
        object.__setattr__(self, "_hash", None)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def count(self, kind: AttentionKind) -> int:
        return sum(1 for layer in self.layers if layer.mixer is kind)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and any(layer.mlp == "moe" for layer in self.layers)
