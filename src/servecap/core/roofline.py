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

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, Protocol

from servecap.core.activation_traffic import activation_bytes_per_token
from servecap.core.comm import Links
from servecap.core.kv import (
    attention_bytes_per_token_per_layer,
    kv_heads_per_rank,
    state_bytes_per_layer,
)
from servecap.core.params import layer_params_table, param_counts
from servecap.core.spec_decode import DraftCost, expected_tokens_per_step
from servecap.specs.deployment import Deployment
from servecap.specs.engines import engine_profile
from servecap.specs.model import AttentionKind, LayerSpec
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
    # the step as operations (Efficiency.step_model "operations"); set once on the memoised cost, so
    # not part of its value: two costs of one deployment compare equal with or without it
    ops: StepOperations | None = field(default=None, compare=False, repr=False)
    # attention data parallelism and expert parallelism (core/parallel.py, core/moe_dispatch.py):
    # a step prices the whole replica's batch; each of ``dp`` ranks runs 1/dp of its decodes (a
    # prefill chunk stays on one rank), the experts see every rank's tokens
    dp: int = 1
    held_expert_fraction: float = 1.0  # experts one GPU holds over E ((E + redundant) / ep / E)
    expert_load_factor: float = 1.0  # the busiest GPU's expert tokens over the mean (EPLB)
    a2a_s_per_token_low_latency: float = 0.0  # dispatch + combine, all MoE layers, per rank token
    a2a_s_per_token_normal: float = 0.0
    a2a_latency_s: float = 0.0  # per step, all MoE layers
    a2a_mode: str = "auto"  # auto | normal | low_latency (moe_dispatch.resolve_mode)
    two_batch_overlap: bool = False  # dispatch/combine hidden behind the other micro-batch's compute
    # speculative decoding (core/spec_decode.py): each decoding sequence verifies spec_k + 1
    # tokens; the draft runs spec_k passes a step over the batch
    spec_k: int = 0
    spec_tokens_per_step: float = 1.0  # expected tokens a decoding sequence gets per step
    draft_bytes_per_pass: float = 0.0
    draft_flops_per_token: float = 0.0
    draft_kv_bytes_per_token: float = 0.0
    draft_pass_overhead_s: float = 0.0

    def weight_bytes_read(self, num_tokens: int) -> float:
        if self.moe_layers == 0 or num_tokens <= 0:
            return self.dense_weight_bytes if num_tokens > 0 else 0.0
        touched = self.num_experts * (1.0 - (1.0 - self.experts_per_token / self.num_experts) ** num_tokens)
        if self.held_expert_fraction != 1.0:
            touched *= self.held_expert_fraction
        return self.dense_weight_bytes + self.expert_bytes_per_layer * self.moe_layers * touched

    def a2a_s(self, num_tokens: int, rank_tokens: float) -> float:
        """Dispatch + combine of one step (core/moe_dispatch.py): the mode by tokens per rank."""
        if self.a2a_s_per_token_low_latency == 0.0 and self.a2a_s_per_token_normal == 0.0:
            return 0.0
        mode = self.a2a_mode
        if mode == "auto":
            mode = "low_latency" if num_tokens / self.dp <= 256 else "normal"
        per = self.a2a_s_per_token_low_latency if mode == "low_latency" else self.a2a_s_per_token_normal
        return per * rank_tokens + self.a2a_latency_s

    def _step_time_dp(self, batch: BatchShape, eff: Efficiency) -> StepTime:
        """:meth:`step_time` of a replica with attention DP and/or expert parallelism: the step's
        work spread evenly over the ``dp`` ranks (each rank its share of the sequences, tokens,
        context and prompt tokens; vLLM's DP load balancer and DeepSeek's DP balancing aim at
        this), every GPU its share of all ranks' expert tokens times the busiest GPU's load
        factor. A lone request's prefill runs on one rank: price it with ``dp = 1`` (its experts
        still spread: :func:`lone_request_cost`)."""
        dp = self.dp
        n = batch.num_tokens
        prompt = batch.prompt_tokens
        rank_tokens = n / dp
        seqs = batch.num_seqs / dp
        bytes_read = (
            self.weight_bytes_read(n)
            + (
                self.kv_bytes_per_token * batch.kv_tokens
                + self.window_bytes_per_token * batch.window_kv_tokens
                + 2.0 * self.state_bytes_per_seq * batch.num_seqs
            )
            / dp
        )
        expert_extra = self.expert_flops_per_token * (1.0 / self.moe_gemm_efficiency_ratio - 1.0)
        expert_flops = (self.expert_flops_per_token + expert_extra) * self.expert_load_factor * n
        flops = (
            (self.matmul_flops_per_token - self.expert_flops_per_token) * rank_tokens
            + expert_flops
            + self.logits_flops_per_seq * seqs
            + (self.attn_flops_per_pair * batch.attn_pairs + self.window_attn_flops_per_pair * batch.window_attn_pairs)
            / dp
        )
        bandwidth = self.hbm_bytes_s * _bandwidth_efficiency(eff, self.gpu_family, self.engine)
        memory_s = bytes_read / bandwidth
        activation_s = self.activation_bytes_per_token * rank_tokens / bandwidth
        compute_s = flops / (self.peak_flops * _compute_efficiency(eff, self.compute_rate, self.engine))
        comm_s = 0.0
        if self.tp > 1:
            ring = 2.0 * (self.tp - 1) / self.tp
            per_allreduce = ring * rank_tokens * self.allreduce_bytes_per_token / self.link_bytes_s
            comm_s = self.allreduces * (per_allreduce + eff.allreduce_latency_s)
        a2a = self.a2a_s(n, rank_tokens)
        core = memory_s if memory_s > compute_s else compute_s
        if self.two_batch_overlap:
            # two micro-batches: one's dispatch/combine runs under the other's compute
            # (DeepSeek's inference-system overview; SGLang --enable-two-batch-overlap)
            core = core if core > a2a else a2a
        else:
            comm_s += a2a
        overhead_s = _step_overhead(eff, self.gpu_family, self.engine) + eff.prefill_s_per_token * prompt / dp
        total = self.pp * (core + comm_s + activation_s) + overhead_s
        return StepTime(
            total, self.pp * memory_s, self.pp * compute_s, self.pp * comm_s, overhead_s, self.pp * activation_s
        )

    def step_time(self, batch: BatchShape, eff: Efficiency) -> StepTime:
        """Time of one iteration; per GPU, summed over pipeline stages."""
        if batch.num_tokens <= 0:
            return StepTime(0.0, 0.0, 0.0, 0.0, 0.0)
        if self.ops is not None and eff.step_model == "operations":
            return self.ops.step_time(batch, eff)
        if self.spec_k:
            return self._step_time_spec(batch, eff)
        return self._step_time_target(batch, eff)

    def _step_time_spec(self, batch: BatchShape, eff: Efficiency) -> StepTime:
        """A speculative step: the target verifies ``k + 1`` tokens per decoding sequence (GEMMs,
        attention over the context, LM-head rows), the draft runs ``k`` passes over the batch
        (its weight reads and KV reads beside the target's memory traffic, its FLOPs beside the
        target's, a fixed cost per pass); core/spec_decode.py.

        The ``k`` extra tokens of each decoding sequence are priced at the target's marginal cost
        of a token (its GEMM FLOPs, memory-bound kernels, all-reduce and all-to-all share), added
        to the step of the scheduled tokens; the experts they touch are those the step's tokens
        touch. Every term is linear in the batch's aggregates, so a step still prices as an
        affine function of them (sim/step_time.py)."""
        k = self.spec_k
        dec = batch.num_tokens - batch.prompt_tokens  # decoding sequences, one query token each
        scheduled = BatchShape(
            batch.num_tokens,
            batch.num_seqs,
            batch.kv_tokens,
            batch.window_kv_tokens,
            batch.attn_pairs + k * batch.kv_tokens,  # each verified token attends the context
            batch.window_attn_pairs + k * batch.window_kv_tokens,
            batch.prompt_tokens,
        )
        st = self._step_time_target(scheduled, eff)
        dp, pp = self.dp, self.pp
        extra = dec * k  # verified draft tokens beyond the scheduled ones
        bandwidth = self.hbm_bytes_s * _bandwidth_efficiency(eff, self.gpu_family, self.engine)
        peak = self.peak_flops * _compute_efficiency(eff, self.compute_rate, self.engine)
        expert_extra = self.expert_flops_per_token * (1.0 / self.moe_gemm_efficiency_ratio - 1.0)
        if dp == 1 and self.expert_load_factor == 1.0:
            token_flops = self.matmul_flops_per_token + expert_extra
        else:
            token_flops = (self.matmul_flops_per_token - self.expert_flops_per_token) / dp + (
                self.expert_flops_per_token + expert_extra
            ) * self.expert_load_factor
        token_comm = 0.0
        if self.tp > 1:
            token_comm = (
                self.allreduces * 2.0 * (self.tp - 1) / self.tp * self.allreduce_bytes_per_token / self.link_bytes_s
            )
        if not self.two_batch_overlap and (self.a2a_s_per_token_low_latency or self.a2a_s_per_token_normal):
            # the verified tokens are decode tokens: under "auto" they ride the low-latency
            # kernels (a price per token that does not depend on the step's size keeps the step
            # affine in its aggregates)
            mode = "low_latency" if self.a2a_mode == "auto" else self.a2a_mode
            token_comm += (
                self.a2a_s_per_token_low_latency if mode == "low_latency" else self.a2a_s_per_token_normal
            ) / dp
        verify_comp = extra * (token_flops + self.logits_flops_per_seq / dp) / peak
        verify_act = extra * self.activation_bytes_per_token / dp / bandwidth
        verify_comm = extra * token_comm / (dp if self.tp > 1 and dp > 1 else 1)
        draft_mem = k * (self.draft_bytes_per_pass + self.draft_kv_bytes_per_token * batch.kv_tokens / dp) / bandwidth
        draft_comp = k * self.draft_flops_per_token * dec / dp / peak
        # (with two-batch overlap the target's core may be the all-to-all; the verified tokens
        # and the draft are added to the roofline's max all the same)
        before = max(st.memory_s, st.compute_s)
        memory_s = st.memory_s + draft_mem
        compute_s = st.compute_s + pp * verify_comp + draft_comp
        comm_s = st.comm_s + pp * verify_comm
        activation_s = st.activation_s + pp * verify_act
        overhead_s = st.overhead_s + k * self.draft_pass_overhead_s
        total = (
            st.total_s
            - before
            + max(memory_s, compute_s)
            + pp * (verify_comm + verify_act)
            + k * self.draft_pass_overhead_s
        )
        return StepTime(total, memory_s, compute_s, comm_s, overhead_s, activation_s)

    def _step_time_target(self, batch: BatchShape, eff: Efficiency) -> StepTime:
        if self.dp != 1 or self.a2a_latency_s != 0.0 or self.expert_load_factor != 1.0:
            return self._step_time_dp(batch, eff)
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


