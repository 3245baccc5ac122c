"""The KV transfer arithmetic, pinned by hand-worked numbers (servecap.core.kv_transfer)."""

from __future__ import annotations

import pytest

from servecap.catalog import resolve_model
from servecap.core.kv import kv_bytes_for_context
from servecap.core.kv_transfer import (
    exposed_bytes,
    kv_footprint,
    link_kind,
    occupancy_s,
    transfer_shape,
)
from servecap.errors import ServecapError
from servecap.specs.dtypes import kv_dtype_named


def test_llama_8b_4096_tokens_over_infiniband() -> None:
    # Llama-3.1-8B: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token;
    # 4,096 tokens -> 536,870,912 bytes; one 50 GB/s NIC: 10.737 ms + 0.1 ms overhead
    model = resolve_model("meta-llama/Llama-3.1-8B")
    fp = kv_footprint(model, 1, kv_dtype_named("bf16"), 3.35e12)
    assert fp.bytes_per_token_per_gpu == 131_072
    assert fp.bytes_per_gpu(4096) == 536_870_912 == kv_bytes_for_context(model, 1, kv_dtype_named("bf16"), 4096)
    ib = link_kind("infiniband")
    shape = transfer_shape(fp.bytes_per_gpu(4096), 1, 1, fp.bytes_per_gpu(4096), 3.35e12)
    assert (shape.bytes, shape.channels, shape.pieces, shape.relayout_s) == (536_870_912, 1, 1, 0.0)
    assert occupancy_s(shape.bytes, shape, ib.bandwidth_bytes_s, ib.overhead_s) == pytest.approx(
        0.0001 + 536_870_912 / 50e9
    )
    assert pytest.approx(0.010737, rel=1e-4) == 536_870_912 / 50e9
    # TCP at 25 Gb/s: 171.8 ms for the same prompt
    tcp = link_kind("tcp")
    assert occupancy_s(shape.bytes, shape, tcp.bandwidth_bytes_s, 0.0) == pytest.approx(0.17180, rel=1e-4)


def test_tp_shards_travel_in_parallel_and_a_mismatch_costs_pieces_and_relayout() -> None:
    # Llama-3.1-70B (80 layers, 8 KV heads, head_dim 128), BF16: 327,680 bytes/token in all;
    # at TP 2 each GPU holds 163,840 per token. Prefill TP 2 -> decode TP 4: 2 channels,
    # ceil(4/2) = 2 pieces each; decode GPUs hold 81,920/token; 1,000 tokens re-laid out at
    # 3.35 TB/s: 2 x 81.92 MB / 3.35e12 = 48.9 us.
    model = resolve_model("meta-llama/Llama-3.1-70B")
    bf16 = kv_dtype_named("bf16")
    p = kv_footprint(model, 2, bf16, 3.35e12)
    d = kv_footprint(model, 4, bf16, 3.35e12)
    assert p.bytes_per_token_per_gpu == 163_840 and d.bytes_per_token_per_gpu == 81_920
    shape = transfer_shape(p.bytes_per_gpu(1000), 2, 4, d.bytes_per_gpu(1000), 3.35e12)
    assert shape.bytes == 327_680_000
    assert (shape.channels, shape.pieces) == (2, 2)
    assert shape.relayout_s == pytest.approx(2 * 81_920_000 / 3.35e12)
    # 327.68 MB over two 50 GB/s NICs: 3.2768 ms, plus 2 x 100 us of overheads
    assert occupancy_s(shape.bytes, shape, 50e9, 100e-6) == pytest.approx(0.0002 + 0.0032768)
    shared = transfer_shape(p.bytes_per_gpu(1000), 2, 4, d.bytes_per_gpu(1000), 3.35e12, shared=True)
    assert shared.channels == 1


def test_replicated_kv_heads_are_sent_by_every_rank() -> None:
    # 8 KV heads over TP 16: one head per rank (replicated), so 16 x 1/8 of the model's KV
    model = resolve_model("meta-llama/Llama-3.1-8B")
    fp = kv_footprint(model, 16, kv_dtype_named("bf16"), 3.35e12)
    assert fp.bytes_per_token_per_gpu == 131_072 // 8
    assert transfer_shape(fp.bytes_per_gpu(10), 16, 16, 0.0, 1.0).bytes == 2 * 131_072 * 10


def test_layerwise_streaming_leaves_the_last_layer_or_what_the_prefill_did_not_cover() -> None:
    # 32 layers, 320 MB: a 10 ms prefill at 50 GB/s covers 500 MB -> only the last layer (10 MB)
    assert exposed_bytes(320e6, 32, 50e9, 0.010) == pytest.approx(10e6)
    # a 2 ms prefill covers 100 MB -> 220 MB remain
    assert exposed_bytes(320e6, 32, 50e9, 0.002) == pytest.approx(220e6)


def test_bad_link_values_are_one_line_errors() -> None:
    with pytest.raises(ServecapError, match="infiniband"):
        link_kind("infiniban")
    with pytest.raises(ServecapError, match="bandwidth"):
        occupancy_s(1.0, transfer_shape(1.0, 1, 1, 1.0, 1.0), 0.0, 0.0)
