"""Edges of the KV arithmetic that the golden tests did not pin (found by benchmarks/mutation.py):
state bytes per dtype, layers that keep no KV, the sliding window's reservation, the layer groups'
sizes, vLLM's two "GPU KV cache size" figures, and the one-request error's numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servecap.catalog.models import load_catalog_model
from servecap.core.blocks import KvGroup, KvLayout, kv_capacity, kv_layout, require_one_request
from servecap.core.kv import attention_bytes_per_token_per_layer, state_bytes_per_layer
from servecap.errors import InfeasibleError, ServecapError
from servecap.specs.dtypes import kv_dtype_named
from servecap.specs.model import AttentionKind

BF16 = kv_dtype_named("bf16")


def test_state_bytes_follow_the_model_dtype() -> None:
    # Qwen3-Next's Gated DeltaNet state: 8,192 conv channels x 3 + 32 x 128 x 128 elements
    # = 24,576 + 524,288 = 548,864 elements per layer
    state = load_catalog_model("Qwen/Qwen3-Next-80B-A3B-Instruct").state
    assert state is not None and state.ssm_dtype is None
    assert {d: state_bytes_per_layer(state, d, 1) for d in ("bf16", "fp16", "fp32", "fp8")} == {
        "bf16": 548_864 * 2,
        "fp16": 548_864 * 2,
        "fp32": 548_864 * 4,
        "fp8": 548_864,
    }
    # tensor parallel splits the conv channels and the heads (vLLM's MambaSpec): exact integers
    at_tp2 = state_bytes_per_layer(state, "bf16", 2)
    assert type(at_tp2) is int and at_tp2 == 548_864


@pytest.mark.parametrize("kind", [AttentionKind.LINEAR, AttentionKind.MAMBA, AttentionKind.NONE])
def test_layers_without_kv_add_no_bytes_per_token(kind: AttentionKind) -> None:
    spec = load_catalog_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert attention_bytes_per_token_per_layer(spec, kind, 1, BF16) == 0


def test_sliding_window_reservation_is_vllms() -> None:
    """vLLM ``SlidingWindowSpec.max_memory_usage_bytes``: ``min(window - 1 + max_num_batched_tokens,
    max_model_len)`` tokens, in blocks, plus one block."""
    g = KvGroup(AttentionKind.SLIDING, 4096, 10)
    assert g.pages_reserved(32_768, 16, 2048) == 384 + 1  # cdiv(4,095 + 2,048, 16) + 1
    assert g.pages_reserved(5000, 16, 2048) == 313 + 1  # capped by max_model_len: cdiv(5,000, 16) + 1


def test_groups_cover_every_layer_once() -> None:
    """Gemma 3 27B: 52 sliding + 10 full layers, groups of 10 (the last sliding group has 2)."""
    spec = load_catalog_model("google/gemma-3-27b-it")
    layout = kv_layout(spec, spec.layers, tp=1, kv_dtype=BF16, block_size=None)
    assert sum(g.num_layers for g in layout.groups) == 62
    assert sorted(g.num_layers for g in layout.groups) == [2, 10, 10, 10, 10, 10, 10]
    assert layout.state_page_bytes == 0  # no recurrent state


def test_attention_layers_of_two_page_sizes_are_refused() -> None:
    """vLLM v0.11 groups layers only when their KV pages are the same size: latent (MLA) layers
    beside full-attention ones are refused with one error, not laid out wrong."""
    mla = load_catalog_model("deepseek-ai/DeepSeek-V3")
    gqa = load_catalog_model("meta-llama/Llama-3.1-8B")
    assert mla.mla is not None and gqa.attention is not None
    layers = (replace(mla.layers[0], mixer=AttentionKind.MLA), replace(mla.layers[0], mixer=AttentionKind.FULL))
    mixed = replace(mla, attention=gqa.attention, layers=layers)
    with pytest.raises(ServecapError, match="different KV page sizes"):
        kv_layout(mixed, mixed.layers, tp=1, kv_dtype=BF16, block_size=None)


def test_the_two_kv_cache_size_figures_agree_for_one_group() -> None:
    """One full-attention group and max_model_len a multiple of the block: v0.11's figure
    (``num_blocks x block_size``) and v0.24's (``max_concurrency x max_model_len``) are equal."""
    layout = KvLayout(16, 16 * 131_072, 1, (KvGroup(AttentionKind.FULL, None, 32),))
    cap = kv_capacity(layout, 10_000 * 16 * 131_072, max_model_len=8192, max_num_batched_tokens=2048)
    assert cap.num_blocks == 10_000 and cap.blocks_per_request == 512
    assert cap.kv_cache_tokens == cap.kv_cache_tokens_at_max_len == 160_000


def test_one_request_that_does_not_fit_names_its_numbers() -> None:
    layout = KvLayout(16, 16 * 131_072, 1, (KvGroup(AttentionKind.FULL, None, 32),))
    cap = kv_capacity(layout, 100 * 16 * 131_072, max_model_len=8192, max_num_batched_tokens=2048)
    with pytest.raises(InfeasibleError) as err:
        require_one_request(cap, 8192)
    # 512 blocks x 2,097,152 bytes = 1.07 GB needed; 100 blocks = 0.21 GB in the pool
    assert "one request needs 512 KV blocks (1.07 GB) but the pool has 100 (0.21 GB)" in str(err.value)
