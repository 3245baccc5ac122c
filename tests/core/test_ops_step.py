"""The step as operations (core/ops): each operation's formula worked by hand, the measured tables'
interpolation, and ``--explain-step`` adding up to the step the simulator uses."""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from servecap.catalog.gpus import lookup_gpu
from servecap.catalog.models import resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.ops import OperationStep, explain_decode_step
from servecap.core.ops.layers import layer_gemms
from servecap.core.ops.step import graph_tokens
from servecap.core.ops.timers import RooflineTimer, TableTimer, _curve_s, _Grid
from servecap.core.plan import plan
from servecap.core.roofline import decode_batch, prefill_batch
from servecap.sim.setup import engine_setup_from_plan
from servecap.sim.step_time import StepTimeModel
from servecap.specs.amd_kernels import GEMM_SHARE_OF_MAF
from servecap.specs.gemm_chain_timings import CHAIN_SHAPES
from servecap.specs.kernel_timings import ALLREDUCE_S, GEMM_FIT
from servecap.specs.moe_mla_timings import MLA_CONTEXT_S, MLA_GENERATION_S, MOE_RATIO
from servecap.specs.perf import Efficiency

OPS = Efficiency(step_model="operations")


def _step_s(time_fn: Callable[..., float], shape: Any) -> float:
    """One step's time from a step-time function of the simulator's seven shape arguments."""
    return time_fn(
        shape.num_tokens,
        shape.num_seqs,
        shape.kv_tokens,
        shape.window_kv_tokens,
        shape.attn_pairs,
        shape.window_attn_pairs,
        shape.prompt_tokens,
    )


def _h200(model: str, tp: int, kv: str = "fp8"):  # type: ignore[no-untyped-def]
    return build_deployment(resolve_model(model), lookup_gpu("H200"), tp=tp, weights_dtype="fp8", kv_cache_dtype=kv)


def test_llama_70b_layer_gemms() -> None:
    # Llama-3.1-70B: hidden 8,192, 64 query heads, 8 KV heads of 128, intermediate 28,672.
    # qkv: 64 x 128 + 2 x 8 x 128 = 10,240 outputs; gate_up: 2 x 28,672 = 57,344.
    m = resolve_model("meta-llama/Llama-3.1-70B")
    got = [(name, n, k) for name, n, k, _ in layer_gemms(m, m.layers[0], 1)]
    assert got == [
        ("qkv_proj", 10240, 8192),
        ("o_proj", 8192, 8192),
        ("gate_up_proj", 57344, 8192),
        ("down_proj", 8192, 28672),
    ]
    # tp 8: 8 query heads and one KV head per GPU: 8 x 128 + 2 x 128 = 1,280; 28,672 / 8 = 3,584
    got8 = [(name, n, k) for name, n, k, _ in layer_gemms(m, m.layers[0], 8)]
    assert got8[0] == ("qkv_proj", 1280, 8192)
    assert got8[3] == ("down_proj", 8192, 3584)


def test_deepseek_v3_mla_and_moe_gemms_at_tp8() -> None:
    # DeepSeek-V3: hidden 7,168, 128 heads (16 per GPU), q_lora 1,536, kv_lora 512, d_nope 128,
    # d_rope 64, d_v 128; 256 experts, one shared expert of 2,048 (256 per GPU); router 256 x 7,168.
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    moe_layer = next(layer for layer in m.layers if layer.mlp == "moe")
    got = [(name, n, k, rep) for name, n, k, rep in layer_gemms(m, moe_layer, 8)]
    assert got == [
        ("q_a_proj", 1536, 7168, True),
        ("q_b_proj", 16 * 192, 1536, False),
        ("kv_a_proj", 576, 7168, True),
        ("kv_b_proj", 16 * 256, 512, False),
        ("o_proj", 7168, 16 * 128, False),
        ("moe_router", 256, 7168, True),
        ("shared_gate_up_proj", 512, 7168, False),
        ("shared_down_proj", 7168, 256, False),
    ]


