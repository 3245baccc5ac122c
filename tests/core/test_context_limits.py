"""Contexts beyond the trained length, vLLM's block sizes, requests beyond the context, and the
KV-pool error's levers: refused as vLLM refuses them, with the way out in the message."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.capacity import chat_prompt_tokens, closed_loop_users
from servecap.core.defaults import VLLM_BLOCK_SIZES, build_deployment
from servecap.core.plan import plan
from servecap.errors import InfeasibleError, ServecapError
from servecap.specs.deployment import RopeScaling
from servecap.specs.perf import RequestShape

QWEN32 = "Qwen/Qwen3-32B"  # config.json: max_position_embeddings 40,960


def test_context_beyond_trained_length_is_refused_with_the_way_out() -> None:
    with pytest.raises(ServecapError, match="trained context of 40,960 tokens") as err:
        build_deployment(resolve_model(QWEN32), lookup_gpu("B200"), max_model_len=200_000, kv_cache_dtype="fp8")
    assert "--rope-scaling" in str(err.value)


def test_rope_scaling_accepts_the_longer_context_and_warns() -> None:
    yarn = RopeScaling("yarn", 4.0, 32_768)
    assert yarn.max_len(40_960) == 131_072  # vLLM: original_max_position_embeddings x factor
    dep = build_deployment(
        resolve_model(QWEN32), lookup_gpu("B200"), max_model_len=131_072, kv_cache_dtype="fp8", rope_scaling=yarn
    )
    p = plan(dep)
    assert any("beyond the 40,960 tokens the model was trained on" in w for w in p.warnings)
    with pytest.raises(ServecapError, match="exceeds 131,072 tokens"):
        build_deployment(resolve_model(QWEN32), lookup_gpu("B200"), max_model_len=131_073, rope_scaling=yarn)


@pytest.mark.parametrize("size", [0, 7, 24, 512])
def test_block_sizes_vllm_refuses(size: int) -> None:
    with pytest.raises(ServecapError, match=f"block_size={size}"):
        build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), block_size=size)


def test_block_sizes_vllm_accepts() -> None:
    assert VLLM_BLOCK_SIZES == (1, 8, 16, 32, 64, 128, 256)  # vllm/config/cache.py BlockSize
    dep = build_deployment(
        resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), block_size=32, max_model_len=8192
    )
    assert plan(dep).layout.block_size == 32


def test_request_beyond_the_context_is_an_error() -> None:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=1024)
    with pytest.raises(InfeasibleError, match="needs 1,152 tokens, beyond max_model_len 1,024"):
        plan(dep, request=RequestShape(1024, 128))


def test_kv_pool_error_proposes_levers_that_work() -> None:
    m, g = resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100")
    dep = build_deployment(m, g, max_model_len=100_000, kv_cache_memory_bytes=10**9)
    with pytest.raises(InfeasibleError, match="one request needs") as err:
        plan(dep)
    text = str(err.value)
    assert "--kv-cache-dtype fp8" in text and "--tp 2" in text
    fit = int(text.split("--max-model-len ")[1].split()[0])
    shorter = build_deployment(m, g, max_model_len=fit, kv_cache_memory_bytes=10**9)
    assert plan(shorter).stage.kv.max_concurrency >= 1.0
    with pytest.raises(InfeasibleError):
        plan(build_deployment(m, g, max_model_len=fit + 16, kv_cache_memory_bytes=10**9))


def test_chat_history_and_littles_law_golden() -> None:
    """Five turns of 1,024 + 128 tokens: 1,024 + (5 - 1) / 2 x 1,152 = 3,328 tokens. A batch of 10
    generating 0.5 + 100 x 0.05 = 5.5 s per turn with 20 s think time: a duty cycle of 5.5 / 25.5 =
    0.2157; Little's law fills the batch on average at 10 x 25.5 / 5.5 = 46.36 users, and
    busy_users keeps the 99th percentile in flight within it: a = 2.3263 x sqrt(0.2157 x 0.7843) =
    0.9568, s = (-0.9568 + sqrt(0.9155 + 8.627)) / 0.4314 = 4.943, 24 users (issue 32, defect 5)."""
    assert chat_prompt_tokens(1024, 128, 5) == 3328
    assert chat_prompt_tokens(1024, 128, 1) == 1024
    assert closed_loop_users(10, 0.5, 0.05, 101, 20.0) == 24.0
