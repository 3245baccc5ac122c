"""KV bytes per token, worked by hand from each config.json (shared/reference/vllm-kv-arithmetic.md 1.6).

full attention: 2 (K,V) x kv_heads_per_rank x head_dim x bytes x layers
MLA: (kv_lora_rank + qk_rope_head_dim) x bytes x layers, not divided by TP
"""

from __future__ import annotations

import pytest

from servecap.catalog.models import load_catalog_model
from servecap.core.blocks import kv_layout
from servecap.core.kv import (
    kv_bytes_for_context,
    kv_bytes_per_token,
    kv_heads_per_rank,
    sliding_bytes_per_token,
    state_bytes_per_layer,
    state_bytes_per_request,
)
from servecap.specs.dtypes import kv_dtype_named

BF16 = kv_dtype_named("bf16")
FP8 = kv_dtype_named("fp8")


@pytest.mark.parametrize(
    ("model", "tp", "expected"),
    [
        ("meta-llama/Llama-3.1-8B", 1, 32 * 8 * 128 * 2 * 2),  # 131,072
        ("meta-llama/Llama-3.1-70B", 1, 80 * 8 * 128 * 2 * 2),  # 327,680
        ("meta-llama/Llama-3.1-70B", 4, 80 * 2 * 128 * 2 * 2),  # 81,920
        ("meta-llama/Llama-3.1-70B", 8, 80 * 1 * 128 * 2 * 2),  # 40,960
        ("meta-llama/Llama-3.1-405B", 1, 126 * 8 * 128 * 2 * 2),  # 516,096
        ("meta-llama/Llama-3.1-405B", 8, 126 * 1 * 128 * 2 * 2),  # 64,512
        ("Qwen/Qwen3-32B", 1, 64 * 8 * 128 * 2 * 2),  # 262,144
        ("Qwen/Qwen3-235B-A22B", 1, 94 * 4 * 128 * 2 * 2),  # 192,512
        ("Qwen/Qwen3-235B-A22B", 4, 94 * 1 * 128 * 2 * 2),  # 48,128
        ("Qwen/Qwen3-235B-A22B", 8, 94 * 1 * 128 * 2 * 2),  # 48,128: 4 KV heads replicated at TP8
        ("Qwen/Qwen2.5-7B", 1, 28 * 4 * 128 * 2 * 2),  # 57,344
        ("mistralai/Mixtral-8x7B-v0.1", 1, 32 * 8 * 128 * 2 * 2),  # 131,072 (sliding_window null)
        ("deepseek-ai/DeepSeek-V3", 1, 61 * 576 * 2),  # 70,272
        ("deepseek-ai/DeepSeek-V3", 8, 61 * 576 * 2),  # MLA latent is replicated on every rank
    ],
)
def test_full_attention_bytes_per_token(model: str, tp: int, expected: int) -> None:
    spec = load_catalog_model(model)
    assert kv_bytes_per_token(spec, tp, BF16) + sliding_bytes_per_token(spec, tp, BF16) == expected


def test_deepseek_fp8_kv_halves() -> None:
    assert kv_bytes_per_token(load_catalog_model("deepseek-ai/DeepSeek-V3"), 1, FP8) == 61 * 576  # 35,136


def test_kv_heads_replicate_beyond_tp() -> None:
    assert kv_heads_per_rank(8, 16) == 1
    assert kv_heads_per_rank(4, 8) == 1
    assert kv_heads_per_rank(8, 2) == 4


@pytest.mark.parametrize(
    ("model", "full", "sliding"),
    [
        # Gemma-3-27B: 10 global + 52 local layers, 16 KV heads x 128
        ("google/gemma-3-27b-it", 10 * 16 * 128 * 2 * 2, 52 * 16 * 128 * 2 * 2),  # 81,920 / 425,984
        # gpt-oss-120b: 18 full + 18 sliding (window 128), 8 KV heads x 64
        ("openai/gpt-oss-120b", 18 * 8 * 64 * 2 * 2, 18 * 8 * 64 * 2 * 2),  # 36,864 each
        # Mistral-7B-v0.1 and Phi-3-mini: every layer slides
        ("mistralai/Mistral-7B-v0.1", 0, 32 * 8 * 128 * 2 * 2),
        ("microsoft/Phi-3-mini-4k-instruct", 0, 32 * 32 * 96 * 2 * 2),  # 393,216, no GQA
    ],
)
def test_sliding_window_models(model: str, full: int, sliding: int) -> None:
    spec = load_catalog_model(model)
    assert kv_bytes_per_token(spec, 1, BF16) == full
    assert sliding_bytes_per_token(spec, 1, BF16) == sliding


def test_sliding_layers_cap_at_window() -> None:
    spec = load_catalog_model("openai/gpt-oss-120b")
    # 100,000 tokens: full layers hold all, sliding layers only the last 128
    assert kv_bytes_for_context(spec, 1, BF16, 100_000) == 36_864 * 100_000 + 36_864 * 128


def test_gated_deltanet_state_qwen3_next() -> None:
    """conv_dim = 2x16x128 + 32x128 = 8,192; conv 8,192 x 3 x 2 B = 49,152;
    temporal 32 x 128 x 128 x 2 B = 1,048,576; per layer 1,097,728; x 36 layers = 39,518,208."""
    spec = load_catalog_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert spec.state is not None
    assert state_bytes_per_layer(spec.state, spec.torch_dtype, 1) == 1_097_728
    assert state_bytes_per_request(spec, 1) == 39_518_208
    assert kv_bytes_per_token(spec, 1, BF16) == 12 * 2 * 256 * 2 * 2  # 24,576
    layout = kv_layout(spec, spec.layers, tp=1, kv_dtype=BF16, block_size=None)
    # 16 x cdiv(1,097,728, 16 x 2,048) = 16 x 34 = 544 tokens; 4 groups of 12 layers
    assert layout.block_size == 544
    assert layout.group_size == 12 and len(layout.groups) == 4
    assert layout.page_bytes == 544 * 2048
    assert layout.state_padding_fraction == pytest.approx(1_114_112 / 1_097_728 - 1)  # 1.49%


def test_gated_deltanet_state_qwen35_fp32() -> None:
    """conv (2x16x128 + 48x128) x 3 x 2 B = 61,440; temporal 48 x 128 x 128 x 4 B (fp32) =
    3,145,728; per layer 3,207,168; x 48 = 153,944,064; block 16 x cdiv(3,207,168, 65,536) = 784."""
    spec = load_catalog_model("Qwen/Qwen3.5-27B")
    assert spec.state is not None and spec.state.ssm_dtype == "fp32"
    assert state_bytes_per_request(spec, 1) == 153_944_064
    assert kv_bytes_per_token(spec, 1, BF16) == 16 * 4 * 256 * 2 * 2  # 65,536
    layout = kv_layout(spec, spec.layers, tp=1, kv_dtype=BF16, block_size=None)
    assert layout.block_size == 784
    assert len(layout.groups) == 4 and layout.group_size == 16


def test_gemma3_groups_v011() -> None:
    """52 sliding + 10 full layers -> group_size 10: 1 full group + 6 sliding groups."""
    spec = load_catalog_model("google/gemma-3-27b-it")
    layout = kv_layout(spec, spec.layers, tp=1, kv_dtype=BF16, block_size=None)
    assert layout.group_size == 10
    kinds = sorted(g.kind.value for g in layout.groups)
    assert kinds == ["full"] + ["sliding"] * 6