def _roof(**kw: float) -> RooflineTimer:
    base: dict[str, Any] = dict(
        hbm_bytes_s=4.8e12,
        peak_flops=1978e12,
        bf16_flops=989e12,
        bandwidth_efficiency=0.714,
        compute_efficiency=0.42,
        bf16_compute_efficiency=0.60,
        link_bytes_s=450e9,
        allreduce_latency_s=10e-6,
    )
    base.update(kw)
    return RooflineTimer(**base)


def test_roofline_gemm_by_hand() -> None:
    # qkv of Llama-3.1-70B FP8 at 64 tokens on an H200: weights 10,240 x 8,192 x 1 B = 83,886,080 B
    # over 4.8 TB/s x 0.714 = 24.476 us; 2 x 64 x 10,240 x 8,192 = 10,737,418,240 FLOPs over
    # 1,978 TFLOP/s x 0.42 = 12.925 us; memory-bound: 24.476 us.
    sec, src = _roof().gemm(64, 10240, 8192, 1.0, "fp8")
    assert src == "roofline"
    assert sec == pytest.approx(83_886_080 / 3.4272e12, rel=1e-12)
    assert sec == pytest.approx(24.4765e-6, rel=1e-5)
    # at 4,096 tokens compute binds: 6.8719e11 FLOPs / 8.3076e14 = 827.2 us
    big, _ = _roof().gemm(4096, 10240, 8192, 1.0, "fp8")
    assert big == pytest.approx(2 * 4096 * 10240 * 8192 / (1978e12 * 0.42), rel=1e-12)


def test_ring_allreduce_by_hand() -> None:
    # 64 tokens x 8,192 x 2 B = 1,048,576 B over 8 GPUs: 2 x 7/8 x 1,048,576 = 1,835,008 B
    # over 450 GB/s = 4.078 us, + 10 us latency
    sec, _ = _roof().allreduce(1_048_576, 8)
    assert sec == pytest.approx(1_835_008 / 450e9 + 10e-6, rel=1e-12)


def test_table_gemm_reads_and_interpolates_the_measured_line() -> None:
    t = TableTimer(_roof(), "H200-SXM", "vllm", "fp8", "fp8", 8)
    rows = {m: (fixed, ratio) for m, fixed, ratio in GEMM_FIT[("H200-SXM", "vllm", "fp8")][1]}
    n, k = 10240, 8192

    def ideal(m: int) -> float:
        mem = (n * k * 1.0 + (m * k + m * n) * 2.0) / 4.8e12
        return max(mem, 2.0 * m * n * k / 1978e12)

    sec, src = t.gemm(64, n, k, 1.0, "fp8")
    assert src.startswith("measured: NVIDIA AIConfigurator 0.12.0") and "vllm 0.24.0 H200-SXM fp8" in src
    assert sec == pytest.approx(rows[64][0] + rows[64][1] * ideal(64), rel=1e-12)
    # 96 tokens: 0.58496 of the way from 64 to 128 in log m (log 1.5 / log 2)
    w = math.log(1.5) / math.log(2.0)
    fixed = rows[64][0] + w * (rows[128][0] - rows[64][0])
    ratio = rows[64][1] + w * (rows[128][1] - rows[64][1])
    assert t.gemm(96, n, k, 1.0, "fp8")[0] == pytest.approx(fixed + ratio * ideal(96), rel=1e-12)
    # no table for this GPU: the roofline
    other = TableTimer(_roof(), "MI300X", "vllm", "fp8", "fp8", 8)
    assert other.gemm(64, n, k, 1.0, "fp8") == _roof().gemm(64, n, k, 1.0, "fp8")


def _chain_s(t: TableTimer, m: int) -> float:
    return sum(count * t.gemm(m, n, k, 2.0, "bf16")[0] for k, n, count in CHAIN_SHAPES)


