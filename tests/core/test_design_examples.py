"""The worked examples in DESIGN.md, reproduced by the planner's functions."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.blocks import kv_capacity, kv_layout
from servecap.core.capacity import mm1_wait_factor, ridge_batch
from servecap.core.defaults import build_deployment
from servecap.core.kv import kv_bytes_for_context, kv_bytes_per_token
from servecap.core.plan import plan
from servecap.core.roofline import decode_batch, step_cost
from servecap.specs.deployment import RopeScaling
from servecap.specs.dtypes import kv_dtype_named
from servecap.specs.gpu import GpuSpec
from servecap.specs.perf import Efficiency

IDEAL = Efficiency(bandwidth_efficiency=1.0, compute_efficiency=1.0, step_overhead_s=0.0)


def test_llama70b_kv_per_8k_request() -> None:
    """80 layers x 8 KV heads x 128 x 2 x 2 B = 327,680 B/token; x 8,192 = 2.68 GB."""
    m = resolve_model("meta-llama/Llama-3.1-70B")
    assert kv_bytes_per_token(m, 1, kv_dtype_named("bf16")) == 327_680
    assert kv_bytes_for_context(m, 1, kv_dtype_named("bf16"), 8192) == 2_684_354_560


def test_llama70b_fp8_on_h200_concurrency() -> None:
    """H200 141 GB x 0.9 = 126.9 GB; minus 70 GB of FP8 weights = 57 GB of KV -> 57 / 2.68 = 21
    concurrent 8K requests; FP8 KV halves the bytes -> 42."""
    m = resolve_model("meta-llama/Llama-3.1-70B")
    h200 = lookup_gpu("H200")
    assert h200.total_memory_bytes * 0.9 == pytest.approx(126.9e9)
    for kv, expected in (("bf16", 21), ("fp8", 42)):
        dep = build_deployment(
            m, h200, weights_dtype="fp8", kv_cache_dtype=kv, max_model_len=8192, kv_cache_memory_bytes=57 * 10**9
        )
        p = plan(dep)
        assert int(p.stage.kv.max_concurrency) == expected


def test_llama70b_fp8_weights_keep_embeddings_in_bf16() -> None:
    """DESIGN.md rounds FP8 weights to 70 GB (every parameter at one byte). vLLM's FP8 methods
    quantize the decoder's linear layers only; the 2 x 1.05B embedding/LM-head parameters stay
    BF16, so the planner holds 72.7 GB and the full estimate leaves ~51 GB for KV (~19x)."""
    p = plan(
        build_deployment(
            resolve_model("meta-llama/Llama-3.1-70B"), lookup_gpu("H200"), weights_dtype="fp8", max_model_len=8192
        )
    )
    assert p.stage.weights_bytes_per_gpu == pytest.approx(72.67e9, rel=1e-3)
    assert 18 < p.stage.kv.max_concurrency < 21


def test_b200_ridge_point() -> None:
    """4,500 TFLOP/s / 8 TB/s = 562.5 FLOP per byte; 2B FLOPs per FP8 weight byte -> B = 281.
    (The source prints 331 for this ratio; the formula gives 281.)"""
    assert ridge_batch(4500e12, 8e12, 1.0) == pytest.approx(281.25)


def test_32b_dense_200k_context_on_b200() -> None:
    """64 layers x 8 KV heads x 128 x 2 x 1 B (FP8 KV) = 131,072 B/token; 200K tokens -> 26.2 GB;
    160 GB of KV / 26.2 GB -> 6 full-context users; one decode step of those 6 reads
    32.8 GB of FP8 weights + 6 x 26.2 GB = 190 GB -> 24 ms at 8 TB/s -> ~42 tokens/s per user."""
    m = resolve_model("Qwen/Qwen3-32B")  # 64 layers, 64 query heads, 8 KV heads, head_dim 128
    fp8 = kv_dtype_named("fp8")
    assert kv_bytes_per_token(m, 1, fp8) == 131_072
    assert kv_bytes_for_context(m, 1, fp8, 200_000) == pytest.approx(26.2e9, rel=1e-3)
    layout = kv_layout(m, m.layers, tp=1, kv_dtype=fp8, block_size=None)
    cap = kv_capacity(layout, 160 * 10**9, max_model_len=200_000, max_num_batched_tokens=8192)
    assert int(cap.max_concurrency) == 6
    b200 = GpuSpec(
        id="B200-design",
        name="B200 (DESIGN.md figures)",
        vendor="nvidia",
        memory_gb=192,
        hbm_bandwidth_tb_s=8.0,
        bf16_dense_tflops=2250,
        fp8_dense_tflops=4500,
        interconnect="NVLink 5",
        interconnect_gb_s=900,
        host_link_gb_s=64,
    )
    # Qwen3-32B is trained to 40,960 tokens: 200K needs RoPE scaling, as vLLM requires (YaRN over
    # the 32,768 original positions, factor 6.25 -> 204,800 tokens)
    yarn = RopeScaling("yarn", 6.25, 32_768)
    dep = build_deployment(m, b200, weights_dtype="fp8", kv_cache_dtype="fp8", max_model_len=200_000, rope_scaling=yarn)
    cost = step_cost(dep, stage_weights_bytes=32 * 10**9)
    step = cost.step_time(decode_batch(6, 200_000, None), IDEAL)
    assert step.bottleneck == "memory"
    assert step.memory_s == pytest.approx((32e9 + 6 * 26.2144e9) / 8e12, rel=1e-6)  # 23.7 ms
    assert 1 / step.total_s == pytest.approx(42, abs=1)


@pytest.mark.parametrize(("rho", "factor"), [(0.5, 1), (0.8, 4), (0.95, 19), (0.99, 99)])
def test_mm1_mean_wait(rho: float, factor: float) -> None:
    assert mm1_wait_factor(rho) == pytest.approx(factor)
