"""The watch state: windows per target, down targets counted, the fleet over the live ones."""

import pytest
from helpers import end, snap, start

from servecap.app.monitor import MonitorSettings, report
from servecap.cli.monitor_cmd import render
from servecap.monitor.scrape import Down, metrics_url
from servecap.monitor.watch import Watch


def test_down_is_counted_and_the_fleet_covers_live_targets() -> None:
    w = Watch(["a", "b"], window_s=60)
    t0 = w.add([start("a"), Down("b", 0.0, "refused")], 0.0)
    assert [t.up for t in t0.targets] == [True, False] and t0.fleet is None
    t1 = w.add([end("a"), Down("b", 10.0, "refused")], 10.0)
    assert t1.targets[0].stats is not None and t1.targets[1].down_count == 2
    assert t1.fleet is not None and t1.fleet.prompt_tok_s == pytest.approx(200)
    assert t1.replicas_up == 1


def test_a_target_that_comes_back_starts_a_new_window() -> None:
    w = Watch(["a"], window_s=60)
    w.add([start()], 0.0)
    w.add([Down("a", 5.0, "timeout")], 5.0)
    back = w.add([end()], 10.0)
    assert back.targets[0].up and back.targets[0].stats is None and back.targets[0].down_count == 1


def test_the_window_slides() -> None:
    w = Watch(["a"], window_s=10)
    for i in range(5):
        t = float(i * 5)
        tick = w.add([snap("a", t, prompt=100 * t, gen=0, req=0, pre=0, pq=0, ph=0, ttft=(0, 0, 0, 0))], t)
    stats = tick.targets[0].stats
    assert stats is not None and stats.window_s == 10 and stats.prompt_tok_s == pytest.approx(100)


def test_report_and_render_show_down_targets() -> None:
    w = Watch(["a", "b"], window_s=60)
    w.add([start("a"), Down("b", 0.0, "refused")], 0.0)
    tick = w.add([end("a"), Down("b", 10.0, "refused")], 10.0)
    r = report(tick, MonitorSettings(urls=("a", "b")), [])
    assert r.replicas_down == 1 and r.targets[1].error == "refused"
    assert r.headroom is None and r.notes  # no plan, no cache_config_info: says so
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render(r))
    text = console.export_text()
    assert "DOWN (2x): refused" in text and "fleet" in text


def test_metrics_url() -> None:
    assert metrics_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://h:1/custom/metrics") == "http://h:1/custom/metrics"