@pytest.mark.parametrize(
    ("gpu", "hbm", "m", "measured_s"),
    [
        # benchmarks/data/gpu_ceilings_h100.json / _h200.json: Llama-3.1-8B's 129 BF16 matmuls
        ("H100-SXM", 3.35e12, 1, 0.005421),
        ("H100-SXM", 3.35e12, 1024, 0.023513),
        ("H200-SXM", 4.8e12, 128, 0.005703),
        ("H200-SXM", 4.8e12, 8192, 0.183818),
    ],
)
def test_vllm_bf16_gemms_reproduce_the_first_party_matmul_chain(
    gpu: str, hbm: float, m: int, measured_s: float
) -> None:
    """At a measured token count, vLLM's BF16 GEMMs of the chain add up to the first-party chain
    time exactly (the table's line times measured / table at that ``m``)."""
    t = TableTimer(_roof(hbm_bytes_s=hbm), gpu, "vllm", "bf16", "bf16", 8)
    assert _chain_s(t, m) == pytest.approx(measured_s, rel=1e-9)
    src = t.gemm(m, 4096, 4096, 2.0, "bf16")[1]
    assert "vllm 0.24.0" in src and f"gpu_ceilings_{gpu[:4].lower()}.json" in src


def test_chain_correction_between_measured_counts_and_where_it_does_not_apply() -> None:
    """At 1,024 tokens on an H100 the table's chain is 19.45 ms against the measured 23.51 ms
    (factor 1.209: AIConfigurator's BF16 GEMMs at 83% of peak, the bare chain at 69%); between
    measured counts the factor is read in log m. FP8 GEMMs and other engines keep the table's
    line."""
    roof = _roof(hbm_bytes_s=3.35e12)
    t = TableTimer(roof, "H100-SXM", "vllm", "bf16", "bf16", 8)
    assert t._chain is not None
    ms, factors, _ = t._chain
    curve = t._gemm["bf16"]

    def table_s(m: int, n: int, k: int) -> float:  # the uncorrected measured line
        ideal = max((n * k * 2.0 + (m * k + m * n) * 2.0) / 3.35e12, 2.0 * m * n * k / 989e12)
        return _curve_s(curve, m, ideal)

    i = ms.index(1024.0)
    assert factors[i] == pytest.approx(1.209, abs=0.001)
    table_chain = sum(count * table_s(1024, n, k) for k, n, count in CHAIN_SHAPES)
    assert table_chain == pytest.approx(0.023513 / factors[i], rel=1e-9)
    # 1,536 tokens: log 1.5 / log 2 of the way from the factor at 1,024 to the one at 2,048
    w = math.log(1.5) / math.log(2.0)
    expect = factors[i] + w * (factors[i + 1] - factors[i])
    assert t.gemm(1536, 6144, 4096, 2.0, "bf16")[0] == pytest.approx(table_s(1536, 6144, 4096) * expect, rel=1e-12)
    fp8 = TableTimer(roof, "H100-SXM", "vllm", "fp8", "fp8", 8)
    assert "first-party" not in fp8.gemm(64, 6144, 4096, 1.0, "fp8")[1]
    other_engine = TableTimer(roof, "H100-SXM", "sglang", "bf16", "bf16", 8)
    assert other_engine._chain is None
    assert "first-party" not in other_engine.gemm(64, 6144, 4096, 2.0, "bf16")[1]


def test_table_allreduce_at_a_measured_size() -> None:
    t = TableTimer(_roof(), "H200-SXM", "vllm", "fp8", "fp8", 8)
    pts = dict(ALLREDUCE_S[("H200-SXM", "vllm")][1][8])
    sec, src = t.allreduce(1_048_576, 8)
    assert sec == pts[1_048_576] and "custom all-reduce" in src
    # tp 3 is not measured: the ring
    assert t.allreduce(1_048_576, 3) == _roof().allreduce(1_048_576, 3)


def test_ep_dispatch_bytes_by_hand() -> None:
    # the seam of expert parallelism: DeepSeek-V3 at EP 8, 4 tokens, top-8, hidden 7,168, BF16:
    # 4 x 8 x 7,168 x 2 x 7/8 = 401,408 B per MoE layer, 58 MoE layers: 23,281,664 B
    dep = _h200("deepseek-ai/DeepSeek-V3", 8, kv="auto")
    cost = plan(dep, efficiency=OPS).step
    ops = OperationStep(dep, cost, ep=8).token_ops(4, OPS)
    dispatch = next(o for o in ops if o.name == "ep_dispatch")
    assert dispatch.count == 58
    assert dispatch.bytes == pytest.approx(401_408 * 58, rel=1e-12)
    assert all(o.name not in ("ep_dispatch", "ep_combine") for o in OperationStep(dep, cost).token_ops(4, OPS))


