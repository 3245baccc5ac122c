"""vLLM's metric table: bucket sets as vLLM's loggers.py writes them, aliases, version ranges."""

from __future__ import annotations

from servecap.specs import vllm_metrics as vm


def test_bucket_sets_match_vllm() -> None:
    assert len(vm.TTFT_BUCKETS_S) == 22 and 2.0 not in vm.TTFT_BUCKETS_S
    assert len(vm.TOKEN_LATENCY_BUCKETS_S) == 19 and len(vm.REQUEST_LATENCY_BUCKETS_S) == 21
    for b in (vm.TTFT_BUCKETS_S, vm.TOKEN_LATENCY_BUCKETS_S, vm.REQUEST_LATENCY_BUCKETS_S):
        assert list(b) == sorted(set(b))
    assert vm.buckets_1_2_5(100) == (1, 2, 5, 10, 20, 50, 100)  # vLLM's docstring example
    assert vm.buckets_1_2_5(4096)[-3:] == (500, 1000, 2000)
    assert vm.REQUEST_PROMPT_TOKENS.buckets_for(100) == (1, 2, 5, 10, 20, 50, 100)
    assert vm.TIME_TO_FIRST_TOKEN.buckets_for(100) == vm.TTFT_BUCKETS_S


def test_sample_names_aliases_and_versions() -> None:
    assert vm.PROMPT_TOKENS.sample_name == "vllm:prompt_tokens_total"
    assert vm.NUM_PREEMPTIONS.sample_name == "vllm:num_preemptions_total"
    assert vm.TIME_TO_FIRST_TOKEN.sample_name == "vllm:time_to_first_token_seconds_count"
    assert vm.NUM_REQUESTS_RUNNING.sample_name == "vllm:num_requests_running"
    assert vm.names_for(vm.KV_CACHE_USAGE_PERC) == ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    assert vm.names_for(vm.INTER_TOKEN_LATENCY) == (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    )
    assert vm.names_for(vm.PREFIX_CACHE_HITS) == ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")
    assert vm.exposed_in(vm.GPU_CACHE_USAGE_PERC, "0.10.2") and not vm.exposed_in(vm.GPU_CACHE_USAGE_PERC, "0.11.0")
    assert vm.exposed_in(vm.TIME_PER_OUTPUT_TOKEN, "0.11.1") and not vm.exposed_in(vm.TIME_PER_OUTPUT_TOKEN, "0.12")
    assert not vm.exposed_in(vm.INTER_TOKEN_LATENCY, "0.10.1") and vm.exposed_in(vm.INTER_TOKEN_LATENCY, "0.11")
    assert len(vm.BY_NAME) == len(vm.ALL)  # names are unique
    assert all(m.replaced_by in vm.BY_NAME for m in vm.ALL if m.replaced_by)
