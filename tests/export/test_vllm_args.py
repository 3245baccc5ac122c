"""A plan's engine settings as vLLM flags (the table in servecap.export.vllm_args)."""

from __future__ import annotations

from servecap.export.source import PoolExport
from servecap.export.vllm_args import cli_args, engine_kwargs

PLAN = {
    "model": "meta-llama/Llama-3.1-70B",
    "gpu": "H100-SXM",
    "tp": 4,
    "pp": 2,
    "weights_dtype": "fp8",
    "kv_cache_dtype": "fp8",
    "max_model_len": 16384,
    "gpu_memory_utilization": 0.92,
    "max_num_seqs": 256,
    "max_num_batched_tokens": 8192,
    "block_size": 32,
    "batch_size": 200,
}


def test_every_plan_setting_becomes_a_flag() -> None:
    warnings: list[str] = []
    pool = PoolExport(name="p", plan=PLAN, enable_prefix_caching=False, kv_cache_memory_bytes=40_000_000_000)
    assert cli_args(engine_kwargs(pool, warnings)) == [
        "--model", "meta-llama/Llama-3.1-70B",
        "--tensor-parallel-size", "4",
        "--pipeline-parallel-size", "2",
        "--max-model-len", "16384",
        "--gpu-memory-utilization", "0.92",
        "--max-num-seqs", "256",
        "--max-num-batched-tokens", "8192",
        "--kv-cache-dtype", "fp8",
        "--quantization", "fp8",
        "--block-size", "32",
        "--no-enable-prefix-caching",
        "--kv-cache-memory-bytes", "40000000000",
    ]  # fmt: skip
    assert warnings == []
    assert pool.gpus_per_replica == 8


def test_sixteen_bit_defaults_and_what_has_no_flag() -> None:
    warnings: list[str] = []
    plan = {**PLAN, "pp": 1, "weights_dtype": "int4", "kv_cache_dtype": "bf16", "block_size": 16, "model": "./cfg.json"}
    kw = engine_kwargs(PoolExport(name="p", plan=plan, max_waiting=64), warnings)
    assert kw["kv_cache_dtype"] == "auto"
    assert "quantization" not in kw and "block_size" not in kw and "pipeline_parallel_size" not in kw
    assert kw["enable_prefix_caching"] is True
    assert len(warnings) == 3
    assert any("int4" in w and "pre-quantized" in w for w in warnings)
    assert any("local config" in w for w in warnings)
    assert any("max_waiting 64" in w for w in warnings)
