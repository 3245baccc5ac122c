"""Rates and percentiles from two synthetic snapshots, 10 s apart, worked by hand."""

import pytest
from helpers import end, start

from servecap.monitor.fleet import fleet_window
from servecap.monitor.window import counter_increase, window_stats


def test_rates_hit_rate_and_percentiles() -> None:
    w = window_stats(start(), end())
    assert w.window_s == 10
    assert w.prompt_tok_s == pytest.approx(200)  # (3000 - 1000) / 10
    assert w.generation_tok_s == pytest.approx(100)  # (1500 - 500) / 10
    assert w.request_rate_per_s == pytest.approx(2)  # (30 - 10) / 10
    assert w.preemptions_per_s == pytest.approx(0.5)
    assert w.prefix_hit_rate == pytest.approx(0.5)  # (700 - 200) / (2000 - 1000)
    assert (w.running, w.waiting, w.kv_usage) == (12, 6, 0.7)
    # TTFT delta (10, 50, 80, 90): p50 rank 45 in (0.1, 0.5] holding 10..50 -> 0.1 + 0.4 * 35 / 40
    assert w.p("ttft", 0.5) == pytest.approx(0.45)
    assert w.p("ttft", 0.99) == 1.0  # rank 89.1 above 80: the +Inf bucket


def test_counter_reset_counts_the_end_value() -> None:
    assert counter_increase(100, 130) == 30
    assert counter_increase(100, 7) == 7


def test_end_before_start_is_an_error() -> None:
    with pytest.raises(ValueError):
        window_stats(end(), start())


def test_fleet_adds_rates_and_merges_histograms() -> None:
    f = fleet_window([(start("a"), end("a")), (start("b"), end("b"))])
    assert f.prompt_tok_s == pytest.approx(400)
    assert f.running == 24 and f.waiting == 12
    assert f.kv_usage == pytest.approx(0.7)
    assert f.prefix_hit_rate == pytest.approx(0.5)
    # doubled counts: the same percentiles
    assert f.p("ttft", 0.5) == pytest.approx(0.45)