def lone_request_cost(cost: StepCost) -> StepCost:
    """``cost`` as a single request sees it: its tokens all on one attention-DP rank (the
    experts, sharded over every rank's GPUs, still split its expert work)."""
    if cost.dp == 1:
        return cost
    from dataclasses import replace

    return replace(cost, dp=1)


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
    par = dep.parallelism
    shards = par.moe_shards  # tp x dp GPUs share the experts (core/parallel.py)
    held = 1.0  # the fraction of the E experts one GPU holds a slice of
    expert_bytes_per_layer = 0.0
    if moe is not None and moe_layers:
        # one expert's slice per GPU: whole on an ep-way layer, split over the shards / ep GPUs of its group
        expert_bytes_per_layer = expert_total / moe_layers / moe.num_experts * wbytes / (shards / par.ep)
        held = (moe.num_experts + par.redundant_experts) / par.ep / moe.num_experts
    held_experts = held * (moe.num_experts if moe else 0)
    dense_weight_bytes = stage_weights_bytes - expert_bytes_per_layer * moe_layers * held_experts
    # the routed experts one token runs: k of the E experts of every MoE layer of the stage,
    # spread over the tp x dp GPUs of the layer
    expert_flops = 2.0 * expert_total / moe.num_experts * moe.experts_per_token / shards if moe and moe_layers else 0.0
    a2a_ll = a2a_normal = a2a_latency = 0.0
    load = 1.0
    if moe is not None and moe_layers and par.ep > 1:
        from servecap.core.moe_dispatch import (  # local: only expert-parallel layouts price it
            a2a_latency_s,
            a2a_seconds_per_token,
            expert_load_factor,
        )

        links = deployment_links(dep)
        for mode in ("low_latency", "normal"):
            per = moe_layers * a2a_seconds_per_token(
                hidden=model.hidden_size,
                top_k=moe.experts_per_token,
                ep=par.ep,
                gpus_per_node=par.gpus_per_node,
                mode=mode,
                links=links,
            )
            if mode == "low_latency":
                a2a_ll = per
            else:
                a2a_normal = per
        a2a_latency = moe_layers * a2a_latency_s(par.ep, par.gpus_per_node, links)
        load = expert_load_factor(moe.num_experts, par.ep, par.redundant_experts, par.expert_skew)

    counts = param_counts(model)
    logits_params = model.vocab_size * model.hidden_size  # the LM head's matmul, tied or not
    body_active = (counts.text_matmul_active - counts.lm_head) / pp
    gpu = dep.gpu
    act = _ACT_BYTES[model.torch_dtype]
    link = 1.0
    if tp > 1:
        from servecap.core.comm import group_link

        link = group_link(deployment_links(dep), tp, par.gpus_per_node)[0]
    spec_k, spec_tokens, draft_bytes, draft_flops, draft_kv, draft_overhead = _spec_fields(dep, layers, wbytes)
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
        matmul_flops_per_token=(
            2.0 * body_active / tp
            if par.dp == 1
            else 2.0 * body_active / tp - expert_flops * par.dp + expert_flops  # experts over tp x dp
        ),
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
        dp=par.dp,
        held_expert_fraction=held,
        expert_load_factor=load,
        a2a_s_per_token_low_latency=a2a_ll,
        a2a_s_per_token_normal=a2a_normal,
        a2a_latency_s=a2a_latency,
        a2a_mode=par.a2a_mode,
        two_batch_overlap=par.two_batch_overlap,
        spec_k=spec_k,
        spec_tokens_per_step=spec_tokens,
        draft_bytes_per_pass=draft_bytes,
        draft_flops_per_token=draft_flops,
        draft_kv_bytes_per_token=draft_kv,
        draft_pass_overhead_s=draft_overhead,
    )


