"""A step as the sum of its operations (``Efficiency.step_model = "operations"``).

Per GPU and pipeline stage, in the order a layer runs them (vLLM's and TensorRT-LLM's kernels run
one after another on one stream, so their times add; only what one kernel does overlaps — its
weight reads with its math, which is what each operation's ``max`` or measured time holds):

- the layer GEMMs (``core.ops.layers``) at ``m`` = the step's tokens (on AMD GPUs, FP8 GEMMs at a
  fitted share of AMD's published Max-Achievable FLOPs, ``specs.amd_kernels``);
- attention: the KV cache read and the score/value FLOPs (``core.roofline``'s per-token bytes
  and per-pair FLOPs), a measured decode kernel where the step decodes only and the layers are
  full attention, else the roofline;
- MoE routed experts (a grouped GEMM): the experts the step's tokens touch,
  ``E (1 - (1 - k/E)^T)`` per layer, read once; measured where a table covers the GPU, engine and
  dtype (the grouped GEMM's time over that ideal by tokens per expert and the expert's slice per GPU:
  DeepSeek-V3's 2,048-wide experts at TP8 are 256-wide slices, 3-14x their roofline), else their
  FLOPs at the engine's grouped-GEMM share of the dense efficiency
  (``specs.perf.MOE_TO_DENSE_GEMM_EFFICIENCY_BY_ENGINE``);
- MLA (DeepSeek-V2/V3, Kimi K2) with DeepSeek-V3's shapes where a table covers it: the whole
  attention block (q/kv down- and up-projections, absorbed decode or prefill attention, ``o_proj``)
  as one measured module, prefill by (sequences, prompt length) and decode by (sequences, context);
  prompt tokens attending cached context beyond their own chunk add the roofline's attention FLOPs
  for those pairs;
- expert-parallel dispatch and combine (``ep_dispatch``, ``ep_combine``: the seam of expert
  parallelism; with ``ep > 1`` each moves ``tokens x top-k x hidden x act_bytes x (ep - 1) / ep``
  bytes per MoE layer over the link — absent at ``ep = 1``);
- TP all-reduce: two per layer of ``tokens x hidden x act_bytes`` (``tp > 1``);
- PP send: the activations to the next stage, ``(pp - 1)`` hand-offs of ``tokens x hidden x act_bytes``;
- memory-bound elementwise kernels (``core.activation_traffic``), recurrent state read and write;
- the LM head (``m`` = the step's sequences: vLLM computes logits at each scheduled request's last
  position) and sampling (the FP32 logits read twice: softmax and the draw);
- overhead: the engine's per-step CPU cost (``Efficiency.step_overhead_on``); beyond the batch the
  engine captures CUDA graphs for (``EngineProfile.cuda_graph_max_batch``), the eager launch of
  every kernel, hidden behind the GPU's work where that is longer:
  ``max(0, kernels x launch_s - gpu_s)``; up to that size, the step replays the graph captured
  for the next listed size (:func:`graph_tokens`), so the GEMMs, the TP all-reduce and the
  elementwise kernels run over the padded token count. The routed experts stay at the real
  tokens (a simplification: the padding rows, fewer than 8 below 256 tokens and 16 above, also
  pass the router, but which experts they touch depends on what the reused input buffers hold), as
  do attention (a padded sequence holds no KV) and the LM head and sampler (vLLM computes logits
  outside the graph, at the scheduled requests' positions).

``per_rank`` of an operation is the batch one rank sees: the step's tokens here; attention data
parallelism and expert parallelism pass their per-rank share through the same field.
"""

from __future__ import annotations

from dataclasses import replace

from servecap.core.kv import kv_heads_per_rank
from servecap.core.ops.layers import Gemm, stage_gemms
from servecap.core.ops.operation import ROOFLINE, Operation
from servecap.core.ops.timers import RooflineTimer, TableTimer, _Grid, mla_module_s
from servecap.core.roofline import BatchShape, StepCost, StepTime
from servecap.specs.deployment import Deployment
from servecap.specs.engines import engine_profile
from servecap.specs.model import AttentionKind
from servecap.specs.perf import Efficiency
from servecap.units import TFLOPS

