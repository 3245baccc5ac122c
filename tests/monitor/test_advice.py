"""Autoscaler advice from the fleet file's own policy, fed a hand-made sequence of ticks; and
the fleet file's pool chosen, or one error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.app.monitor_fleet import pool_autoscaler
from servecap.errors import ServecapError
from servecap.monitor.advice import Advisor, signal_value
from servecap.monitor.scrape import Down
from servecap.monitor.snapshot import Snapshot
from servecap.monitor.views import ScrapedReplica, replica_views
from servecap.monitor.window import WindowStats
from servecap.policy.autoscalers import PRESETS, AutoscalerSettings


def _replicas(
    waiting: list[int], running: list[int] | None = None, kv: list[float] | None = None
) -> list[ScrapedReplica]:
    running = running or [0] * len(waiting)
    kv = kv or [0.0] * len(waiting)
    return [ScrapedReplica(i, "p", True, w, r, k) for i, (w, r, k) in enumerate(zip(waiting, running, kv, strict=True))]


def _fleet(p99_ttft_s: float | None, p99_itl_s: float | None = None) -> WindowStats:
    latency = {"ttft": {"p50": None, "p99": p99_ttft_s}, "itl": {"p50": None, "p99": p99_itl_s}}
    return WindowStats("fleet", 10.0, None, None, None, None, None, None, None, None, latency)


def test_signals_as_the_simulator_reads_them() -> None:
    reps = [*_replicas([3, 5], running=[10, 20], kv=[0.4, 0.8]), ScrapedReplica(2, "p", False, 0, 0, 0.0)]
    assert signal_value("num_requests_waiting", reps, None) == 8.0  # a fleet sum, down replica left out
    assert signal_value("inflight", reps, None) == 38.0
    assert signal_value("kv_usage", reps, None) == pytest.approx(0.6)  # the mean of the ready ones
    assert signal_value("p99_ttft_s", reps, None) is None  # no window yet
    assert signal_value("p99_ttft_s", reps, _fleet(None)) == 0.0  # nothing observed: the simulator's 0
    assert signal_value("p99_ttft_s", reps, _fleet(1.25)) == 1.25
    assert signal_value("p99_itl_s", reps, None) is None
    assert signal_value("p99_itl_s", reps, _fleet(1.25)) == 0.0  # no ITL observed
    assert signal_value("p99_itl_s", reps, _fleet(1.25, 0.03)) == 0.03  # vllm:inter_token_latency_seconds


def test_scale_up_now_with_keda_defaults() -> None:
    # keda-waiting: target 5 waiting per replica, no scale-up window. 3 replicas x 8 waiting = 24
    # -> ceil(24 / 5) = 5 (HPA's ceil(current x value / target) = ceil(3 x 8 / 5)).
    adv = Advisor(PRESETS["keda-waiting"], "h100", "fleet.yaml").advise(0.0, _replicas([8, 8, 8]), None)
    assert adv is not None and (adv.current, adv.recommended, adv.desired) == (3, 5, 5)
    assert adv.summary() == (
        "with the autoscaler of pool 'h100' in fleet.yaml: 3 → 5 replicas now "
        "(num_requests_waiting 8.0 per replica vs target 5)"
    )


def test_upscale_stabilisation_window_delays_the_scale_up() -> None:
    # ray-serve: in-flight target 2 per replica, scale-up window 30 s: the lowest recommendation
    # of the last 30 s wins, so a rise at t=10 acts only once t=0's calm leaves the window.
    advisor = Advisor(PRESETS["ray-serve"], "pool", "f.yaml")
    calm, busy = _replicas([0, 0], running=[2, 2]), _replicas([1, 1], running=[5, 5])
    first = advisor.advise(0.0, calm, None)
    assert first is not None and (first.recommended, first.desired) == (2, 2)
    steps = [(t, advisor.advise(t, busy, None)) for t in (10.0, 20.0, 30.0, 31.0)]
    got = [(t, a.recommended, a.desired) for t, a in steps if a is not None]
    assert got == [(10.0, 6, 2), (20.0, 6, 2), (30.0, 6, 2), (31.0, 6, 6)]
    held = steps[0][1]
    assert held is not None and held.summary().endswith(
        "2 → 2 replicas now (inflight 6.0 per replica vs target 2; 6 recommended, held by the 30 s upscale"
        " stabilisation window)"
    )


def test_downscale_window_then_the_floor() -> None:
    # keda-waiting: 4 replicas at 5 waiting each (on target), then idle: the highest recommendation
    # of the last 300 s (4) holds until t=0 leaves the window; then 0, floored at min_replicas 1.
    advisor = Advisor(PRESETS["keda-waiting"], "pool", "f.yaml")
    assert advisor.advise(0.0, _replicas([5, 5, 5, 5]), None).desired == 4  # type: ignore[union-attr]
    idle = _replicas([0, 0, 0, 0])
    mid = advisor.advise(150.0, idle, None)
    assert mid is not None and (mid.recommended, mid.desired) == (0, 4)
    assert "held by the 300 s downscale stabilisation window" in mid.summary()
    late = advisor.advise(300.5, idle, None)
    assert late is not None and late.desired == 1
    assert late.summary().endswith(
        "4 → 1 replicas now (num_requests_waiting 0.0 per replica vs target 5; "
        "0 recommended, floored at min_replicas 1)"
    )


def test_capped_at_max_and_no_advice_without_replicas() -> None:
    s = AutoscalerSettings(signal="kv_usage", target=0.5, max_replicas=3, downscale_stabilization_s=0.0)
    advisor = Advisor(s, "p", "f.yaml")
    assert advisor.advise(0.0, [ScrapedReplica(0, "p", False, 0, 0, 0.0)], None) is None
    adv = advisor.advise(1.0, _replicas([0, 0], kv=[0.9, 1.0]), None)
    # ceil(2 x 0.95 / 0.5) = 4 > max 3
    assert adv is not None and (adv.recommended, adv.desired) == (4, 3)
    assert "kv_usage 0.95 vs target 0.5; 4 recommended, capped at max_replicas 3" in adv.summary()


def test_views_from_scrapes_feed_the_advisor() -> None:
    up = Snapshot("u", 0.0, "vllm", "m", gauges={"running": 4.0, "waiting": 12.0, "kv_usage": 0.7})
    views = replica_views([up, Down("v", 0.0, "refused")], pool="p")
    adv = Advisor(PRESETS["keda-waiting"], "p", "f.yaml").advise(0.0, views, None)
    assert adv is not None and (adv.current, adv.value, adv.desired) == (1, 12.0, 3)


def test_schedule_is_left_out() -> None:
    s = AutoscalerSettings(min_replicas=1, max_replicas=8, schedule=((0.0, 6),))
    advisor = Advisor(s, "p", "f.yaml")
    assert advisor.dropped_schedule and advisor.policy.settings.schedule == ()
    adv = advisor.advise(0.0, _replicas([0]), None)
    assert adv is not None and adv.desired == 1


FLEET = """\
pools:
  - name: h100
    model: meta-llama/Llama-3.1-8B
    gpu: H100
    autoscaler:
      preset: ray-serve
      target: 3
      max_replicas: 6
      schedule:
        - {at_s: 300, min_replicas: 2}
  - name: fixed
    model: meta-llama/Llama-3.1-8B
    gpu: H100
    replicas: 2
