"""Headroom from the engine model at the observed mix (issue 20, defects 1 and 13)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.roofline import BatchShape
from servecap.monitor.engine_headroom import (
    EngineModel,
    calibrate,
    engine_for,
    engine_headroom,
    mix_workload,
    scaled_setup,
    simulated_means,
)
from servecap.monitor.observed import ObservedMix, observed_mix
from servecap.monitor.snapshot import Histogram, Snapshot
from servecap.monitor.window import window_stats
from servecap.specs.perf import Efficiency, Slo

SLO = Slo(ttft_s=1.0, tpot_s=0.05)


@pytest.fixture(scope="module")
def model() -> EngineModel:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    return EngineModel(dep, Efficiency(), SLO)


def mix(rate: float = 24.5, tpot: float | None = 0.0202, ttft: float | None = 0.0653, n: float = 245.0) -> ObservedMix:
    return ObservedMix(rate, n, 1024.0, 128.0, 0.0, tpot, ttft, 10.0)


def test_rate_interval_golden() -> None:
    # 100 requests in 10 s: 10 req/s, 1.96 / sqrt(100) = 19.6% either side
    m = ObservedMix(10.0, 100.0, 1024, 128, 0.0, None, None, 10.0)
    lo, hi = m.rate_interval()
    assert lo == pytest.approx(8.04, abs=1e-3) and hi == pytest.approx(11.96, abs=1e-3)
    assert ObservedMix(0.0, 0.0, 1, 1, 0.0, None, None, 1.0).rate_interval() == (0.0, math.inf)


def _snap(t: float, n: float, prompt_sum: float, out_sum: float, itl_sum: float, itl_n: float) -> Snapshot:
    inf = (1.0, math.inf)
    return Snapshot(
        "a",
        t,
        "vllm",
        "m",
        gauges={"running": 40.0, "waiting": 0.0},
        counters={"requests": n, "prompt_tokens": 9e9 * t, "generation_tokens": 7e9 * t},
        histograms={
            "prompt_len": Histogram((1e4, math.inf), (n, n), prompt_sum, n),
            "output_len": Histogram((1e4, math.inf), (n, n), out_sum, n),
            "itl": Histogram(inf, (itl_n, itl_n), itl_sum, itl_n),
        },
    )


def test_mix_from_the_servers_histograms() -> None:
    # 200 requests finish in 10 s, 2 replicas: 10 req/s each; 200 prompts of 1,000 tokens and
    # 200 outputs of 100 (the per-request histograms, not the lagging token counters); 19,800
    # inter-token gaps summing to 396 s: mean TPOT 20 ms
    start = _snap(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    end = _snap(10.0, 200.0, 200_000.0, 20_000.0, 396.0, 19_800.0)
    m = observed_mix(window_stats(start, end), 2)
    assert m is not None
    assert m.rate_per_s == 10.0 and m.requests == 200.0
    assert m.prompt_tokens == 1000.0 and m.output_tokens == 100.0
    assert m.tpot_mean_s == pytest.approx(0.02)
    assert observed_mix(window_stats(start, _snap(10.0, 0.0, 0, 0, 0, 0)), 1) is None  # nothing finished


def test_scaled_setup_scales_every_step_by_k(model: EngineModel) -> None:
    _, setup = engine_for(model, mix())
    for batch in (BatchShape(1, 1, 1024.0, 0, 1024.0, 0, 0), BatchShape(2048, 4, 4096.0, 0, 2e6, 0, 2048)):
        base = setup.step.step_time(batch, setup.efficiency).total_s
        s2 = scaled_setup(setup, 1.7)
        assert s2.step.step_time(batch, s2.efficiency).total_s == pytest.approx(1.7 * base, rel=1e-12)


def test_calibration_recovers_a_known_scale(model: EngineModel) -> None:
    # "observe" an engine 1.3x slower than the model, then calibrate the model to it
    _, setup = engine_for(model, mix())
    tpot, ttft = simulated_means(scaled_setup(setup, 1.3), mix_workload(mix(), 20.0, 800), 0)
    assert tpot is not None and ttft is not None
    cal = calibrate(setup, replace(mix(20.0), tpot_mean_s=tpot, ttft_mean_s=ttft), 20.0, 0)
    assert cal.scale == pytest.approx(1.3, rel=0.02)
    assert cal.ttft_residual < 0.03


def test_uncalibrated_model_is_capacity_rate(model: EngineModel) -> None:
    """Without a TPOT to calibrate to, the break rate is `capacity --rate`'s for the same mix."""
    from servecap.app.capacity import capacity_from_request
    from servecap.app.simulate_request import CapacityRequest

    h = engine_headroom(model, mix(tpot=None, ttft=None), 1)
    cap, _, _ = capacity_from_request(
        CapacityRequest(
            model="meta-llama/Llama-3.1-8B",
            gpu="H100",
            max_model_len=8192,
            closed_loop=False,
            ttft_slo_ms=1000,
            tpot_slo_ms=50,
        )
    )
    assert h.break_rate_per_s == pytest.approx(cap.max_load, rel=1e-9)
    assert h.calibration.scale == 1.0
    lo, hi = h.break_interval  # uncalibrated: only the simulation's own noise (other seeds) widens it
    assert lo <= h.break_rate_per_s <= hi and hi / lo < 1.25
    assert any("not calibrated" in n for n in h.notes)