EAGER_LAUNCH_S = 16.4e-6
"""Host cost of launching one kernel from eager PyTorch: NVIDIA's timings of vLLM 0.24.0's custom
all-reduce on H200 (AIConfigurator 0.12.0, ``comm/vllm/0.24.0/custom_allreduce_perf.parquet``),
eager 20.83 us against 4.38 us replayed in a CUDA graph, at its smallest message (128 elements)."""

MLA_MODULE_GEMMS = frozenset({"q_a_proj", "q_b_proj", "q_proj", "kv_a_proj", "kv_b_proj", "o_proj"})
"""The GEMMs inside AIConfigurator's measured MLA module (``mla_{context,generation}_module``)."""

SAMPLING_READS = 2  # the FP32 logits read by the softmax and by the draw
_ACT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


class OperationStep:
    """One deployment's step as operations. Built once per plan (cheap); ``time`` memoises the
    parts that depend on the token count or the sequence count alone."""

    def __init__(self, dep: Deployment, cost: StepCost, *, ep: int = 1) -> None:
        from servecap.core.memory import stage_layers  # local: memory imports params too

        model = dep.model
        self._dep = dep
        self.cost = cost
        self.tp = dep.parallelism.tp
        self.pp = dep.parallelism.pp
        self.ep = ep
        layers = max(stage_layers(model, self.pp), key=len)
        self.gemms: tuple[Gemm, ...] = stage_gemms(model, layers, self.tp)
        self.attention_layers = sum(1 for layer in layers if layer.mixer.holds_kv)
        self.table_attention = all(layer.mixer is AttentionKind.FULL for layer in layers if layer.mixer.holds_kv) and (
            self.attention_layers > 0
        )
        self.kv_heads = kv_heads_per_rank(model.attention.num_kv_heads, self.tp) if model.attention else 0
        self.table_attention = self.table_attention and model.attention is not None and model.attention.head_dim == 128
        self.hidden = model.hidden_size
        self.vocab_per_gpu = max(1, model.vocab_size // self.tp)
        self.act_bytes = float(_ACT_BYTES[model.torch_dtype])
        self.weight_bytes = dep.weights_dtype.bytes_per_param if dep.weights_dtype.quantized else self.act_bytes
        self.top_k = model.moe.experts_per_token if model.moe else 0
        self.gpu_id = dep.gpu.id
        self.rate = dep.weights_dtype.compute
        self.kv_dtype = dep.kv_dtype.name
        self.bf16_flops = dep.gpu.dense_tflops("bf16") * TFLOPS
        self.elementwise_kernels = 2 if engine_profile(dep.engine.engine).fused_elementwise else 5
        self.graph_max_batch = engine_profile(dep.engine.engine).cuda_graph_max_batch
        # launched kernels per layer, the MoE kernel added by ``timer`` (the constructor reads
        # nothing of ``cost``: unpickling builds this object before ``cost`` has its fields)
        self.kernels_per_layer = (
            len({g.name for g in self.gemms}) + 1 + (2 if self.tp > 1 else 0) + self.elementwise_kernels
        )
        self.layers = len(layers)
        mla = model.mla
        self.mla_heads = max(1, mla.num_heads // self.tp) if mla is not None else 0
        # the MLA module tables hold DeepSeek-V3's MLA shapes (Kimi K2 shares them at 64 heads)
        self.mla_tables = (
            mla is not None
            and model.hidden_size == 7168
            and (mla.q_lora_rank, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim)
            == (1536, 512, 128, 64, 128)
            and self.attention_layers > 0
            and all(layer.mixer is AttentionKind.MLA for layer in layers if layer.mixer.holds_kv)
        )
        self.mla_module = False  # set by ``timer``: the module table covers this deployment
        self.expert_slice = (
            max(1, model.moe.expert_intermediate_size * dep.parallelism.ep // dep.parallelism.moe_shards)
            if model.moe
            else 0
        )
        self._eff: Efficiency | None = None
        self._timer: TableTimer | RooflineTimer | None = None
        self._mla_grids: tuple[_Grid, _Grid, str] | None = None  # set by ``timer`` with ``mla_module``
        self._overhead_s = 0.0  # ``_overhead`` of ``_eff``
        self._moe_kernel_counted = False
        self._by_tokens: dict[int, float] = {}
        self._by_seqs: dict[int, float] = {}

    def __reduce__(self) -> tuple[object, tuple[Deployment, StepCost, int]]:
        """Pickled as what builds it (a plan crosses process boundaries with its ``StepCost``,
        which holds this object): the memos and timers are rebuilt on first use. Compiled by
        mypyc, the class could not be unpickled from its fields."""
        return _rebuilt, (self._dep, self.cost, self.ep)

    # ---- the seam -----------------------------------------------------------------------------

    def timer(self, eff: Efficiency) -> TableTimer | RooflineTimer:
        if eff is not self._eff or self._timer is None:
            c = self.cost
            if not self._moe_kernel_counted and c.moe_layers:
                self.kernels_per_layer += 1
            self._moe_kernel_counted = True
            roof = RooflineTimer(
                hbm_bytes_s=c.hbm_bytes_s,
                peak_flops=c.peak_flops,
                bf16_flops=self.bf16_flops,
                bandwidth_efficiency=eff.bandwidth_efficiency_on(c.gpu_family, c.engine),
                compute_efficiency=eff.compute_efficiency_at(c.compute_rate, c.engine),
                bf16_compute_efficiency=eff.compute_efficiency_at("bf16", c.engine),
                link_bytes_s=c.link_bytes_s,
                allreduce_latency_s=eff.allreduce_latency_s,
            )
            if eff.step_model == "operations":
                roof = self._amd_timer(roof)
                self._timer = TableTimer(roof, self.gpu_id, c.engine, self.rate, self.kv_dtype, self.kv_heads)
            else:
                self._timer = roof
            grids = None
            if isinstance(self._timer, TableTimer) and self.mla_tables:
                grids = self._timer.mla_grids(self.mla_heads, self._gemm_rate())
            self._mla_grids = grids
            self.mla_module = grids is not None
            self._overhead_s = _overhead(eff, c.gpu_family, c.engine)
            self._eff = eff
            self._by_tokens.clear()
            self._by_seqs.clear()
        return self._timer

    def _amd_timer(self, roof: RooflineTimer) -> RooflineTimer:
        """On an AMD GPU with a published MAF (``specs.amd_kernels``), FP8 GEMMs at the fitted share
        of MAF instead of the NVIDIA-fitted share of the spec-sheet peak (BF16 ones unchanged: the
        corpus has too few AMD BF16 rows to fit their share)."""
        from servecap.specs import amd_kernels

        maf = amd_kernels.MAX_ACHIEVABLE_TFLOPS.get(self.gpu_id)
        if maf is None or self.rate != "fp8":
            return roof
        share = amd_kernels.GEMM_SHARE_OF_MAF
        return replace(
            roof,
            peak_flops=maf["fp8"] * TFLOPS,
            compute_efficiency=share,
            source=f"fitted: {share:.2f} x {amd_kernels.MAF_SOURCE}",
        )

    def _gemm_rate(self) -> str:
        return "fp8" if self.rate == "fp8" else "bf16"

    # ---- the operations -----------------------------------------------------------------------

    def token_ops(self, num_tokens: int, eff: Efficiency) -> list[Operation]:
        """The operations whose time depends on the step's token count alone (one stage)."""
        ops: list[Operation] = []
        self._token_times(num_tokens, eff, ops)
        return ops

    def _token_times(self, num_tokens: int, eff: Efficiency, ops: list[Operation] | None) -> list[float]:
        """The times of :meth:`token_ops`, in order; their operations go to ``ops`` unless it is
        None (:meth:`time` wants the times alone and sums them as it would the operations')."""
        timer = self.timer(eff)
        c = self.cost
        t = num_tokens
        padded = graph_tokens(t, self.graph_max_batch)  # what the replayed graph runs
        times: list[float] = []
        for g in self.gemms:
            if self.mla_module and g.name in MLA_MODULE_GEMMS:
                continue  # inside the measured MLA module (``attention_op``)
            bf16 = g.name == "moe_router"  # routers stay unquantized (vLLM's ReplicatedLinear gate)
            one, src = timer.gemm(
                padded, g.n, g.k, self.act_bytes if bf16 else self.weight_bytes, "bf16" if bf16 else self.rate
            )
            sec = one * g.count
            times.append(sec)
            if ops is not None:
                ops.append(
                    Operation(
                        g.name,
                        "gemm",
                        g.count,
                        sec,
                        g.n * g.k * self.weight_bytes * g.count,
                        2.0 * padded * g.n * g.k * g.count,
                        src,
                        padded,
                    )
                )
        if c.moe_layers:
            touched = c.num_experts * (1.0 - (1.0 - c.experts_per_token / c.num_experts) ** t)
            moved = c.expert_bytes_per_layer * c.moe_layers * touched
            flops = c.expert_flops_per_token * t
            roof = timer if isinstance(timer, RooflineTimer) else timer.fallback
            measured = None
            if isinstance(timer, TableTimer) and self.ep == 1:
                ideal = max(moved / roof.hbm_bytes_s, flops / roof.peak_flops)
                measured = timer.moe_experts(t * c.experts_per_token / c.num_experts, self.expert_slice, ideal)
            if measured is None:
                mem = moved / (roof.hbm_bytes_s * roof.bandwidth_efficiency)
                comp = flops / (roof.peak_flops * roof.compute_efficiency * c.moe_gemm_efficiency_ratio)
                sec, src = max(mem, comp), ROOFLINE
            else:
                sec, src = measured
            times.append(sec)
            if ops is not None:
                ops.append(Operation("moe_experts", "moe", c.moe_layers, sec, moved, flops, src, t))
            if self.ep > 1:
                a2a = t * self.top_k * self.hidden * self.act_bytes * (self.ep - 1) / self.ep
                for name in ("ep_dispatch", "ep_combine"):
                    sec = c.moe_layers * (a2a / c.link_bytes_s + eff.allreduce_latency_s)
                    times.append(sec)
                    if ops is not None:
                        ops.append(
                            Operation(name, "communication", c.moe_layers, sec, a2a * c.moe_layers, 0.0, ROOFLINE, t)
                        )
        if self.tp > 1:
            one, src = timer.allreduce(padded * self.hidden * self.act_bytes, self.tp)
            sec = one * c.allreduces
            times.append(sec)
            if ops is not None:
                ops.append(
                    Operation(
                        "tp_allreduce",
                        "communication",
                        c.allreduces,
                        sec,
                        padded * self.hidden * self.act_bytes * c.allreduces,
                        0.0,
                        src,
                        padded,
                    )
                )
        act = c.activation_bytes_per_token * padded
        sec = timer.memory(act)
        times.append(sec)
        if ops is not None:
            ops.append(Operation("elementwise", "elementwise", self.layers, sec, act, 0.0, ROOFLINE, padded))
        return times

    def seq_ops(self, num_seqs: int, eff: Efficiency) -> list[Operation]:
        """The LM head and sampling: once per step (the last stage), per sequence."""
        if num_seqs <= 0:
            return []
        timer = self.timer(eff)
        s, v, h = num_seqs, self.vocab_per_gpu, self.hidden
        one, src = timer.gemm(s, v, h, self.act_bytes, "bf16")  # the LM head stays unquantized
        logits = float(s * v * 4 * SAMPLING_READS)
        return [
            Operation("lm_head", "gemm", 1, one, v * h * self.act_bytes, 2.0 * s * v * h, src, s),
            Operation("sampling", "elementwise", 1, timer.memory(logits), logits, 0.0, ROOFLINE, s),
        ]

    def attention_op(self, batch: BatchShape, eff: Efficiency) -> Operation | None:
        got = self._attention(
            self.timer(eff),
            batch.num_tokens,
            batch.num_seqs,
            batch.kv_tokens,
            batch.window_kv_tokens,
            batch.attn_pairs,
            batch.window_attn_pairs,
            batch.prompt_tokens,
        )
        if got is None:
            return None
        sec, src, moved, flops = got
        name = "mla_module" if self._mla_grids is not None else "attention"
        return Operation(name, "attention", self.attention_layers, sec, moved, flops, src, batch.num_seqs)

    def _attention(
        self,
        timer: TableTimer | RooflineTimer,
        num_tokens: int,
        num_seqs: int,
        kv: float,
        wkv: float,
        pairs: float,
        wpairs: float,
        prompt: int,
    ) -> tuple[float, str, float, float] | None:
        """``(time_s, source, bytes, flops)`` of the step's attention (every layer of the stage),
        or None where it moves and computes nothing; the one place both :meth:`attention_op` and
        :meth:`time` take it from."""
        c = self.cost
        kv_bytes = c.kv_bytes_per_token * kv + c.window_bytes_per_token * wkv
        flops = c.attn_flops_per_pair * pairs + c.window_attn_flops_per_pair * wpairs
        state = 2.0 * c.state_bytes_per_seq * num_seqs
        if kv_bytes <= 0.0 and flops <= 0.0 and state <= 0.0:
            return None
        grids = self._mla_grids
        if grids is not None and isinstance(timer, TableTimer):
            sec = self._mla_s(timer, grids, num_tokens, num_seqs, kv, pairs, prompt, flops)
            return sec, grids[2], kv_bytes, flops
        measured = None
        if isinstance(timer, TableTimer) and self.table_attention and prompt == 0 and num_seqs > 0:
            measured = timer.decode_attention(kv_bytes, num_seqs, kv / num_seqs)
        if measured is None:
            sec, src = timer.attention(kv_bytes, flops)
        else:
            sec, src = measured
        if state > 0.0:
            sec += timer.memory(state)
        return sec, src, kv_bytes + state, flops

    def _mla_s(
        self,
        timer: TableTimer,
        grids: tuple[_Grid, _Grid, str],
        num_tokens: int,
        num_seqs: int,
        kv: float,
        pairs: float,
        prompt: int,
        flops: float,
    ) -> float:
        """The measured MLA module of every attention layer: the decoding sequences (one token
        each) at their mean context, the prefill sequences at their chunk's length; the pairs a
        chunk attends in cached context before it at the roofline's attention rate."""
        decode = max(0, num_tokens - prompt)
        prefill = max(1 if prompt else 0, num_seqs - decode)
        context = kv / num_seqs if num_seqs else 0.0
        sec = mla_module_s(grids, prefill, prompt, decode, context) * self.attention_layers
        if prompt and pairs > 0.0:
            chunk = prompt / prefill
            own = prefill * chunk * (chunk + 1.0) / 2.0 + decode * context
            extra = max(0.0, pairs - own)
            if extra > 0.0:
                sec += timer.fallback.attention(0.0, flops * extra / pairs)[0]
        return sec

    def stage_pp_op(self, num_tokens: int) -> Operation | None:
        if self.pp <= 1:
            return None
        moved = num_tokens * self.hidden * self.act_bytes
        sec = (self.pp - 1) * (moved / self.cost.link_bytes_s + (self._eff.allreduce_latency_s if self._eff else 0.0))
        return Operation("pp_send", "communication", self.pp - 1, sec, moved * (self.pp - 1), 0.0, ROOFLINE, num_tokens)

    def overhead_ops(self, num_tokens: int, gpu_s: float, prompt_tokens: int, eff: Efficiency) -> list[Operation]:
        self.timer(eff)  # counts the MoE kernel in ``kernels_per_layer``
        c = self.cost
        ops = [
            Operation(
                "step_overhead",
                "overhead",
                1,
                _overhead(eff, c.gpu_family, c.engine) + eff.prefill_s_per_token * prompt_tokens,
                0.0,
                0.0,
                ROOFLINE,
                num_tokens,
            )
        ]
        cap = self.graph_max_batch
        if cap is not None and num_tokens > cap:
            kernels = self.kernels_per_layer * self.layers * self.pp + 3
            launch = kernels * EAGER_LAUNCH_S - gpu_s
            ops.append(
                Operation(
                    "eager_launch",
                    "overhead",
                    kernels,
                    max(0.0, launch),
                    0.0,
                    0.0,
                    f"measured: eager launch {EAGER_LAUNCH_S * 1e6:.1f} us per kernel",
                    num_tokens,
                )
            )
        return ops

    def operations(self, batch: BatchShape, eff: Efficiency) -> list[Operation]:
        """Every operation of the step with its time; the step takes their sum."""
        if batch.num_tokens <= 0:
            return []
        pp = self.pp
        stage = self.token_ops(batch.num_tokens, eff)
        att = self.attention_op(batch, eff)
        if att is not None:
            stage.insert(self._attention_index(stage), att)
        ops = [_scaled(o, pp) for o in stage]
        send = self.stage_pp_op(batch.num_tokens)
        if send is not None:
            ops.append(send)
        ops.extend(self.seq_ops(batch.num_seqs, eff))
        gpu_s = sum((o.time_s for o in ops), 0.0)
        ops.extend(self.overhead_ops(batch.num_tokens, gpu_s, batch.prompt_tokens, eff))
        return ops

    def _attention_index(self, stage: list[Operation]) -> int:
        for i, o in enumerate(stage):
            if o.name == "o_proj":
                return i
        return 0

    # ---- the hot path -------------------------------------------------------------------------

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
    ) -> float:
        """The sum of :meth:`operations`' times, the per-token and per-sequence parts memoised."""
        if num_tokens <= 0:
            return 0.0
        timer = self._timer
        if eff is not self._eff or timer is None:
            timer = self.timer(eff)
        tok = self._by_tokens.get(num_tokens)
        if tok is None:
            tok = self.pp * sum(self._token_times(num_tokens, eff, None), 0.0)  # 0.0: a float sum (mypyc)
            send = self.stage_pp_op(num_tokens)
            if send is not None:
                tok += send.time_s
            self._by_tokens[num_tokens] = tok
        seq = self._by_seqs.get(num_seqs)
        if seq is None:
            seq = sum((o.time_s for o in self.seq_ops(num_seqs, eff)), 0.0)
            self._by_seqs[num_seqs] = seq
        att = self._attention(timer, num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt)
        gpu_s = tok + seq + (self.pp * att[0] if att is not None else 0.0)
        over = self._overhead_s + eff.prefill_s_per_token * prompt
        cap = self.graph_max_batch
        if cap is not None and num_tokens > cap:
            launch = (self.kernels_per_layer * self.layers * self.pp + 3) * EAGER_LAUNCH_S - gpu_s
            if launch > 0.0:
                over += launch
        return gpu_s + over

    def step_time(self, batch: BatchShape, eff: Efficiency) -> StepTime:
        """The step as a :class:`StepTime` (parts by kind; ``total_s`` is the operations' sum)."""
        ops = self.operations(batch, eff)
        total = self.time(
            eff,
            batch.num_tokens,
            batch.num_seqs,
            batch.kv_tokens,
            batch.window_kv_tokens,
            batch.attn_pairs,
            batch.window_attn_pairs,
            batch.prompt_tokens,
        )
        mem = comp = comm = over = act = 0.0
        for o in ops:
            if o.kind == "communication":
                comm += o.time_s
            elif o.kind == "overhead":
                over += o.time_s
            elif o.kind == "elementwise":
                act += o.time_s
            elif o.bytes / self.cost.hbm_bytes_s >= o.flops / self.cost.peak_flops:
                mem += o.time_s
            else:
                comp += o.time_s
        return StepTime(total, mem, comp, comm, over, act)


def graph_tokens(num_tokens: int, max_captured: int | None) -> int:
    """The token count a step runs at: vLLM pads a step of at most ``max_captured`` tokens up to
    the next size it captured a CUDA graph for — 1, 2, 4, then multiples of 8 below 256 and of 16
    from 256 to ``max_captured`` (``vllm/config/vllm.py``, ``_set_cudagraph_sizes``; the
    first-party vLLM 0.26.0 servers logged exactly that list up to 512,
    ``benchmarks/data/vllm_sweep_h200/*/server-startup.log``), and the replayed graph's GEMMs,
    all-reduces and elementwise kernels run over every padded row. Larger steps, and engines
    without a sourced capture list (``max_captured`` None), run at their own count."""
    if max_captured is None or num_tokens > max_captured or num_tokens <= 0:
        return num_tokens
    if num_tokens <= 2:
        return num_tokens
    if num_tokens <= 4:
        return 4
    if num_tokens <= 256:
        return -(-num_tokens // 8) * 8
    return min(max_captured, 256 + -(-(num_tokens - 256) // 16) * 16)


def _rebuilt(dep: Deployment, cost: StepCost, ep: int) -> OperationStep:
    return OperationStep(dep, cost, ep=ep)


def _scaled(op: Operation, pp: int) -> Operation:
    """A stage's operation over all ``pp`` stages (every token passes each)."""
    if pp == 1:
        return op
    return Operation(
        op.name, op.kind, op.count * pp, op.time_s * pp, op.bytes * pp, op.flops * pp, op.source, op.per_rank
    )


def _overhead(eff: Efficiency, gpu_family: str, engine: str) -> float:
    """The step's CPU cost: the operations model's own fit where it has one (``specs.perf``)."""
    if eff.step_model == "operations":
        return eff.operations_step_overhead_on(gpu_family, engine)
    return eff.step_overhead_on(gpu_family, engine)