@pytest.mark.parametrize(
    ("model", "tp", "kv", "batch"),
    [("meta-llama/Llama-3.1-70B", 1, "fp8", 64), ("deepseek-ai/DeepSeek-V3", 8, "auto", 4)],
)
@pytest.mark.parametrize("step_model", ["operations", "roofline"])
def test_explain_step_adds_up_to_the_simulators_step(model: str, tp: int, kv: str, batch: int, step_model: str) -> None:
    eff = Efficiency(step_model=step_model)
    dep = _h200(model, tp, kv)
    p = plan(dep, efficiency=eff)
    setup = engine_setup_from_plan(p, efficiency=eff)
    sim_model = StepTimeModel(setup.step, setup.efficiency)
    context = 1088.0
    shape = decode_batch(batch, context, setup.step.window_tokens)
    simulated = _step_s(sim_model.time, shape)
    step = explain_decode_step(dep, p.step, eff, batch=batch, context_tokens=context)
    assert step.total_s == pytest.approx(simulated, rel=1e-9)
    assert sum(o.time_s for o in step.operations) == pytest.approx(simulated, rel=1e-9)
    names = [o.name for o in step.operations]
    assert "lm_head" in names and "step_overhead" in names
    # DeepSeek-V3 under the operations model: its MLA block is one measured module
    assert ("mla_module" if tp > 1 and step_model == "operations" else "attention") in names
    if tp > 1:
        assert "tp_allreduce" in names and "moe_experts" in names
    if step_model == "operations":
        assert any(o.measured for o in step.operations)  # H200 vLLM tables cover the GEMMs
        assert 0.0 < step.fallback_share < 1.0
    else:
        assert names[-1] == "roofline_overlap"


def test_operations_step_is_memoised_and_deterministic() -> None:
    dep = _h200("meta-llama/Llama-3.1-70B", 1)
    ops = plan(dep, efficiency=OPS).step.ops
    assert isinstance(ops, OperationStep)
    a = ops.time(OPS, 64, 64, 64 * 1088.0, 64 * 1088.0, 64 * 1088.0, 64 * 1088.0, 0)
    assert 64 in ops._by_tokens
    assert ops.time(OPS, 64, 64, 64 * 1088.0, 64 * 1088.0, 64 * 1088.0, 64 * 1088.0, 0) == a


def test_eager_launch_beyond_the_captured_batch() -> None:
    # vLLM captures CUDA graphs up to 512 tokens; a larger decode step launches every kernel
    # eagerly, which costs only what the GPU's own work does not hide
    dep = build_deployment(resolve_model("Qwen/Qwen3-1.7B"), lookup_gpu("H100"))
    cost = plan(dep, efficiency=OPS).step
    ops = cost.ops
    assert isinstance(ops, OperationStep)
    small = [o.name for o in ops.operations(decode_batch(512, 100.0, None), OPS)]
    assert "eager_launch" not in small
    big = ops.operations(decode_batch(513, 100.0, None), OPS)
    launch = next(o for o in big if o.name == "eager_launch")
    gpu = sum(o.time_s for o in big if o.kind != "overhead")
    assert launch.time_s == pytest.approx(max(0.0, launch.count * 16.4e-6 - gpu), abs=1e-15)


def test_graph_tokens_pad_to_vllms_captured_sizes() -> None:
    # vLLM's default capture list at max size 512 (as the first-party 0.26.0 servers logged it):
    # [1, 2, 4] + 8, 16, ..., 248 + 256, 272, ..., 512; a step pads up to the next listed size
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)]
    assert len(sizes) == 51 and sizes[-1] == 512
    for n in range(1, 513):
        assert graph_tokens(n, 512) == next(s for s in sizes if s >= n), n
    # by hand: 3 -> 4, 5 -> 8, 63 -> 64, 65 -> 72, 257 -> 272, 500 -> 512
    assert [graph_tokens(n, 512) for n in (3, 5, 63, 65, 257, 500)] == [4, 8, 64, 72, 272, 512]
    # beyond the largest captured size, or with no sourced capture list: the step's own count
    assert graph_tokens(513, 512) == 513
    assert graph_tokens(63, None) == 63
    # a smaller capture limit (max_num_seqs 100: min(2 x 100, 512) = 200) caps the padding
    assert graph_tokens(199, 200) == 200


