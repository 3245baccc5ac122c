"""Every real capture in tests/fixtures/metrics parses, and the numbers land where they belong."""

from dataclasses import replace
from pathlib import Path

import pytest

from servecap.monitor.snapshot import parse_exposition
from servecap.monitor.window import window_stats

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.txt")), ids=lambda p: p.name)
def test_every_capture_parses(path: Path) -> None:
    s = parse_exposition(path.read_text(), url="http://x/metrics", time_s=0.0)
    assert s.engine in ("vllm", "sglang")
    assert "running" in s.gauges and "waiting" in s.gauges and "kv_usage" in s.gauges


def test_sglang_capture() -> None:
    s = parse_exposition((FIXTURES / "sglang_production_metrics.txt").read_text(), url="u", time_s=0.0)
    assert s.engine == "sglang" and s.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert s.gauges == {"running": 162.0, "waiting": 2826.0, "kv_usage": 0.28}
    assert s.counters["prompt_tokens"] == 8_128_902 and s.counters["generation_tokens"] == 7_557_572
    assert s.histograms["ttft"].count == 11008
    assert s.histograms["itl"].cumulative[-1] == 7_400_757  # the older time_per_output_token name
    assert s.sglang_cache_hit_rate == pytest.approx(0.0075075526)
    # the whole history as one window: p50 rank 5504 lies beyond the 30 s bucket (2513) -> 30 s
    empty = parse_exposition("", url="u", time_s=-1.0)
    w = window_stats(empty, s)
    assert w.p("ttft", 0.5) == 30.0
    # ITL p50: rank 3,700,378.5 in (0.075, 0.1] holding 433,413..4,950,195
    assert w.p("itl", 0.5) == pytest.approx(0.075 + 0.025 * (3_700_378.5 - 433_413) / (4_950_195 - 433_413))


def test_vllm_v0_capture() -> None:
    s = parse_exposition((FIXTURES / "vllm_v0_aibrix_runtime.txt").read_text(), url="u", time_s=0.0)
    assert s.engine == "vllm" and s.model_name == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert s.gauges["kv_usage"] == 0.0  # from the older gpu_cache_usage_perc
    assert s.counters["prompt_tokens"] == 148 and s.counters["generation_tokens"] == 955
    assert s.counters["requests"] == 4 and s.counters["preemptions"] == 0
    assert s.cache_config is not None
    assert (s.cache_config.num_gpu_blocks, s.cache_config.block_size) == (81767, 16)
    assert s.cache_config.gpu_memory_utilization == 0.9


def test_not_an_exposition_is_one_error() -> None:
    from servecap.errors import ServecapError

    with pytest.raises(ServecapError, match="url"):
        parse_exposition("<html>hello</html>\n", url="http://x/metrics", time_s=0.0)


V1 = "vllm_v1_mindie_pymotor_example.txt"


def test_vllm_v1_capture_gauges_counters_and_deployment() -> None:
    s = parse_exposition((FIXTURES / V1).read_text(), url="u", time_s=0.0)
    assert s.engine == "vllm" and s.model_name == "/job/model/Qwen2.5-0.5B-Instruct"
    # vllm:kv_cache_usage_perc (the V1 name) and its deprecated alias gpu_cache_usage_perc agree
    assert s.gauges == {"running": 0.0, "waiting": 0.0, "kv_usage": 1.3798051715085968e-05}
    assert s.counters["prompt_tokens"] == 39 and s.counters["generation_tokens"] == 26
    # request_success_total: stop 1 + length 2 + abort 0; the _created timestamps beside the
    # counters (1.758e9) are not read as values
    assert s.counters["requests"] == 3 and s.counters["preemptions"] == 0
    # prefix_cache_{queries,hits}_total read once, not added to the gpu_prefix_cache_* aliases
    assert (s.counters["prefix_queries"], s.counters["prefix_hits"]) == (39, 0)
    # cache_config_info (with V1's engine label): block_size 128, num_gpu_blocks 72474
    assert s.cache_config is not None
    assert (s.cache_config.num_gpu_blocks, s.cache_config.block_size) == (72474, 128)
    assert s.cache_config.gpu_memory_utilization == 0.9


