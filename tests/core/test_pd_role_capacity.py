"""A P/D replica's service rate in its role (the fleet table's "of ~capacity"), worked by hand."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.capacity import decode_only_req_s, prefill_only_req_s, ttft_s
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.core.roofline import BatchShape
from servecap.specs.perf import Efficiency, RequestShape

IDEAL = Efficiency(bandwidth_efficiency=1.0, compute_efficiency=1.0, step_overhead_s=0.0, request_overhead_s=0.0)


def test_prefill_replica_packs_whole_prompts_into_the_token_budget() -> None:
    """8B on an H100, 8 prompts of 1,024 tokens in a budget of 8,192: compute-bound. The layers'
    2 x 6.98e9 params (8.03e9 less the embedding and the LM head, 525M each) x 8,192 tokens, the LM
    head 2 x 525M x 8 (last token of each prompt), attention 4 x 32 layers x 128 x 32 heads x
    8 x 1,024 x 1,025 / 2 pairs: 1.1655e14 FLOPs over 989 TFLOP/s = 117.8 ms per step, so
    0.1178 s of compute; plus the step's activation traffic (core/activation_traffic.py), so
    8 / (0.1178 + activation) = 60.6 prompts/s, not 67.9."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    p = plan(dep)
    head = 525_336_576
    pairs = 8 * 1024 * 1025 / 2
    flops = 2 * (8_030_261_248 - 2 * head) * 8192 + 2 * head * 8 + 4 * 32 * 128 * 32 * pairs
    step = p.step.step_time(BatchShape(8192, 8, 0.0, 0.0, pairs, pairs, 8192), IDEAL)
    assert step.bottleneck == "compute"
    assert step.compute_s == pytest.approx(flops / 989e12, rel=1e-3)
    rate = prefill_only_req_s(p.step, 1024, IDEAL, 8192)
    assert rate == pytest.approx(8 / step.total_s)
    assert step.total_s == pytest.approx(step.compute_s + step.activation_s)
    assert rate == pytest.approx(60.6, rel=0.01)


def test_a_prompt_over_the_budget_runs_in_the_same_chunks_as_ttft() -> None:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=32768)
    p = plan(dep)
    shape = RequestShape(prompt_tokens=20_000, output_tokens=128)
    lone = ttft_s(p.step, 0, shape, IDEAL, 8192)
    assert prefill_only_req_s(p.step, 20_000, IDEAL, 8192) == pytest.approx(1 / lone)


def test_decode_replica_rate() -> None:
    """64 sequences, a 20 ms pure decode step, 128 output tokens: 64 / 0.02 / 128 = 25 req/s;
    speculative decoding at 2.5 tokens per step: 62.5 req/s."""
    assert decode_only_req_s(64, 0.02, 128, 1.0) == pytest.approx(25.0)
    assert decode_only_req_s(64, 0.02, 128, 2.5) == pytest.approx(62.5)
    assert decode_only_req_s(64, 0.0, 128, 1.0) == 0.0