def test_a_captured_step_runs_its_gemms_and_elementwise_at_the_padded_count() -> None:
    # Llama-3.1-8B FP8 on one H200 under vLLM: 63 decoding sequences replay the 64-token graph,
    # so the GEMMs and the elementwise kernels cost what 64 tokens cost; the LM head and the
    # sampler run at the 63 real sequences (vLLM computes logits outside the graph, at the
    # scheduled requests' positions), and attention reads the 63 sequences' KV only
    dep = _h200("meta-llama/Llama-3.1-8B", 1, kv="bf16")
    ops = plan(dep, efficiency=OPS).step.ops
    assert isinstance(ops, OperationStep)
    at63 = {o.name: o for o in ops.operations(decode_batch(63, 1088.0, None), OPS)}
    at64 = {o.name: o for o in ops.operations(decode_batch(64, 1088.0, None), OPS)}
    for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "elementwise"):
        assert at63[name].per_rank == 64
        assert at63[name].time_s == at64[name].time_s
    timer = ops.timer(OPS)
    # qkv: 32 x 128 + 2 x 8 x 128 = 6,144 outputs of 4,096 inputs, one GEMM a layer (FP8 weights
    # with their per-tensor scales: 1.000244 bytes a parameter)
    one, _ = timer.gemm(64, 6144, 4096, ops.weight_bytes, "fp8")
    assert at63["qkv_proj"].time_s == pytest.approx(32 * one, rel=1e-12)
    assert at63["lm_head"].per_rank == 63 and at63["lm_head"].time_s < at64["lm_head"].time_s
    assert at63["attention"].time_s < at64["attention"].time_s
    # the simulator's step is the same sum
    total = sum(o.time_s for o in at63.values())
    shape = decode_batch(63, 1088.0, None)
    got = _step_s(lambda *shape_args: ops.time(OPS, *shape_args), shape)
    assert got == pytest.approx(total, rel=1e-12)


def test_grid_interpolates_in_logs_and_scales_times_beyond_its_edge() -> None:
    g = _Grid.of(((1, 10, 1.0), (1, 100, 2.0), (4, 10, 3.0), (4, 100, 5.0)), y_first=True)
    assert g.at(1.0, 10.0, scale=False) == 1.0
    # halfway in log x at y = 1 (1.5) and y = 4 (4.0), halfway in log y: 2.75
    assert g.at(2.0, math.sqrt(1000.0), scale=False) == pytest.approx(2.75)
    assert g.at(1.0, 1000.0, scale=False) == 2.0  # a ratio is clamped
    assert g.at(1.0, 1000.0, scale=True) == pytest.approx(20.0)  # a time grows in proportion
    assert g.at(8.0, 10.0, scale=True) == pytest.approx(6.0)


def test_deepseek_v3_tp8_routed_experts_from_the_measured_moe_ratio() -> None:
    # DeepSeek-V3 FP8 at TP8: each GPU holds a 2,048 / 8 = 256-wide slice of every expert.
    # 8,192 tokens x top-8 / 256 experts = 256 tokens per expert: the measured cell (256, 256).
    # Ideal: 58 MoE layers x 8,192 tokens x 8 experts x 2 x 3 x 7,168 x 256 FLOPs at 1,978 TFLOP/s
    # = 21.2 ms (the touched weights' read, 58 x 256 x 3 x 7,168 x 256 B at 4.8 TB/s, is 17.0 ms).
    dep = _h200("deepseek-ai/DeepSeek-V3", 8, kv="auto")
    cost = plan(dep, efficiency=OPS).step
    flops = 58 * 8192 * 8 * 2 * 3 * 7168 * 256
    assert cost.expert_flops_per_token * 8192 == pytest.approx(flops, rel=1e-9)
    version, cells = MOE_RATIO[("H200-SXM", "vllm", "fp8")]
    ratio = next(r for me, sl, r in cells if me == 256.0 and sl == 256)
    op = next(o for o in OperationStep(dep, cost).token_ops(8192, OPS) if o.name == "moe_experts")
    assert op.time_s == pytest.approx(ratio * flops / 1978e12, rel=1e-9)
    assert op.measured and f"vllm {version} H200-SXM fp8 MoE" in op.source
    assert ratio > 4.0  # narrow slices: several times the roofline