def _spec_fields(
    dep: Deployment, layers: tuple[LayerSpec, ...], wbytes: float
) -> tuple[int, float, float, float, float, float]:
    """StepCost's speculative-decoding fields (core/spec_decode.py): ``(spec_k,
    spec_tokens_per_step, draft_bytes_per_pass, draft_flops_per_token, draft_kv_bytes_per_token,
    draft_pass_overhead_s)``; zeros without it."""
    spec = dep.speculative
    if spec is None:
        return 0, 1.0, 0.0, 0.0, 0.0, 0.0
    d = draft_cost_of(dep, layers, wbytes)
    return (
        spec.num_speculative_tokens,
        expected_tokens_per_step(spec.acceptance),
        d.bytes_per_pass,
        d.flops_per_token,
        d.kv_bytes_per_context_token,
        d.pass_overhead_s,
    )


def draft_cost_of(
    dep: Deployment, layers: tuple[LayerSpec, ...] | None = None, wbytes: float | None = None
) -> DraftCost:
    """The draft's per-GPU cost for ``dep`` (its speculative settings must be set): the target's
    last layer stands for an MTP/EAGLE head's layer."""
    from servecap.core.spec_decode import draft_cost

    spec = dep.speculative
    assert spec is not None
    model, tp = dep.model, dep.parallelism.tp
    if wbytes is None:
        wbytes = dep.weights_dtype.bytes_per_param if dep.weights_dtype.quantized else _ACT_BYTES[model.torch_dtype]
    last = model.layers[-1] if layers is None else layers[-1]
    p = layer_params_table(model)[last]
    par = dep.parallelism
    routed_total, routed_active = float(p.routed_experts), float(p.routed_experts_active)
    if model.moe is not None and par.dp > 1:
        # the head's experts spread over the tp x dp GPUs as the target's do; a pass reads the
        # slices a GPU holds (all of them touched by a replica's batch) or the k it routes to
        held = routed_total * (model.moe.num_experts + par.redundant_experts) / model.moe.num_experts / par.dp
        routed_active = min(routed_active, held)
        routed_total = held
    other = p.mixer + p.dense_mlp + p.moe_other + p.norms
    return draft_cost(
        spec,
        model,
        layer_active_params=other + routed_active,
        layer_total_params=other + routed_total,
        layer_kv_bytes_per_token=attention_bytes_per_token_per_layer(model, last.mixer, tp, dep.kv_dtype)
        if last.mixer in (AttentionKind.FULL, AttentionKind.MLA, AttentionKind.SLIDING)
        else 0.0,
        weight_bytes_per_param=wbytes,
        tp=tp,
    )


def deployment_links(dep: Deployment) -> Links:
    """The GPU's scale-up link and NIC (catalog), in bytes/s and seconds (core/comm.py)."""
    from servecap.core.comm import DEFAULT_P2P_LATENCY_S

    gpu = dep.gpu
    intra = gpu.link_gb_s("interconnect_gb_s") * GB_BYTES
    inter = gpu.nic_gb_s * GB_BYTES if gpu.nic_gb_s is not None else None
    return Links(
        intra_bytes_s=intra,
        inter_bytes_s=inter,
        intra_latency_s=gpu.link_latency_us * 1e-6 if gpu.link_latency_us is not None else DEFAULT_P2P_LATENCY_S,
        inter_latency_s=gpu.nic_latency_us * 1e-6 if gpu.nic_latency_us is not None else DEFAULT_P2P_LATENCY_S,
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