def test_vllm_v1_capture_percentiles_hit_rate_and_capacity() -> None:
    from servecap.monitor.headroom import capacity_from_cache_config

    s = parse_exposition((FIXTURES / V1).read_text(), url="u", time_s=0.0)
    assert s.histograms["ttft"].count == 3 and s.histograms["itl"].count == 23
    # the whole history as one window: from a start where every counter is 0 and nothing observed
    start = replace(s, time_s=-1.0, counters=dict.fromkeys(s.counters, 0.0), histograms={})
    w = window_stats(start, s)
    # TTFT cumulative: le 0.02 -> 1, 0.04 -> 1, 0.06 -> 2, 0.08 -> 3 (of 3).
    # p50: rank 1.5 in (0.04, 0.06] holding ranks 1..2 -> 0.04 + 0.02 x 0.5 / 1 = 0.05 s
    assert w.p("ttft", 0.5) == pytest.approx(0.05)
    # p99: rank 2.97 in (0.06, 0.08] holding 2..3 -> 0.06 + 0.02 x 0.97 = 0.0794 s
    assert w.p("ttft", 0.99) == pytest.approx(0.0794)
    # inter-token from time_per_output_token_seconds (no inter_token_latency_seconds in this
    # release): le 0.01 -> 18, 0.025 -> 23. p50: rank 11.5 in (0, 0.01] -> 0.01 x 11.5 / 18
    assert w.p("itl", 0.5) == pytest.approx(0.01 * 11.5 / 18)
    # p99: rank 22.77 in (0.01, 0.025] holding 18..23 -> 0.01 + 0.015 x 4.77 / 5
    assert w.p("itl", 0.99) == pytest.approx(0.01 + 0.015 * 4.77 / 5)
    # E2E and queue time: all 3 requests in the first bucket (le 0.3): p50 = 0.3 x 1.5 / 3
    assert w.p("e2e", 0.5) == pytest.approx(0.15) and w.p("queue_time", 0.5) == pytest.approx(0.15)
    assert w.prefix_hit_rate == 0.0  # 0 hits of 39 queried tokens
    # vLLM's maximum concurrency from the KV pool: 72474 // ceil(1152 / 128) = 72474 // 9 = 8052
    assert capacity_from_cache_config(s.cache_config, 1152).requests_per_replica == 8052  # type: ignore[arg-type]


def test_vllm_0_26_0_capture_with_cache_sources() -> None:
    """The project's own capture (README): a fresh vLLM 0.26.0 server with CPU offloading. Every
    counter is 0, the cache-source families are all there, and a window over no traffic has no
    hit rate (None), not a division by zero."""
    from servecap.monitor.cache_hits import BY_SOURCE, cache_hits

    s = parse_exposition((FIXTURES / "vllm_0_26_0_h200_offload_idle.txt").read_text(), url="u", time_s=0.0)
    assert s.engine == "vllm" and s.model_name == "/tmp/servecap-sweep/model-llama31-8b-fp8-offload"
    assert s.gauges == {"running": 0.0, "waiting": 0.0, "kv_usage": 0.0}
    assert s.cache_config is not None
    assert (s.cache_config.num_gpu_blocks, s.cache_config.block_size) == (9450, 16)  # 151,200 tokens
    assert s.cache_config.gpu_memory_utilization == 0.2
    for key in ("prompt_local_compute", "prompt_local_cache_hit", "prompt_external_kv_transfer"):
        assert s.counters[key] == 0.0
    assert "itl" in s.histograms and s.histograms["itl"].count == 0  # vllm:inter_token_latency_seconds
    hits = cache_hits(s, s)
    assert hits is not None and hits.source == BY_SOURCE and hits.hit_rate is None