def test_deepseek_v3_mla_block_is_the_measured_module() -> None:
    # DeepSeek-V3 at TP8: 16 heads per GPU; BF16 KV cache (``auto``), block-FP8 GEMMs. A decode
    # step of 4 sequences at 2,048 tokens of context, and a prefill of one 8,192-token prompt,
    # each take 61 layers x the measured module cell.
    dep = _h200("deepseek-ai/DeepSeek-V3", 8, kv="auto")
    ops = plan(dep, efficiency=OPS).step.ops
    assert isinstance(ops, OperationStep)
    gen = dict(((b, c), s) for b, c, s in MLA_GENERATION_S[("H200-SXM", "vllm", "bf16", "fp8")][1][16])
    ctx = dict(((b, c), s) for b, c, s in MLA_CONTEXT_S[("H200-SXM", "vllm", "bf16", "fp8")][1][16])
    decode = ops.operations(decode_batch(4, 2048.0, None), OPS)
    names = [o.name for o in decode]
    assert "mla_module" in names and not {"q_a_proj", "kv_b_proj", "o_proj", "attention"} & set(names)
    mla = next(o for o in decode if o.name == "mla_module")
    assert mla.count == 61 and mla.time_s == pytest.approx(61 * gen[(4, 2048)], rel=1e-12)
    prefill = next(o for o in ops.operations(prefill_batch(8192, None), OPS) if o.name == "mla_module")
    assert prefill.time_s == pytest.approx(61 * ctx[(1, 8192)], rel=1e-12)


def test_amd_fp8_gemm_at_the_fitted_share_of_published_maf() -> None:
    # Llama-3.1-70B FP8 at TP8 on MI300X: gate_up is 2 x 28,672 / 8 = 7,168 x 8,192 per GPU; an
    # 8,192-token prefill computes 2 x 8,192 x 7,168 x 8,192 FLOPs per layer at AMD's MAF of
    # 1,273 TFLOP/s x the fitted share (compute-bound: 58.7 MB of weights, 962 GFLOP)
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-70B"), lookup_gpu("MI300X"), tp=8, weights_dtype="fp8")
    ops = OperationStep(dep, plan(dep, efficiency=OPS).step)
    gate_up = next(o for o in ops.token_ops(8192, OPS) if o.name == "gate_up_proj")
    one = 2.0 * 8192 * 7168 * 8192 / (1273e12 * GEMM_SHARE_OF_MAF)
    assert gate_up.time_s == pytest.approx(80 * one, rel=1e-9)
    assert gate_up.source.startswith("fitted:") and "AMD MAF" in gate_up.source and not gate_up.measured


def test_a_plan_with_its_operations_pickles_and_copies_to_the_same_step_times() -> None:
    """A plan crosses process boundaries with its ``StepCost`` and the ``OperationStep`` on it;
    compiled by mypyc the step pickles as what builds it (``__reduce__``), rebuilt memos and
    timers giving the same times to the last bit, the MoE kernel still counted."""
    the_plan = plan(_h200("deepseek-ai/DeepSeek-V3", 8), efficiency=OPS)
    ops = the_plan.step.ops
    assert isinstance(ops, OperationStep)
    shapes = [(4, 4, 4000.0, 0), (300, 200, 4.0e5, 100), (2048, 1, 2048.0, 2048), (600, 600, 1.2e6, 0)]
    want = [ops.time(OPS, t, s, kv, kv, kv, kv, p) for t, s, kv, p in shapes]
    for back in (pickle.loads(pickle.dumps(the_plan)), copy.deepcopy(the_plan)):
        again = back.step.ops
        assert isinstance(again, OperationStep) and again.cost is back.step
        assert [again.time(OPS, t, s, kv, kv, kv, kv, p) for t, s, kv, p in shapes] == want
        assert again.kernels_per_layer == ops.kernels_per_layer
