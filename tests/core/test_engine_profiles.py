"""Engine profiles in the planner: each engine's KV budget and defaults, by hand."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.memory import memory_budget
from servecap.core.plan import plan
from servecap.errors import ServecapError
from servecap.specs.engines import default_memory_fraction, engine_profile

GB = 10**9


@pytest.mark.parametrize(
    ("base", "kv_gb"),
    [
        ("total", 90 - 40 - 5 - 5),  # vLLM: 0.9 x 100 - weights - activation - runtime
        ("free_after_weights", 45),  # TensorRT-LLM: 0.9 x (100 - 40 - 5 - 5)
        ("static", 90 - 40 - 5),  # SGLang: 0.9 x 100 for weights and KV; activations outside
    ],
)
def test_kv_budget_by_memory_base(base: str, kv_gb: int) -> None:
    b = memory_budget(
        total_gpu_memory_bytes=100 * GB,
        gpu_memory_utilization=0.9,
        weights_bytes=40 * GB,
        activation_bytes=5 * GB,
        non_torch_bytes=5 * GB,
        memory_base=base,
    )
    assert b.kv_budget_bytes == kv_gb * GB
    assert b.requested_bytes - b.non_kv_bytes == b.kv_budget_bytes
    with pytest.raises(ServecapError, match="memory_base"):
        memory_budget(
            total_gpu_memory_bytes=1,
            gpu_memory_utilization=0.9,
            weights_bytes=0,
            activation_bytes=0,
            non_torch_bytes=0,
            memory_base="half",
        )


def test_profile_defaults_resolve_into_the_deployment() -> None:
    model, gpu = resolve_model("meta-llama/Llama-3.1-70B"), lookup_gpu("H200")
    trt = build_deployment(model, gpu, weights_dtype="fp8", kv_cache_dtype="fp8", engine="trtllm").engine
    assert (trt.engine, trt.block_size, trt.max_num_seqs, trt.max_num_batched_tokens) == ("trtllm", 32, 2048, 8192)
    assert trt.gpu_memory_utilization == 0.9
    sgl = build_deployment(model, gpu, weights_dtype="fp8", tp=2, engine="sglang").engine
    assert (sgl.block_size, sgl.gpu_memory_utilization) == (1, 0.87)  # mem_fraction_static at tp 2
    assert default_memory_fraction(engine_profile("sglang"), 8) == 0.81
    vllm = build_deployment(model, gpu, weights_dtype="fp8").engine
    assert (vllm.engine, vllm.block_size, vllm.gpu_memory_utilization) == ("vllm", None, 0.9)
    with pytest.raises(ServecapError, match="block_size"):
        build_deployment(model, gpu, block_size=48)  # vLLM's block sizes only for vLLM
    assert build_deployment(model, gpu, block_size=48, engine="sglang").engine.block_size == 48


def test_llama70b_fp8_h200_trtllm_holds_more_kv_than_vllm() -> None:
    """The issue's example: TensorRT-LLM's 0.9 is of the memory left after the weights, vLLM's of
    the whole GPU, so the same 70 GB of FP8 weights leave TensorRT-LLM the larger KV cache."""
    model, gpu = resolve_model("meta-llama/Llama-3.1-70B"), lookup_gpu("H200")
    plans = {
        e: plan(build_deployment(model, gpu, weights_dtype="fp8", kv_cache_dtype="fp8", engine=e))
        for e in ("vllm", "trtllm")
    }
    v, t = plans["vllm"].stage.budget, plans["trtllm"].stage.budget
    assert v.kv_budget_bytes == int(gpu.total_memory_bytes * 0.9) - v.non_kv_bytes
    free = gpu.total_memory_bytes - t.weights_bytes - t.activation_bytes - t.non_torch_bytes
    assert t.kv_budget_bytes == int(free * 0.9)
    assert t.kv_budget_bytes > v.kv_budget_bytes
    assert plans["trtllm"].kv_batch_limit > plans["vllm"].kv_batch_limit