def test_issue_repro_headroom_is_not_little_law(model: EngineModel) -> None:
    """The issue's repro: 24.5 req/s of 1,024/128 on Llama-3.1-8B/H100, TPOT 20.2 ms observed.
    Little's law at a constant time in the server said +161%..+237%; `capacity --rate` says
    28.97 req/s (+18%); the engine model must say about that, inside its interval."""
    h = engine_headroom(model, mix(), 1)
    assert 0.0 < h.traffic_headroom < 0.4
    lo, hi = h.break_interval
    assert lo <= 28.97 <= hi
    assert h.limited_by in ("p99 TPOT", "p99 TTFT")
    text = h.summary()
    assert "of the SLO rate" in text and "prefix hits" in text and "traffic" in text


def test_queueing_past_the_break_rate(model: EngineModel) -> None:
    h = engine_headroom(model, mix(rate=40.0, tpot=0.09, ttft=2.0, n=400), 1, waiting=30)
    assert h.queueing and h.traffic_headroom < 0 and "past the SLO rate" in h.summary()


def test_prefix_hits_become_a_shared_prefix() -> None:
    w = mix_workload(replace(mix(), prefix_hit_rate=0.25), 10.0, 100)
    assert w.prefix is not None and w.prefix.tokens == 256
    assert w.prompt_tokens is not None and np.isclose(float(w.prompt_tokens.value), 768)  # type: ignore[union-attr]


def _repro_snap(t: float) -> Snapshot:
    # 24.5 req/s of 1,024/128 tokens, 84 in the server, mean TPOT 20.2 ms, mean TTFT 65.3 ms
    n = 24.5 * t
    gaps = n * 127
    return Snapshot(
        "http://a/metrics",
        t,
        "vllm",
        "m",
        gauges={"running": 83.0, "waiting": 1.0, "kv_usage": 0.2},
        counters={"requests": n, "prompt_tokens": 1024 * n, "generation_tokens": 128 * n},
        histograms={
            "itl": Histogram((0.05, math.inf), (gaps, gaps), 0.0202 * gaps, gaps),
            "ttft": Histogram((1.0, math.inf), (n, n), 0.0653 * n, n),
        },
    )


def test_monitor_report_headroom_from_the_engine_model(model: EngineModel) -> None:
    """The report's headroom on the issue's repro: Little's law on the plan batch (219) said
    "+161% traffic"; the engine model says about capacity --rate's 28.97 req/s (+18%)."""
    from servecap.app.monitor import EngineHeadroomCache, MonitorSettings, report
    from servecap.monitor.watch import Watch

    w = Watch(["http://a/metrics"], window_s=60)
    w.add([_repro_snap(0.0)], 0.0)
    tick = w.add([_repro_snap(10.0)], 10.0)
    settings = MonitorSettings(urls=("http://a",), engine_model=model)
    cache = EngineHeadroomCache(model, every_s=30.0)
    r = report(tick, settings, [], engine=cache)
    h = r.headroom
    assert h is not None and h.capacity_source == "engine_model" and h.unit == "req/s"
    assert h.load_per_replica == pytest.approx(24.5)
    assert h.traffic_headroom is not None and 0.0 < h.traffic_headroom < 0.4
    assert h.capacity_interval is not None and h.capacity_interval[0] <= 28.97 <= h.capacity_interval[1]
    assert h.prompt_tokens == pytest.approx(1024) and h.observed_tpot_s == pytest.approx(0.0202)
    # the next tick within 30 s and an unchanged mix reuses the search
    tick2 = w.add([_repro_snap(12.0)], 12.0)
    again = report(tick2, settings, [], engine=cache)
    assert again.headroom is not None and again.headroom.capacity_per_replica == h.capacity_per_replica
    assert cache.last is not None and cache.last[0] == 10.0


def test_once_reads_a_ten_second_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 13: --once's window was 2 s (a steady 20 req/s read as 11.5-21); now 10 s, and the
    headroom states the rate's interval."""
    from click.testing import CliRunner

    import servecap.app.monitor as app_monitor
    from servecap.cli.main import cli

    seen = []

    async def fake(settings: app_monitor.MonitorSettings, on_report: object) -> object:
        seen.append(settings)
        raise SystemExit(0)

    monkeypatch.setattr(app_monitor, "run_monitor", fake)
    CliRunner().invoke(cli, ["monitor", "http://127.0.0.1:9", "--once", "--no-store"])
    CliRunner().invoke(cli, ["monitor", "http://127.0.0.1:9", "--duration-s", "1", "--no-store"])
    assert [s.interval_s for s in seen] == [10.0, 2.0]
    assert seen[0].window_s >= 10.0
