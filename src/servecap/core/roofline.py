"""Roofline step time of one engine iteration (a batch of prefill chunks and decodes) on one GPU.

A step reads every weight once (all of them for a dense model; for MoE the experts the batch's
tokens route to), reads the KV cache of every sequence in the batch, and performs
``2 x matmul_params`` FLOPs per token plus attention FLOPs. Its time is (Williams, Waterman and
Patterson, "Roofline", CACM 2009; applied to LLM decode in e.g. arXiv:2402.16363)::

    memory_s  = (weight_bytes + kv_bytes + state_bytes) / (hbm_bandwidth x bandwidth_efficiency)
    compute_s = (2 x body_params x tokens + 2 x V x h x seqs + attention_flops) / (peak_flops x compute_efficiency)
                + 2 x routed_active_params x tokens x (1 / moe_ratio - 1) / (peak_flops x compute_efficiency)
    comm_s    = 2 x layers x [2 (tp-1)/tp x tokens x hidden x act_bytes / link_bw + latency]
    act_s     = act_bytes x tokens / (hbm_bandwidth x bandwidth_efficiency)
    step_s    = max(memory_s, compute_s) + comm_s + act_s + step_overhead_s + prefill_s_per_token x prompt

- attention FLOPs: ``4 x heads_per_rank x head_dim`` per (query, key) pair per layer (QK^T and PV,
  2 FLOPs per multiply-add); MLA uses ``(d_nope + d_rope) + d_v`` in place of ``2 x head_dim``;
- MoE weight reads: with uniform routing, ``T`` tokens each picking ``k`` of ``E`` experts touch
  ``E x (1 - (1 - k/E)^T)`` distinct experts per layer in expectation (occupancy of E bins);
- ``act_bytes``: what a token moves through the memory-bound kernels between the GEMMs (norms,
  rotary, the KV-cache write, SiLU-and-mul; ``core/activation_traffic.py``), kernels that run
  between the GEMMs rather than beside them, so their time adds to the step's;
- MoE expert GEMMs: the routed experts' FLOPs (``k`` of ``E`` experts per token) run at
  ``moe_ratio`` of the dense compute efficiency (``MOE_TO_DENSE_GEMM_EFFICIENCY_BY_ENGINE``,
  ``specs/perf.py``: grouped GEMMs measured by NVIDIA reach about half a dense GEMM's share of peak);
- TP: two all-reduces per layer (after attention and after the MLP) of ``tokens x hidden``
  activations, ring algorithm moving ``2 (tp-1)/tp`` of the buffer over each link
  (Patarasuk and Yuan 2009), plus a fixed latency per all-reduce;
- the input embedding is a lookup, not a matmul; the decoder body's matmul params (active params
  less the embedding and the LM head) run for every token, the LM head (``V x h``, tied to the
  embedding or not) for one token per sequence in the step: vLLM computes logits only at each
  scheduled request's last position (``logits_indices`` in its GPU model runner), so a prefill
  chunk of ``n`` tokens costs one row of logits, not ``n``;
- decode is memory-bound until the batch reaches the ridge point, where
  ``2 x B`` FLOPs per weight byte (one byte per param, FP8) or ``B`` (two bytes, BF16) equals
  ``peak_flops / bandwidth``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

from servecap.core.activation_traffic import activation_bytes_per_token
from servecap.core.kv import (
    attention_bytes_per_token_per_layer,
    kv_heads_per_rank,
    state_bytes_per_layer,
)
from servecap.core.params import layer_params_table, param_counts
from servecap.specs.deployment import Deployment
from servecap.specs.engines import engine_profile
from servecap.specs.model import AttentionKind
from servecap.specs.perf import (
    BANDWIDTH_EFFICIENCY_BY_ENGINE,
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_BANDWIDTH_EFFICIENCY_BY_GPU_FAMILY,
    DEFAULT_COMPUTE_EFFICIENCY,
    DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY,
    DEFAULT_STEP_OVERHEAD_S,
    FP4_TO_FP8_GEMM_EFFICIENCY_BY_ENGINE,
    LOW_PRECISION_COMPUTE_EFFICIENCY_BY_ENGINE,
    MOE_TO_DENSE_GEMM_EFFICIENCY_BY_ENGINE,
    STEP_OVERHEAD_S_BY_ENGINE,
    Efficiency,
)
from servecap.units import GB_BYTES, TB_BYTES, TFLOPS

Bottleneck = Literal["memory", "compute", "communication", "overhead"]
_ACT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


# BatchShape, StepTime and StepCost are values (never changed after construction) but not
# declared frozen: mypyc compiles a plain dataclass to a native class, built in ~0.1 us and
# read at C speed; a frozen one stays a Python class whose __init__ sets each field through
# object.__setattr__ (~1.4 us) and whose fields are read by name. A plan builds some hundred
# shapes and step times and reads StepCost's coefficients in each.
@dataclass(slots=True)
class BatchShape:
    """What one step computes, aggregated over its sequences.

    - ``num_tokens``: query tokens (prefill chunk tokens + one per decoding sequence);
    - ``num_seqs``: sequences in the batch (each reads its recurrent state once);
    - ``kv_tokens``: Σ over sequences of the context tokens whose full-attention KV is read;
    - ``window_kv_tokens``: the same for sliding-window layers (each capped at the window);
    - ``attn_pairs`` / ``window_attn_pairs``: Σ over query tokens of keys attended.
    """

    num_tokens: int
    num_seqs: int
    kv_tokens: float
    window_kv_tokens: float
    attn_pairs: float
    window_attn_pairs: float
    prompt_tokens: int = 0


@dataclass(slots=True)
class StepTime:
    total_s: float
    memory_s: float
    compute_s: float
    comm_s: float
    overhead_s: float
    activation_s: float = 0.0  # memory-bound kernels between the GEMMs, run after them (not overlapped)

    @property
    def bottleneck(self) -> Bottleneck:
        parts: dict[Bottleneck, float] = {
            "memory": self.memory_s,
            "compute": self.compute_s,
            "communication": self.comm_s,
            "overhead": self.overhead_s,
        }
        return max(parts, key=lambda k: parts[k])


class StepOperations(Protocol):
    """The step as the sum of its operations (``core.ops.OperationStep``), attached to a
    deployment's :class:`StepCost` by the planner; used where ``Efficiency.step_model`` is
    ``operations``."""

    def step_time(self, batch: BatchShape, eff: Efficiency) -> StepTime: ...

    def time(
        self,
        eff: Efficiency,
        num_tokens: int,
        num_seqs: int,
        kv: float,
        wkv: float,
        pairs: float,
        wpairs: float,
        prompt: int,
    ) -> float: ...


@dataclass(slots=True)
class StepCost:
    """Per-GPU coefficients of the step-time model for one deployment (one pipeline stage is
    ``1/pp`` of the layers; a token passes all stages, so stage times add up to ``pp x``)."""

    dense_weight_bytes: float  # weights every step reads (non-routed), per GPU
    expert_bytes_per_layer: float  # one routed expert of one MoE layer, per GPU
    moe_layers: int
    num_experts: int
    experts_per_token: int
    kv_bytes_per_token: float  # full-attention and MLA layers, per GPU
    window_bytes_per_token: float  # sliding-window layers, per GPU
    window_tokens: int | None
    state_bytes_per_seq: float  # recurrent state read and written once per step
    matmul_flops_per_token: float  # 2 x decoder-body matmul params per GPU (every token)
    attn_flops_per_pair: float  # full/MLA layers, per GPU
    window_attn_flops_per_pair: float
    allreduce_bytes_per_token: float  # hidden x act_bytes
    allreduces: int  # per step (2 per layer) when tp > 1
    tp: int
    pp: int
    peak_flops: float  # FLOP/s
    hbm_bytes_s: float
    link_bytes_s: float
    compute_rate: str = "bf16"  # the tensor-core rate the weights compute at (WeightDtype.compute)
    gpu_family: str = ""  # picks a per-family bandwidth efficiency (Efficiency.bandwidth_efficiency_on)
    logits_flops_per_seq: float = 0.0  # 2 x vocab x hidden per GPU: the LM head, once per sequence
    engine: str = "vllm"  # picks the engine profile's fitted efficiencies (specs.perf, by engine)
    expert_flops_per_token: float = 0.0  # 2 x the routed expert params one token runs, per GPU (in matmul_flops)
    moe_gemm_efficiency_ratio: float = 1.0  # expert GEMMs' share of peak over a dense GEMM's (specs.perf)
    activation_bytes_per_token: float = 0.0  # norms, rotary, KV write, SiLU-and-mul (core.activation_traffic)
    ops: StepOperations | None = None  # the step as operations (Efficiency.step_model "operations")

    def weight_bytes_read(self, num_tokens: int) -> float:
        if self.moe_layers == 0 or num_tokens <= 0:
            return self.dense_weight_bytes if num_tokens > 0 else 0.0
        touched = self.num_experts * (1.0 - (1.0 - self.experts_per_token / self.num_experts) ** num_tokens)
        return self.dense_weight_bytes + self.expert_bytes_per_layer * self.moe_layers * touched

    def step_time(self, batch: BatchShape, eff: Efficiency) -> StepTime:
        """Time of one iteration; per GPU, summed over pipeline stages."""
        if batch.num_tokens <= 0:
            return StepTime(0.0, 0.0, 0.0, 0.0, 0.0)
        if self.ops is not None and eff.step_model == "operations":
            return self.ops.step_time(batch, eff)
        bytes_read = (
            self.weight_bytes_read(batch.num_tokens)
            + self.kv_bytes_per_token * batch.kv_tokens
            + self.window_bytes_per_token * batch.window_kv_tokens
            + 2.0 * self.state_bytes_per_seq * batch.num_seqs
        )
        # routed expert FLOPs run at moe_gemm_efficiency_ratio of the dense efficiency: counted
        # once in matmul_flops_per_token, the rest (1 / ratio - 1) of them added here
        expert_extra = self.expert_flops_per_token * (1.0 / self.moe_gemm_efficiency_ratio - 1.0)
        flops = (
            (self.matmul_flops_per_token + expert_extra) * batch.num_tokens
            + self.logits_flops_per_seq * batch.num_seqs
            + self.attn_flops_per_pair * batch.attn_pairs
            + self.window_attn_flops_per_pair * batch.window_attn_pairs
        )
        bandwidth = self.hbm_bytes_s * _bandwidth_efficiency(eff, self.gpu_family, self.engine)
        memory_s = bytes_read / bandwidth
        activation_s = self.activation_bytes_per_token * batch.num_tokens / bandwidth
        compute_s = flops / (self.peak_flops * _compute_efficiency(eff, self.compute_rate, self.engine))
        comm_s = 0.0
        if self.tp > 1:
            ring = 2.0 * (self.tp - 1) / self.tp
            per_allreduce = ring * batch.num_tokens * self.allreduce_bytes_per_token / self.link_bytes_s
            comm_s = self.allreduces * (per_allreduce + eff.allreduce_latency_s)
        overhead_s = _step_overhead(eff, self.gpu_family, self.engine) + eff.prefill_s_per_token * batch.prompt_tokens
        total = self.pp * (max(memory_s, compute_s) + comm_s + activation_s) + overhead_s
        return StepTime(
            total, self.pp * memory_s, self.pp * compute_s, self.pp * comm_s, overhead_s, self.pp * activation_s
        )


def _bandwidth_efficiency(eff: Efficiency, gpu_family: str, engine: str = "vllm") -> float:
    """``eff.bandwidth_efficiency_on(gpu_family, engine)``, the same rule in this compiled module:
    a step prices it twice, and a call into the interpreted Efficiency costs more than the rule."""
    bw = eff.bandwidth_efficiency
    if bw is not None:
        return bw
    if engine != "vllm":
        by_family = BANDWIDTH_EFFICIENCY_BY_ENGINE.get(engine)
        if by_family is not None and gpu_family in by_family:
            return by_family[gpu_family]
    return DEFAULT_BANDWIDTH_EFFICIENCY_BY_GPU_FAMILY.get(gpu_family, DEFAULT_BANDWIDTH_EFFICIENCY)


def _step_overhead(eff: Efficiency, gpu_family: str, engine: str) -> float:
    """``eff.step_overhead_on(gpu_family, engine)``, likewise."""
    o = eff.step_overhead_s
    if o is not None:
        return o
    by_family = STEP_OVERHEAD_S_BY_ENGINE.get(engine)
    if by_family is not None and gpu_family in by_family:
        return by_family[gpu_family]
    return DEFAULT_STEP_OVERHEAD_S


def _compute_efficiency(eff: Efficiency, rate: str, engine: str = "vllm") -> float:
    """``eff.compute_efficiency_at(rate, engine)``, likewise."""
    c = eff.compute_efficiency
    if c is not None:
        return c
    if rate == "bf16":
        return DEFAULT_COMPUTE_EFFICIENCY
    low = LOW_PRECISION_COMPUTE_EFFICIENCY_BY_ENGINE.get(engine, DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY)
    if rate == "fp4":  # FP4 GEMMs reach a smaller share of their peak (specs.perf, measured)
        return low * FP4_TO_FP8_GEMM_EFFICIENCY_BY_ENGINE.get(engine, 1.0)
    return low


def step_cost(dep: Deployment, *, stage_weights_bytes: int) -> StepCost:
    """Coefficients for the busiest pipeline stage (its layers, weights and KV) on one GPU."""
    model, tp, pp = dep.model, dep.parallelism.tp, dep.parallelism.pp
    from servecap.core.memory import stage_layers  # local: memory imports params too

    layers = max(stage_layers(model, pp), key=len)
    kv_dtype = dep.kv_dtype
    kv_full = kv_window = 0.0
    attn_pair = window_pair = 0.0
    window: int | None = None
    state_bytes = 0.0
    expert_total = 0.0
    moe_layers = 0
    table = layer_params_table(model)
    per_kind = {
        kind: (attention_bytes_per_token_per_layer(model, kind, tp, kv_dtype), _attention_flops_per_pair(dep, kind))
        for kind in {layer.mixer for layer in layers}
    }
    for layer in layers:
        kind = layer.mixer
        per_tok, pair = per_kind[kind]
        if kind is AttentionKind.SLIDING:
            kv_window += per_tok
            window_pair += pair
            window = layer.window_tokens
        else:
            kv_full += per_tok
            attn_pair += pair
        if kind.holds_state:
            assert model.state is not None
            state_bytes += state_bytes_per_layer(model.state, model.torch_dtype, tp)
        if layer.mlp == "moe":
            moe_layers += 1
            expert_total += table[layer].routed_experts
    wbytes = dep.weights_dtype.bytes_per_param if dep.weights_dtype.quantized else _ACT_BYTES[model.torch_dtype]
    moe = model.moe
    expert_bytes_per_layer = 0.0
    if moe is not None and moe_layers:
        expert_bytes_per_layer = expert_total / moe_layers / moe.num_experts * wbytes / tp
    dense_weight_bytes = stage_weights_bytes - expert_bytes_per_layer * moe_layers * (moe.num_experts if moe else 0)
    # the routed experts one token runs: k of the E experts of every MoE layer of the stage
    expert_flops = 2.0 * expert_total / moe.num_experts * moe.experts_per_token / tp if moe and moe_layers else 0.0

    counts = param_counts(model)
    logits_params = model.vocab_size * model.hidden_size  # the LM head's matmul, tied or not
    body_active = (counts.text_matmul_active - counts.lm_head) / pp
    gpu = dep.gpu
    act = _ACT_BYTES[model.torch_dtype]
    link = gpu.link_gb_s("interconnect_gb_s") * GB_BYTES if tp > 1 else 1.0
    return StepCost(
        dense_weight_bytes=max(0.0, dense_weight_bytes),
        expert_bytes_per_layer=expert_bytes_per_layer,
        moe_layers=moe_layers,
        num_experts=moe.num_experts if moe else 0,
        experts_per_token=moe.experts_per_token if moe else 0,
        kv_bytes_per_token=kv_full,
        window_bytes_per_token=kv_window,
        window_tokens=window,
        state_bytes_per_seq=state_bytes,
        matmul_flops_per_token=2.0 * body_active / tp,
        attn_flops_per_pair=attn_pair,
        window_attn_flops_per_pair=window_pair,
        allreduce_bytes_per_token=model.hidden_size * act,
        allreduces=2 * len(layers),
        tp=tp,
        pp=pp,
        peak_flops=gpu.dense_tflops(dep.weights_dtype.compute) * TFLOPS,
        hbm_bytes_s=gpu.hbm_bandwidth_tb_s * TB_BYTES,
        link_bytes_s=link,
        compute_rate=dep.weights_dtype.compute,
        gpu_family=gpu.family,
        logits_flops_per_seq=2.0 * logits_params / pp / tp,
        engine=dep.engine.engine,
        expert_flops_per_token=expert_flops,
        activation_bytes_per_token=activation_bytes_per_token(
            model, layers, tp, fused=engine_profile(dep.engine.engine).fused_elementwise
        ),
        moe_gemm_efficiency_ratio=MOE_TO_DENSE_GEMM_EFFICIENCY_BY_ENGINE.get(dep.engine.engine, 1.0),
    )


def _attention_flops_per_pair(dep: Deployment, kind: AttentionKind) -> float:
    model, tp = dep.model, dep.parallelism.tp
    if kind is AttentionKind.MLA:
        assert model.mla is not None
        m = model.mla
        heads = max(1, m.num_heads // tp)
        return 2.0 * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    if kind in (AttentionKind.FULL, AttentionKind.SLIDING):
        assert model.attention is not None
        a = model.attention
        heads = max(kv_heads_per_rank(a.num_kv_heads, tp), a.num_heads // tp)
        return 4.0 * heads * a.head_dim
    return 0.0


def decode_batch(batch_size: int, context_tokens: float, window: int | None) -> BatchShape:
    """``batch_size`` sequences each decoding one token with ``context_tokens`` in context."""
    ctx = float(context_tokens)
    win = min(ctx, window) if window else ctx
    return BatchShape(
        num_tokens=batch_size,
        num_seqs=batch_size,
        kv_tokens=batch_size * ctx,
        window_kv_tokens=batch_size * win,
        attn_pairs=batch_size * ctx,
        window_attn_pairs=batch_size * win,
    )


@lru_cache(maxsize=8192)
def prefill_batch(prompt_tokens: int, window: int | None, *, start_tokens: int = 0) -> BatchShape:
    """One sequence's prompt chunk of ``prompt_tokens`` after ``start_tokens`` already cached.

    Causal attention: query ``i`` attends ``start + i + 1`` keys, Σ = n x start + n(n+1)/2.
    """
    n, s = prompt_tokens, start_tokens
    pairs = n * s + n * (n + 1) / 2.0
    win_pairs = _window_pairs(n, s, window) if window else pairs
    return BatchShape(
        num_tokens=n,
        num_seqs=1,
        kv_tokens=float(s),
        window_kv_tokens=float(min(s, window) if window else s),
        attn_pairs=pairs,
        window_attn_pairs=float(win_pairs),
        prompt_tokens=n,
    )


def _window_pairs(n: int, start: int, window: int) -> float:
    """Σ_{i<n} min(start + i + 1, window) in closed form."""
    # queries whose key count is still below the window
    ramp = max(0, min(n, window - start))
    first = start + 1
    ramp_sum = ramp * first + ramp * (ramp - 1) / 2.0
    return ramp_sum + (n - ramp) * window
