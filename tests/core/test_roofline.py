"""Step-time model worked by hand on simple cases."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.capacity import ttft_s
from servecap.core.cost import cost_breakdown, replicas_needed
from servecap.core.defaults import build_deployment, default_batch_limits
from servecap.core.memory import pp_partition
from servecap.core.plan import plan
from servecap.core.roofline import StepCost, _window_pairs, decode_batch, prefill_batch, step_cost
from servecap.specs.perf import Efficiency, RequestShape

IDEAL = Efficiency(bandwidth_efficiency=1.0, compute_efficiency=1.0, step_overhead_s=0.0)


def test_llama8b_single_decode_on_h100() -> None:
    """8.03e9 params x 2 B = 16.06 GB; + 1,000 tokens x 131,072 B of KV = 16.19 GB; / 3.35 TB/s
    = 4.83 ms (memory-bound: 2 x 7.5e9 FLOPs / 989 TFLOP/s = 15 us)."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    p = plan(dep)
    weights = p.stage.weights_bytes_per_gpu
    assert weights == 8_030_261_248 * 2
    step = p.step.step_time(decode_batch(1, 1000, None), IDEAL)
    assert step.memory_s == pytest.approx((weights + 1000 * 131_072) / 3.35e12)
    assert step.bottleneck == "memory"
    assert step.compute_s == pytest.approx((2 * (8_030_261_248 - 525_336_576) + 4 * 32 * 128 * 32 * 1000) / 989e12)


def test_prefill_attention_pairs() -> None:
    """Causal prefill of n tokens after s cached: n x s + n(n+1)/2 (query i sees s + i + 1 keys)."""
    b = prefill_batch(4, None, start_tokens=10)
    assert b.attn_pairs == 4 * 10 + 10
    assert _window_pairs(4, 10, 12) == 11 + 12 + 12 + 12
    assert _window_pairs(5, 0, 100) == 15


def test_tp_allreduce_time() -> None:
    """TP 8, 2 all-reduces per layer x 80 layers, ring 2 x 7/8 x tokens x 8,192 x 2 B / 450 GB/s."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-70B"), lookup_gpu("H100"), tp=8, max_model_len=8192)
    cost = step_cost(dep, stage_weights_bytes=10**10)
    eff = Efficiency(allreduce_latency_s=10e-6)
    step = cost.step_time(decode_batch(64, 1000, None), eff)
    per = 2 * 7 / 8 * 64 * 8192 * 2 / 450e9 + 10e-6
    assert step.comm_s == pytest.approx(160 * per)


def test_moe_reads_only_touched_experts() -> None:
    """One token in Mixtral touches 2 of 8 experts per layer; many tokens touch all 8."""
    dep = build_deployment(resolve_model("mistralai/Mixtral-8x7B-v0.1"), lookup_gpu("H100"), tp=2, max_model_len=4096)
    p = plan(dep)
    cost: StepCost = p.step
    full = cost.weight_bytes_read(10_000)
    one = cost.weight_bytes_read(1)
    assert full == pytest.approx(p.stage.weights_bytes_per_gpu, rel=1e-6)
    expert_bytes = cost.expert_bytes_per_layer * cost.moe_layers
    assert one == pytest.approx(full - 6 * expert_bytes)


def test_ttft_chunks_long_prompts() -> None:
    """A 10,000-token prompt with a 2,048-token budget takes 5 chunks, longer than one step."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("L40S"), max_model_len=16384)
    p = plan(dep)
    t = ttft_s(p.step, 0, RequestShape(10_000, 10), IDEAL, 2048)
    assert t > p.step.step_time(prefill_batch(10_000, None), IDEAL).total_s * 0.99


def test_vllm_batch_defaults() -> None:
    assert default_batch_limits(lookup_gpu("H100")) == (8192, 1024)
    assert default_batch_limits(lookup_gpu("A100")) == (2048, 256)  # A100s are excluded by name
    assert default_batch_limits(lookup_gpu("L4")) == (2048, 256)


def test_pp_partition_matches_vllm() -> None:
    assert pp_partition(80, 4) == [20, 20, 20, 20]
    assert pp_partition(61, 4) == [15, 15, 16, 15]  # the remainder goes to stages before the last
    assert pp_partition(126, 4) == [31, 32, 32, 31]


def test_cost_formulas() -> None:
    """$3.59/h x 730 h / 675 users = $3.88; 926 tok/s -> $3.59 / (926 x 3600) x 1e6 = $1.077/Mtok."""
    c = cost_breakdown(
        rent_usd_per_gpu_hour=3.59,
        purchase_usd_per_gpu=35_000,
        num_gpus=1,
        users=675,
        output_tokens_per_s=926.0,
        lifetime_years=4,
    )
    assert c.usd_per_user_month == pytest.approx(3.59 * 730 / 675)
    assert c.usd_per_million_tokens == pytest.approx(3.59 / (926 * 3600) * 1e6)
    assert c.usd_per_user_lifetime == pytest.approx(35_000 / 675)
    assert replicas_needed(10_000, 675) == 15
    assert replicas_needed(1350, 675) == 2


