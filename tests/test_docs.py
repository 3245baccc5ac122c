"""The numbers in docs/formulas.md come from the code: recompute each and find it in the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.capacity import ridge_batch
from servecap.core.defaults import build_deployment
from servecap.core.kv import kv_bytes_for_context, kv_bytes_per_token, state_bytes_per_layer, state_bytes_per_request
from servecap.core.params import param_counts
from servecap.core.plan import plan
from servecap.specs.dtypes import kv_dtype_named

DOC = (Path(__file__).parents[1] / "docs" / "formulas.md").read_text()
JSON_DOC = (Path(__file__).parents[1] / "docs" / "json-schema.md").read_text()
BF16 = kv_dtype_named("bf16")


def _in_doc(text: str) -> None:
    assert text in DOC, f"docs/formulas.md should say {text!r}"


def test_param_and_kv_examples() -> None:
    _in_doc(f"{param_counts(resolve_model('meta-llama/Llama-3.1-8B')).total:,} parameters")
    m70 = resolve_model("meta-llama/Llama-3.1-70B")
    _in_doc(f"{kv_bytes_per_token(m70, 1, BF16):,} bytes per token")
    _in_doc(f"holds {kv_bytes_for_context(m70, 1, BF16, 8192):,} bytes")
    _in_doc(f"{kv_bytes_per_token(resolve_model('deepseek-ai/DeepSeek-V3'), 8, BF16):,} bytes per token at any TP")
    nxt = resolve_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert nxt.state is not None
    _in_doc(f"{state_bytes_per_layer(nxt.state, 'bf16', 1):,} bytes")
    _in_doc(f"{state_bytes_per_request(nxt, 1):,} per request")


def test_budget_examples() -> None:
    m70, h200 = resolve_model("meta-llama/Llama-3.1-70B"), lookup_gpu("H200")
    for kv in ("bf16", "fp8"):
        p = plan(
            build_deployment(
                m70, h200, weights_dtype="fp8", kv_cache_dtype=kv, max_model_len=8192, kv_cache_memory_bytes=57 * 10**9
            )
        )
        _in_doc(f"{p.stage.kv.max_concurrency:.2f}x")
    p = plan(build_deployment(m70, h200, weights_dtype="fp8", max_model_len=8192))
    b = p.stage.budget
    _in_doc(f"{b.weights_bytes / 1e9:.2f} GB FP8 weights")
    _in_doc(f"{b.activation_bytes / 1e9:.2f} GB activations")
    _in_doc(f"{b.non_torch_bytes / 1e9:.2f} GB runtime")
    _in_doc(f"the budget is {b.kv_budget_bytes / 1e9:.2f} GB: {p.stage.kv.num_blocks:,} blocks")
    _in_doc(f"{p.stage.kv.kv_cache_tokens:,} tokens, {p.stage.kv.max_concurrency:.2f}x")
    _in_doc(f"serves a batch of {p.batch},")
    _in_doc(f"{p.users_served} users at a 20% duty cycle, ${p.cost.usd_per_user_month:.2f} per user-month")
    _in_doc(f"at ${h200.rent_usd_per_hour:.2f} per GPU-hour")


def test_ridge_example() -> None:
    _in_doc(f"B = {int(ridge_batch(4500e12, 8e12, 1.0))} with FP8 weights")


@pytest.mark.parametrize(
    "key",
    [
        "params_total",
        "params_active",
        "weights_bytes_per_gpu",
        "kv_bytes_per_token_per_gpu",
        "kv_budget_bytes_per_gpu",
        "num_gpu_blocks",
        "block_size",
        "kv_cache_tokens",
        "max_concurrency",
        "decode_step_time_s",
        "tpot_s",
        "ttft_s",
        "output_tokens_per_s_per_user",
        "output_tokens_per_s_total",
        "users_served",
        "usd_per_user_month",
        "usd_per_million_tokens",
        "bottleneck",
    ],
)
def test_json_schema_documents_every_required_key(key: str) -> None:
    assert f"`{key}`" in JSON_DOC


def test_json_schema_documents_every_emitted_key() -> None:
    from servecap.core.plan_dict import plan_to_dict

    data = plan_to_dict(
        plan(build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192))
    )
    for key in data:
        assert f"`{key}`" in JSON_DOC, f"docs/json-schema.md does not document {key}"
