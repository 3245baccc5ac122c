"""Every real capture in tests/fixtures/metrics parses, and the numbers land where they belong."""

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