def test_paged_mean_concurrency_by_hand() -> None:
    """Llama-3.1-8B, 16-token blocks, P=100, O=32: lengths 100..112 hold 7 blocks (13 steps),
    113..128 hold 8 (16 steps), 129..131 hold 9 (3 steps): mean 246/32 = 7.6875 blocks ->
    1,000 blocks / 7.6875 = 130.1 requests (vs 1,000 // 9 = 111 at the final length)."""
    from servecap.core.blocks import kv_layout
    from servecap.core.capacity import paged_mean_concurrency
    from servecap.specs.dtypes import kv_dtype_named

    m = resolve_model("meta-llama/Llama-3.1-8B")
    layout = kv_layout(m, m.layers, tp=1, kv_dtype=kv_dtype_named("bf16"), block_size=None)
    assert paged_mean_concurrency(layout, 1000, RequestShape(100, 32)) == pytest.approx(1000 / 7.6875)


def test_steady_state_with_lumpy_prefill() -> None:
    """B=10 requests, P=2,048, O=256, budget 8,192: each prompt is one chunk (k=1), 10 mixed steps
    of 2,048 prompt tokens + 10 decodes and 246 pure decode steps per cycle of 256 tokens:
    TPOT = (10 x t_mixed + 246 x t_decode) / 256. With P=1,024, O=8, B=100 the prompts overlap:
    every step carries 100 x 1,024 / 8 = 12,800 > 8,092 prompt tokens, so the cycle stretches to
    102,400 / 8,092 full steps."""
    from servecap.core.capacity import mixed_batch, steady_state

    dep = build_deployment(
        resolve_model("meta-llama/Llama-3.1-70B"), lookup_gpu("H200"), weights_dtype="fp8", max_model_len=8192
    )
    cost = plan(dep).step
    eff = Efficiency()
    req = RequestShape(2048, 256)
    t_mixed = cost.step_time(mixed_batch(cost, 10, req, 2048), eff).total_s
    t_decode = cost.step_time(decode_batch(10, req.mean_held_tokens, None), eff).total_s
    s = steady_state(cost, 10, req, eff, 8192)
    assert s.mixed_steps == 10
    assert s.tpot_s == pytest.approx((10 * t_mixed + 246 * t_decode) / 256)
    # 246 memory-bound decode steps outweigh the 10 compute-bound prompt steps
    assert cost.step_time(mixed_batch(cost, 10, req, 2048), eff).bottleneck == "compute"
    assert 10 * t_mixed < 246 * t_decode and s.bottleneck == "memory"
    req2 = RequestShape(1024, 8)
    full = cost.step_time(mixed_batch(cost, 100, req2, 8092), eff).total_s
    s2 = steady_state(cost, 100, req2, eff, 8192)
    assert s2.mixed_steps == pytest.approx(102_400 / 8092)
    assert s2.tpot_s == pytest.approx(full * 102_400 / 8092 / 8)


def test_lm_head_runs_once_per_sequence() -> None:
    """The decoder body's matmuls run for every token, the LM head for one row per sequence
    (vLLM's logits_indices), tied to the embedding or not. By hand:

    - Llama-3.1-8B (untied): 8,030,261,248 params - 525,336,576 embedding - 525,336,576 LM head
      = 6,979,588,096 body params -> 13,959,176,192 FLOPs per token; LM head 2 x 128,256 x 4,096
      = 1,050,673,152 FLOPs per sequence;
    - Qwen3-0.6B (tied): 596,049,920 - 155,582,464 embedding = 440,467,456 -> 880,934,912 per
      token; LM head 2 x 151,936 x 1,024 = 311,164,928 per sequence (not counted at all before).
    """
    want = {
        "meta-llama/Llama-3.1-8B": (13_959_176_192.0, 1_050_673_152.0),
        "Qwen/Qwen3-0.6B": (880_934_912.0, 311_164_928.0),
    }
    for model, (per_token, per_seq) in want.items():
        cost = plan(build_deployment(resolve_model(model), lookup_gpu("H100"), max_model_len=4096)).step
        assert (cost.matmul_flops_per_token, cost.logits_flops_per_seq) == (per_token, per_seq)
    # a 1,024-token prefill chunk of the 8B: 1,024 body rows + 1 logits row, not 1,024 of each
    cost = plan(build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"))).step
    eff = Efficiency(compute_efficiency=1.0, bandwidth_efficiency=1.0)
    shape = prefill_batch(1024, None)
    flops = 1024 * 13_959_176_192.0 + 1_050_673_152.0 + cost.attn_flops_per_pair * shape.attn_pairs
    assert cost.step_time(shape, eff).compute_s == pytest.approx(flops / cost.peak_flops, rel=1e-12)


def test_ttft_carries_the_servers_per_request_cost() -> None:
    """TTFT as the client sees it: the prefill steps plus Efficiency.request_overhead_s (6.5 ms
    by default, docs/validation.md); TPOT does not carry it."""
    p = plan(build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100")))
    req = RequestShape(1024, 128)
    bare = Efficiency(request_overhead_s=0.0)
    assert Efficiency().request_overhead_s == 0.0065
    assert ttft_s(p.step, 0, req, Efficiency(), 8192) == pytest.approx(ttft_s(p.step, 0, req, bare, 8192) + 0.0065)
    no_cost = plan(p.deployment, efficiency=bare, request=p.request)
    assert p.single_request_ttft_s == pytest.approx(no_cost.single_request_ttft_s + 0.0065, rel=1e-12)
    assert p.single_request_tpot_s == no_cost.single_request_tpot_s