"""


def _write(tmp_path: Path, text: str, name: str = "fleet.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_pool_autoscaler_resolves_the_preset(tmp_path: Path) -> None:
    path = _write(tmp_path, FLEET)
    pa = pool_autoscaler(path)  # the only autoscaled pool
    assert pa.pool == "h100" and pa.source == str(path)
    s = pa.settings
    assert (s.signal, s.target, s.max_replicas, s.upscale_stabilization_s, s.downscale_stabilization_s) == (
        "inflight",
        3.0,
        6,
        30.0,
        600.0,
    )
    assert pa.notes and "schedule" in pa.notes[0]
    assert pool_autoscaler(path, "h100").settings == s


@pytest.mark.parametrize(
    ("text", "pool", "message"),
    [
        (FLEET, "h10", "pool='h10': not a pool of"),
        (FLEET, "fixed", "pools.fixed.autoscaler=None: pool 'fixed' of"),
        (FLEET.replace("target: 3", "target: -1"), None, "fleet.pools[0].autoscaler.target=-1"),
        (FLEET.replace("preset: ray-serve", "preset: hpa"), None, "fleet.pools[0].autoscaler.preset='hpa'"),
        (FLEET.replace("max_replicas: 6", "max_replicas: 6\n      nope: 1"), None, "unknown key"),
        ("pools: [\n", None, "malformed YAML"),
        (FLEET + "    autoscaler: {max_replicas: 4}\n", None, "name one with --pool"),
    ],
)
def test_pool_autoscaler_bad_input_is_one_error(tmp_path: Path, text: str, pool: str | None, message: str) -> None:
    with pytest.raises(ServecapError) as err:
        pool_autoscaler(_write(tmp_path, text), pool)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_fleet_model_that_differs_from_the_servers_is_noticed(tmp_path: Path) -> None:
    """Issue 20, defect 16: `monitor --fleet` advised for a 70B pool while the servers ran an 8B."""
    from servecap.app.monitor import MonitorSettings, report
    from servecap.app.monitor_fleet import model_mismatch
    from servecap.monitor.watch import Watch

    pa = pool_autoscaler(
        _write(
            tmp_path,
            FLEET.replace(
                "Llama-3.1-8B\n    gpu: H100\n    autoscaler", "Llama-3.1-70B\n    gpu: H100\n    autoscaler"
            ),
        )
    )
    assert pa.model == "meta-llama/Llama-3.1-70B"
    assert model_mismatch("meta-llama/Llama-3.1-8B", ["/models/Llama-3.1-8B"]) is None  # a path to the same
    w = Watch(["u"], window_s=60)
    snap = Snapshot("u", 0.0, "vllm", "meta-llama/Llama-3.1-8B", gauges={"running": 1.0, "waiting": 0.0})
    notes: list[str] = []
    report(w.add([snap], 0.0), MonitorSettings(urls=("u",), autoscaler=pa), notes)
    assert any("serve meta-llama/Llama-3.1-8B" in n and "runs meta-llama/Llama-3.1-70B" in n for n in notes)
