"""The memory-bound work between a layer's GEMMs (core/activation_traffic.py) and the MoE expert
GEMMs' efficiency (core/roofline.py), hand-worked."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.activation_traffic import activation_bytes_per_token
from servecap.core.defaults import build_deployment
from servecap.core.roofline import BatchShape, step_cost
from servecap.specs.perf import Efficiency


def test_llama_8b_per_token_bytes() -> None:
    """h 4,096, q 4,096, kv 1,024, I 14,336: 8 x 4096 + 2 (4096 + 1024) + 4 x 1024 + 3 x 14336
    = 90,112 BF16 elements per layer, x 2 bytes x 32 layers = 5,767,168 bytes."""
    m = resolve_model("meta-llama/Llama-3.1-8B")
    assert activation_bytes_per_token(m, m.layers, 1) == 5_767_168


def test_tensor_parallel_splits_all_but_the_norms() -> None:
    """TP 2: 32,768 + 2 (2048 + 512) + 4 x 512 + 3 x 7168 = 61,440 elements, x 64 = 3,932,160."""
    m = resolve_model("meta-llama/Llama-3.1-8B")
    assert activation_bytes_per_token(m, m.layers, 2) == 3_932_160


def test_fused_engine_moves_the_norms_only() -> None:
    """TensorRT-LLM fuses rotary, the KV write and SiLU-and-mul: 8 x 4096 x 2 x 32 = 2,097,152."""
    m = resolve_model("meta-llama/Llama-3.1-8B")
    assert activation_bytes_per_token(m, m.layers, 1, fused=True) == 2_097_152


def test_moe_layer_counts_the_routed_experts_width() -> None:
    """Qwen3-30B-A3B (h 2,048, 32 heads and 4 KV heads of 128, 8 of 128 experts of width 768, 48
    layers): 16,384 + 2 (4096 + 512) + 4 x 512 + 3 x 8 x 768 = 46,080 elements, x 2 x 48 = 4,423,680."""
    m = resolve_model("Qwen/Qwen3-30B-A3B")
    assert activation_bytes_per_token(m, m.layers, 1) == 4_423_680


def test_prefill_pays_the_activation_time_after_its_gemms() -> None:
    """A 1,024-token Llama-3.1-8B prefill on an H100 is compute-bound; the activation kernels add
    1,024 x 5,767,168 bytes / (3.35e12 x 0.89) = 1.981 ms to max(memory, compute)."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    cost = step_cost(dep, stage_weights_bytes=8_030_261_248 * 2)
    st = cost.step_time(BatchShape(1024, 1, 0.0, 0.0, 524_800.0, 524_800.0, 1024), Efficiency())
    assert st.activation_s == pytest.approx(1024 * 5_767_168 / (3.35e12 * 0.89))
    assert st.activation_s == pytest.approx(1.981e-3, rel=1e-3)
    assert st.total_s == pytest.approx(max(st.memory_s, st.compute_s) + st.activation_s + 0.00113)


def test_moe_expert_flops_run_at_the_engines_ratio() -> None:
    """Qwen3-30B-A3B: each token runs 8 experts of 3 x 2,048 x 768 params in 48 layers, 2 x 48 x 8
    x 4,718,592 = 3,623,878,656 FLOPs; under vLLM they run at 0.473 of the dense efficiency, so
    a step's compute time grows by those FLOPs x (1 / 0.473 - 1) at the dense rate."""
    gpu = lookup_gpu("H100")
    dep = build_deployment(resolve_model("Qwen/Qwen3-30B-A3B"), gpu, max_model_len=8192)
    cost = step_cost(dep, stage_weights_bytes=61_000_000_000)
    assert cost.expert_flops_per_token == 2 * 48 * 8 * 3 * 2048 * 768
    assert cost.moe_gemm_efficiency_ratio == 0.473
    batch = BatchShape(4096, 1, 0.0, 0.0, 0.0, 0.0, 4096)
    eff = Efficiency(bandwidth_efficiency=1.0, compute_efficiency=1.0, step_overhead_s=0.0)
    plain = cost.step_time(batch, eff).compute_s
    cost.moe_gemm_efficiency_ratio = 1.0
    assert plain - cost.step_time(batch, eff).compute_s == pytest.approx(
        4096 * 3_623_878_656 * (1 / 0.473 - 1) / (gpu.dense_tflops("bf16") * 1e12)
    )
