"""The GEMMs of one decoder layer on one GPU, from the model's shapes and the tensor parallelism.

Shapes follow vLLM's layers (``vllm/model_executor/models/llama.py``, ``deepseek_v2.py``): a GEMM
``y = x W^T`` of ``m`` tokens through a weight of ``n`` outputs and ``k`` inputs computes
``2 m n k`` FLOPs and reads ``n x k`` weights.

- full / sliding attention: ``qkv_proj`` (``QKVParallelLinear``: ``n = (H_q x d x g + 2 H_kv' x d)``,
  ``H_q = heads / tp``, ``H_kv' = max(1, kv_heads / tp)`` (KV heads are replicated when fewer than
  ``tp``), ``g = 2`` when q_proj also emits a gate), ``k = hidden``; ``o_proj``
  (``RowParallelLinear``: ``n = hidden``, ``k = H_q x d``);
- MLA (DeepSeek-V2/V3): ``q_a_proj`` (``n = q_lora_rank``, replicated), ``q_b_proj``
  (``n = H_q x (d_nope + d_rope)``, ``k = q_lora_rank``, or ``k = hidden`` without a q LoRA),
  ``kv_a_proj_with_mqa`` (``n = kv_lora_rank + d_rope``, replicated), ``kv_b_proj``
  (``n = H_q x (d_nope + d_v)``, ``k = kv_lora_rank``), ``o_proj`` (``n = hidden``, ``k = H_q x d_v``);
- recurrent mixers: their parameters over ``tp`` as one ``hidden``-wide projection;
- dense MLP: ``gate_up_proj`` (``MergedColumnParallelLinear``: ``n = 2 x intermediate / tp``; one
  matrix without a gate), ``down_proj`` (``n = hidden``, ``k = intermediate / tp``);
- MoE layer: the router (``gate``: ``n = experts``, replicated) and the shared experts as a dense
  MLP of their total width; the routed experts are the MoE operation (``core.ops.step``).
"""

from __future__ import annotations

from dataclasses import dataclass

from servecap.core.kv import kv_heads_per_rank
from servecap.specs.model import AttentionKind, LayerSpec, ModelSpec


@dataclass(frozen=True, slots=True)
class Gemm:
    """A GEMM of every layer of one kind: ``count`` layers, weight ``n x k`` per GPU."""

    name: str
    n: int
    k: int
    count: int
    replicated: bool = False  # not split by tensor parallelism (the same on every GPU)


def layer_gemms(model: ModelSpec, layer: LayerSpec, tp: int) -> list[tuple[str, int, int, bool]]:
    """``(name, n, k, replicated)`` of one layer's GEMMs on one of ``tp`` GPUs."""
    h = model.hidden_size
    out: list[tuple[str, int, int, bool]] = []
    kind = layer.mixer
    if kind in (AttentionKind.FULL, AttentionKind.SLIDING):
        a = model.attention
        assert a is not None
        heads = max(1, a.num_heads // tp)
        q = heads * a.head_dim * (2 if a.output_gate else 1)
        kv = 2 * kv_heads_per_rank(a.num_kv_heads, tp) * a.head_dim
        out.append(("qkv_proj", q + kv, h, False))
        out.append(("o_proj", h, heads * a.head_dim, False))
    elif kind is AttentionKind.MLA:
        m = model.mla
        assert m is not None
        heads = max(1, m.num_heads // tp)
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            out.append(("q_a_proj", m.q_lora_rank, h, True))
            out.append(("q_b_proj", heads * qk, m.q_lora_rank, False))
        else:
            out.append(("q_proj", heads * qk, h, False))
        out.append(("kv_a_proj", m.kv_lora_rank + m.qk_rope_head_dim, h, True))
        out.append(("kv_b_proj", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank, False))
        out.append(("o_proj", h, heads * m.v_head_dim, False))
    elif kind.holds_state:
        s = model.state
        assert s is not None
        out.append(("mixer_proj", max(1, s.params_per_layer // (tp * h)), h, False))
    if layer.mlp == "dense":
        inter = max(1, model.dense_intermediate_size // tp)
        out.append(("gate_up_proj" if model.mlp_gated else "up_proj", (2 if model.mlp_gated else 1) * inter, h, False))
        out.append(("down_proj", h, inter, False))
    elif layer.mlp == "moe":
        moe = model.moe
        assert moe is not None
        out.append(("moe_router", moe.num_experts, h, True))
        if moe.shared_intermediate_size:
            inter = max(1, moe.shared_intermediate_size // tp)
            out.append(("shared_gate_up_proj", 2 * inter, h, False))
            out.append(("shared_down_proj", h, inter, False))
    return out


def stage_gemms(model: ModelSpec, layers: tuple[LayerSpec, ...], tp: int) -> tuple[Gemm, ...]:
    """The GEMMs of a pipeline stage's layers, one entry per (name, shape) with its layer count,
    in the order a layer runs them."""
    counts: dict[tuple[str, int, int, bool], int] = {}
    for layer in layers:
        for g in layer_gemms(model, layer, tp):
            counts[g] = counts.get(g, 0) + 1
    return tuple(Gemm(name, n, k, c, rep) for (name, n, k, rep), c in counts.items())
