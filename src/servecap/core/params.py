"""Parameter counts: total (resident) and active (used per token) for dense, MoE, MLA and hybrids.

Formulas (h = hidden size, V = vocabulary, H = query heads, K = KV heads, d = head dim):

- embedding ``V*h``; LM head ``V*h`` unless ``tie_word_embeddings``;
- GQA attention (Llama, arXiv:2307.09288; GQA arXiv:2305.13245): q ``h*H*d`` (doubled when q also
  emits an output gate, Qwen3-Next), k and v ``h*K*d`` each, o ``H*d*h``; q/k/v biases where the
  architecture has them (Qwen2), o bias (gpt-oss), per-head q/k norms, attention sinks;
- MLA (DeepSeek-V2, arXiv:2405.04434 section 2.1): q down ``h*r_q`` + norm + q up
  ``r_q*H*(d_nope+d_rope)``; kv down ``h*(r_kv+d_rope)`` + norm; kv up ``r_kv*H*(d_nope+d_v)``;
  o ``H*d_v*h``;
- gated MLP (SwiGLU, arXiv:2002.05202): ``3*h*I``; plain MLP ``2*h*I``;
- MoE layer: router ``h*E`` + E experts of ``3*h*I_e`` + shared experts ``3*h*I_s`` (+ a
  ``h``-wide shared-expert gate in Qwen-MoE); a token activates the router, its top-k experts and
  the shared experts (DeepSeekMoE, arXiv:2401.06066);
- recurrent mixers (Gated DeltaNet, Mamba1/2): the mixer's own count from :class:`MambaState`;
- norms: ``norms_per_layer * h`` per layer plus the final ``h``.

Multimodal checkpoints also hold a vision tower (counted in ``vision``, resident in memory, not
part of a text token's matmuls). Multi-token-prediction modules (DeepSeek-V3's ``num_nextn_predict_layers``) are not served by
default and are not counted, as the published 671B excludes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from servecap.specs.model import AttentionKind, AttentionShape, LayerSpec, MlaShape, ModelSpec


@dataclass(frozen=True, slots=True)
class ParamCounts:
    total: int
    active: int
    embedding: int
    lm_head: int
    mixer: int  # attention / MLA / recurrent mixers, all layers
    dense_mlp: int
    routed_experts: int  # every routed expert of every MoE layer
    routed_experts_active: int  # the top-k a token uses
    moe_other: int  # routers, shared experts, shared-expert gates
    norms: int
    vision: int = 0  # multimodal vision tower + projector (resident; not in a text token's matmuls)

    @property
    def text_matmul_active(self) -> int:
        """Parameters one text token multiplies through: active less the embedding lookup and
        the vision tower (the FLOPs of a decode step are 2 x this)."""
        return self.active - self.embedding - self.vision

    @property
    def body_linear(self) -> int:
        """Decoder-layer weights a quantization method converts (all but embeddings and norms)."""
        return self.mixer + self.dense_mlp + self.routed_experts + self.moe_other


def attention_params(a: AttentionShape, hidden: int) -> int:
    q_width = a.num_heads * a.head_dim
    kv_width = a.num_kv_heads * a.head_dim
    q_out = q_width * (2 if a.output_gate else 1)
    params = hidden * q_out + 2 * hidden * kv_width + q_width * hidden
    if a.qkv_bias:
        params += q_out + 2 * kv_width
    if a.o_bias:
        params += hidden
    if a.qk_norm:
        params += 2 * a.head_dim
    if a.sinks:
        params += a.num_heads
    return params


def mla_params(m: MlaShape, hidden: int) -> int:
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        q = hidden * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * m.num_heads * qk_head
    else:
        q = hidden * m.num_heads * qk_head
    kv = hidden * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
    kv += m.kv_lora_rank * m.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
    return q + kv + m.num_heads * m.v_head_dim * hidden


def mixer_params(model: ModelSpec, layer: LayerSpec) -> int:
    kind = layer.mixer
    if kind in (AttentionKind.FULL, AttentionKind.SLIDING):
        assert model.attention is not None
        return attention_params(model.attention, model.hidden_size)
    if kind is AttentionKind.MLA:
        assert model.mla is not None
        return mla_params(model.mla, model.hidden_size)
    if kind.holds_state:
        assert model.state is not None
        return model.state.params_per_layer
    return 0


def mlp_params(hidden: int, intermediate: int, *, gated: bool = True) -> int:
    return (3 if gated else 2) * hidden * intermediate


@dataclass(frozen=True, slots=True)
class LayerParams:
    mixer: int
    dense_mlp: int
    routed_experts: int
    routed_experts_active: int
    moe_other: int
    norms: int

    @property
    def total(self) -> int:
        return self.mixer + self.dense_mlp + self.routed_experts + self.moe_other + self.norms


def layer_params(model: ModelSpec, layer: LayerSpec) -> LayerParams:
    """Parameters of one decoder layer, split by what quantization and MoE routing treat apart."""
    h = model.hidden_size
    dense = experts = experts_active = moe_other = 0
    if layer.mlp == "dense":
        dense = mlp_params(h, model.dense_intermediate_size, gated=model.mlp_gated)
    elif layer.mlp == "moe":
        moe = model.moe
        assert moe is not None
        one_expert = mlp_params(h, moe.expert_intermediate_size)
        if moe.expert_bias:
            one_expert += 2 * moe.expert_intermediate_size + h
        experts = moe.num_experts * one_expert
        experts_active = moe.experts_per_token * one_expert
        moe_other = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
        moe_other += mlp_params(h, moe.shared_intermediate_size)
        moe_other += h if moe.shared_expert_gate else 0
    return LayerParams(
        mixer=mixer_params(model, layer),
        dense_mlp=dense,
        routed_experts=experts,
        routed_experts_active=experts_active,
        moe_other=moe_other,
        norms=model.norms_per_layer * h,
    )


@lru_cache(maxsize=512)
def layer_params_table(model: ModelSpec) -> Mapping[LayerSpec, LayerParams]:
    """``layer_params`` for each distinct layer of a model (layers repeat, so this is small);
    cached per model (read-only: the same mapping is shared by every caller)."""
    return MappingProxyType({layer: layer_params(model, layer) for layer in set(model.layers)})


@lru_cache(maxsize=512)
def param_counts(model: ModelSpec) -> ParamCounts:
    h = model.hidden_size
    embedding = model.vocab_size * h
    lm_head = 0 if model.tie_word_embeddings else model.vocab_size * h
    table = layer_params_table(model)
    per_layer = [table[layer] for layer in model.layers]
    mixer = sum(p.mixer for p in per_layer)
    dense = sum(p.dense_mlp for p in per_layer)
    experts = sum(p.routed_experts for p in per_layer)
    experts_active = sum(p.routed_experts_active for p in per_layer)
    moe_other = sum(p.moe_other for p in per_layer)
    norms = sum(p.norms for p in per_layer) + h
    vision = model.vision_params
    total = embedding + lm_head + mixer + dense + experts + moe_other + norms + vision
    active = total - experts + experts_active
    return ParamCounts(
        total=total,
        active=active,
        embedding=embedding,
        lm_head=lm_head,
        mixer=mixer,
        dense_mlp=dense,
        routed_experts=experts,
        routed_experts_active=experts_active,
        moe_other=moe_other,
        norms=norms,
        vision=vision,
    )
