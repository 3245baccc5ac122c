"""Autoscaling a user can trust (issue 32, defect 2): a keda-vllm signal with a steady state,
HPA's scale-up policies as the controller applies them, the flapping detector, and monitor
advice held within its own headroom."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servecap.app.flapping import detect_flapping
from servecap.app.scale_event import ScaleEvent
from servecap.monitor.advice import Advisor, headroom_floor
from servecap.monitor.views import ScrapedReplica
from servecap.policy.autoscalers import PRESETS, AutoscalerSettings, make_autoscaler


def _ev(t: float, a: int, b: int, pool: str = "main") -> ScaleEvent:
    return ScaleEvent({"time_s": t, "pool": pool, "from": a, "to": b})


def test_the_waiting_queue_flaps_and_the_detector_says_so() -> None:
    """The issue's run: 2 -> 16 at 30 s, 16 -> 2 at 570 s, 2 -> 16 at 600 s, ... over 2,000 s:
    three min <-> max cycles (each a return to 2 after 16), 5 of 6 events after the first 10 min."""
    events = [_ev(30, 2, 16), _ev(570, 16, 2), _ev(600, 2, 16), _ev(1140, 16, 2), _ev(1170, 2, 16), _ev(1710, 16, 2)]
    (v,) = detect_flapping(events, 2000.0, {"main": (2, 16)})
    assert (v.scale_events, v.events_after_settle, v.min_max_cycles, v.flapping) == (6, 4, 3, True)
    assert v.events_per_hour == pytest.approx(4 / (1400 / 3600))
    assert v.warning is not None and "flaps" in v.warning and "3 cycles between its min 2 and max 16" in v.warning


def test_a_ramp_then_a_steady_count_is_not_flapping() -> None:
    # keda-vllm on the same load: up to the load, one overshoot back, then steady to the end
    events = [_ev(15, 2, 6), _ev(30, 6, 12), _ev(45, 12, 16), _ev(570, 16, 4), _ev(585, 4, 8), _ev(1020, 8, 6)]
    (v,) = detect_flapping(events, 7200.0, {"main": (2, 16)})
    assert not v.flapping and v.warning is None and v.min_max_cycles == 0
    assert v.events_after_settle == 1  # 1,020 s; the rest are the first 10 minutes
    # many small steps an hour flap too, without touching the bounds
    busy = [_ev(600 + 120 * i, 5 + i % 2, 6 - i % 2) for i in range(30)]
    assert detect_flapping(busy, 4200.0, {"main": (1, 16)})[0].flapping


def test_hpa_scale_up_policy_allows_the_larger_of_100_percent_and_4_pods() -> None:
    """Kubernetes' default scale-up behavior: per 15 s, at most max(100% of current, 4 pods) more."""
    s = replace(PRESETS["keda-vllm"], max_replicas=16)
    policy = make_autoscaler(s)
    big = 10_000.0 * s.target  # asks for far more than max
    assert policy.decide(0.0, 2, big) == 6  # 2 + max(2, 4)
    assert policy.decide(15.0, 6, big) == 12  # 6 + max(6, 4)
    assert policy.decide(30.0, 12, big) == 16  # 24, clamped to max_replicas
    plain = make_autoscaler(AutoscalerSettings(signal="inflight", target=1.0, max_replicas=100))
    assert plain.decide(0.0, 2, 50.0) == 50  # no policy: straight to the recommendation


def test_keda_vllm_target_is_in_flight_at_60_percent_of_the_planned_rate() -> None:
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.capacity import inflight_at_rate
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan
    from servecap.fleet.file_schema import planned_target

    p = plan(build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100")))
    mu = p.output_tokens_per_s_total / p.request.output_tokens
    target = planned_target("keda-vllm", p)
    assert target == 35.0 and planned_target("ray-serve", p) is None
    eng = p.deployment.engine
    at = inflight_at_rate(p.step, p.request, p.efficiency, eng.max_num_batched_tokens, 0.6 * mu, p.batch)
    assert at is not None and round(at) == 35
    # Little's law at the fixed point, and far below the planned batch (the signal's gain near capacity)
    assert inflight_at_rate(p.step, p.request, p.efficiency, eng.max_num_batched_tokens, 1.2 * mu, p.batch) is None
    assert at < 0.2 * p.batch


def _idle(n: int, running: int = 1) -> list[ScrapedReplica]:
    return [ScrapedReplica(i, "p", True, 0, running, 0.1) for i in range(n)]


def test_monitor_never_advises_a_scale_down_beyond_its_own_headroom() -> None:
    """Defect 2: monitor --fleet recommended 0 replicas on the line saying the SLOs break at +29%.
    4 replicas, the policy wants 1 after its window: with +50% headroom the advice stops at
    ceil(4 / 1.5) = 3, and says why; with no headroom it holds all 4."""
    assert headroom_floor(2, 0.29) == 2 and headroom_floor(8, 0.5) == 6 and headroom_floor(4, 0.0) == 4
    settings = PRESETS["keda-waiting"]  # nothing waiting: the policy's first decision is its minimum, 1
    adv = Advisor(settings, "pool", "f.yaml").advise(0.0, _idle(4), None, 0.5)
    assert adv is not None and adv.policy_desired == 1 and adv.desired == 3
    assert "the policy's 1 held at 3: 4 → 1 puts +300% traffic on each replica, beyond the +50%" in adv.summary()
    unchecked = Advisor(settings, "pool", "f.yaml").advise(0.0, _idle(4), None)  # no headroom known
    assert unchecked is not None and unchecked.desired == 1 and unchecked.policy_desired is None
    held = Advisor(settings, "pool", "f.yaml").advise(0.0, _idle(4), None, 0.0)  # the SLOs already break
    assert held is not None and held.desired == 4
