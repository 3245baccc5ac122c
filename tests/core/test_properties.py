"""Property tests: monotonicity the capacity arithmetic must obey for any catalog model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.catalog import lookup_gpu
from servecap.catalog.models import load_catalog_model, model_catalog
from servecap.core.blocks import kv_capacity, kv_layout
from servecap.core.defaults import build_deployment
from servecap.core.roofline import decode_batch, step_cost
from servecap.specs.dtypes import kv_dtype_named
from servecap.specs.perf import Efficiency

MODELS = [r.id for r in model_catalog()]
BF16 = kv_dtype_named("bf16")


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    mem=st.integers(1 << 30, 200 << 30),
    extra=st.integers(0, 50 << 30),
    length=st.integers(1, 131072),
    tp=st.sampled_from([1, 2, 4, 8]),
)
def test_more_memory_never_lowers_capacity(model: str, mem: int, extra: int, length: int, tp: int) -> None:
    spec = load_catalog_model(model)
    layout = kv_layout(spec, spec.layers, tp=tp, kv_dtype=BF16, block_size=None)
    a = kv_capacity(layout, mem, max_model_len=length, max_num_batched_tokens=2048)
    b = kv_capacity(layout, mem + extra, max_model_len=length, max_num_batched_tokens=2048)
    assert b.num_blocks >= a.num_blocks
    assert b.max_concurrency >= a.max_concurrency


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    mem=st.integers(1 << 30, 200 << 30),
    length=st.integers(1, 65536),
    more=st.integers(0, 65536),
)
def test_longer_context_never_raises_concurrency(model: str, mem: int, length: int, more: int) -> None:
    spec = load_catalog_model(model)
    layout = kv_layout(spec, spec.layers, tp=1, kv_dtype=BF16, block_size=None)
    a = kv_capacity(layout, mem, max_model_len=length, max_num_batched_tokens=2048)
    b = kv_capacity(layout, mem, max_model_len=length + more, max_num_batched_tokens=2048)
    assert b.max_concurrency <= a.max_concurrency


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), batch=st.integers(1, 512), more=st.integers(0, 512), ctx=st.integers(1, 32768))
def test_bigger_batches_never_step_faster(model: str, batch: int, more: int, ctx: int) -> None:
    spec = load_catalog_model(model)
    # the engine's context within the trained one (vLLM refuses longer); the step reads ctx tokens
    dep = build_deployment(spec, lookup_gpu("B200"), tp=1, max_model_len=min(max(ctx, 2), spec.max_position_embeddings))
    cost = step_cost(dep, stage_weights_bytes=10**9)
    eff = Efficiency()
    a = cost.step_time(decode_batch(batch, ctx, cost.window_tokens), eff).total_s
    b = cost.step_time(decode_batch(batch + more, ctx, cost.window_tokens), eff).total_s
    assert b >= a > 0
