"""Parallelism as part of a deployment: KV per attention-DP rank, weights per GPU under EP,
the all-to-all in the step, speculative decoding in the plan, and refused layouts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.memory import stage_layers, stage_weights
from servecap.core.params import layer_params_table
from servecap.core.plan import plan
from servecap.core.roofline import decode_batch
from servecap.core.spec_decode import spec_config_from_flags
from servecap.errors import ServecapError
from servecap.specs.perf import Efficiency, RequestShape

DSV3 = resolve_model("deepseek-v3")
H200 = lookup_gpu("h200")
REQ = RequestShape(1024, 128)


def _dep(**kw: object):  # type: ignore[no-untyped-def]
    base: dict[str, object] = {
        "weights_dtype": "fp8",
        "kv_cache_dtype": "fp8",
        "max_model_len": 8192,
        "kv_cache_memory_bytes": 10**10,
    }
    base.update(kw)
    return build_deployment(DSV3, H200, **base)  # type: ignore[arg-type]


def test_kv_per_rank_under_attention_dp_by_hand() -> None:
    """DeepSeek-V3 MLA, FP8 KV: one latent of (512 + 64) x 1 B per layer, 61 layers = 35,136 B a
    token on every GPU that holds the sequence (TP replicates the latent: no split). A 10 GB pool
    of 64-token blocks (2,248,704 B each) has 4,447 blocks; a 1,024 + 128-token request holds 18:
    247 requests. TP 8 keeps one pool for the replica (each GPU a copy): 247. Attention DP 8 keeps
    eight pools, one per rank: 8 x 247 = 1,976."""
    tp8 = plan(_dep(tp=8), request=REQ)
    dp8 = plan(_dep(tp=1, dp=8, ep=8), request=REQ)
    for p in (tp8, dp8):
        assert p.kv_bytes_per_token_per_gpu == 35_136
        assert p.layout.block_size == 64
        assert p.num_gpu_blocks == 4_447
    assert tp8.kv_batch_limit == 247
    assert dp8.kv_batch_limit == 1_976


def test_weights_per_gpu_split_experts_over_ep_and_replicate_attention() -> None:
    layers = stage_layers(DSV3, 1)[0]
    wd = _dep(tp=1).weights_dtype
    one = stage_weights(DSV3, layers, first=True, last=True, pp=1, tp=1, weights_dtype=wd)
    routed = sum(layer_params_table(DSV3)[layer].routed_experts for layer in layers) * wd.bytes_per_param
    ep8 = stage_weights(DSV3, layers, first=True, last=True, pp=1, tp=1, weights_dtype=wd, dp=8)
    assert ep8.weights_bytes_per_gpu == int(one.weights_bytes_per_gpu - routed + routed / 8)
    # EPLB's 32 redundant experts add 32/256 of the routed weights, over the same 8 GPUs
    red = stage_weights(DSV3, layers, first=True, last=True, pp=1, tp=1, weights_dtype=wd, dp=8, redundant_experts=32)
    assert red.weights_bytes_per_gpu == int(one.weights_bytes_per_gpu - routed + routed * 288 / 256 / 8)


def test_all_to_all_is_in_the_decode_step() -> None:
    eff = Efficiency()
    one_node = plan(_dep(tp=1, dp=8, ep=8), request=REQ).step
    wide = plan(_dep(tp=1, dp=32, ep=32, gpus_per_node=8), request=REQ).step
    assert one_node.a2a_s_per_token_low_latency > 0
    assert wide.a2a_s_per_token_low_latency > one_node.a2a_s_per_token_low_latency  # the NIC is slower
    batch = decode_batch(32 * 64, 1100.0, None)  # 64 sequences a rank
    with_a2a = wide.step_time(batch, eff)
    without = replace(wide, a2a_s_per_token_low_latency=0.0, a2a_s_per_token_normal=0.0, a2a_latency_s=0.0)
    gap = with_a2a.total_s - without.step_time(batch, eff).total_s
    # 58 MoE layers x (per-token dispatch + combine x 64 tokens a rank + 2 x 10 us)
    assert gap == pytest.approx(wide.a2a_s_per_token_low_latency * 64 + wide.a2a_latency_s, rel=1e-9)
    assert wide.a2a_latency_s == pytest.approx(58 * 2 * 10e-6)
    overlapped = replace(wide, two_batch_overlap=True).step_time(batch, eff)
    assert overlapped.total_s < with_a2a.total_s


def test_dp1_step_is_the_plain_roofline() -> None:
    eff = Efficiency()
    tp8 = plan(_dep(tp=8), request=REQ).step
    assert tp8.dp == 1 and tp8.a2a_latency_s == 0.0
    b = decode_batch(64, 1100.0, None)
    assert tp8.step_time(b, eff).total_s == tp8._step_time_target(b, eff).total_s


def test_speculative_decoding_in_the_plan() -> None:
    llama = resolve_model("meta-llama/Llama-3.1-8B")
    h100 = lookup_gpu("h100")
    base = build_deployment(llama, h100, max_model_len=4096)
    spec = spec_config_from_flags(llama, "eagle3", None, None, None)
    fast = replace(base, speculative=spec)
    p0, p1 = plan(base, request=REQ), plan(fast, request=REQ)
    assert p1.step.spec_k == 3
    assert p1.step.spec_tokens_per_step == pytest.approx(2.79, abs=1e-3)
    # batch 1: the step grows (3 draft passes, 4 verified tokens) far less than the tokens it gives
    speedup = p0.single_request_tpot_s / p1.single_request_tpot_s
    assert 1.4 < speedup < 2.79
    # the draft head's weights and KV take memory: fewer blocks
    assert p1.stage.weights_bytes_per_gpu > p0.stage.weights_bytes_per_gpu
    assert p1.num_gpu_blocks < p0.num_gpu_blocks


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"tp": 1, "dp": 8, "ep": 3}, "ep"),
        ({"tp": 1, "dp": 8, "ep": 16}, "ep"),
        ({"tp": 1, "dp": 6, "ep": 6}, "ep"),  # 6 does not divide 256 experts
        ({"tp": 1, "dp": 0}, "dp"),
        ({"tp": 1, "dp": -2}, "dp"),
        ({"tp": 1, "dp": 16, "ep": 16, "gpus_per_node": 0}, "gpus_per_node"),
        ({"tp": 1, "dp": 12, "ep": 4, "gpus_per_node": 8}, "gpus_per_node"),
        ({"tp": 8, "redundant_experts": 8}, "redundant_experts"),
        ({"tp": 1, "dp": 8, "ep": 8, "expert_skew": float("nan")}, "expert_skew"),
        ({"tp": 1, "dp": 8, "ep": 8, "expert_skew": 1e300}, "expert_skew"),
        ({"tp": 1, "dp": 8, "ep": 8, "expert_skew": -1e-300}, "expert_skew"),
        ({"tp": 1, "dp": 8, "ep": 8, "a2a_mode": "fast"}, "a2a_mode"),
    ],
)
def test_bad_layouts_name_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ServecapError) as err:
        _dep(**kw)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_dense_model_refuses_expert_parallelism() -> None:
    with pytest.raises(ServecapError) as err:
        build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), H200, ep=2, tp=2)
    assert err.value.field == "ep"


def test_across_nodes_needs_a_nic() -> None:
    with pytest.raises(ServecapError) as err:
        build_deployment(DSV3, lookup_gpu("b200"), tp=1, dp=16, ep=16, weights_dtype="fp8")
    assert err.value.field == "nodes"


def test_the_acceptance_spread_reaches_the_tpot() -> None:
    spec = spec_config_from_flags(DSV3, "mtp", None, None, None)
    p = plan(replace(_dep(tp=8), speculative=spec), request=REQ)
    line = next(w for w in p.warnings if w.startswith("speculative mtp: TPOT"))
    assert "0.85 to 0.9" in line
