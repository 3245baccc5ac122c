"""Autoscalers: how many replicas a pool should have, decided every ``interval_s`` from a signal.

The registry (:data:`AUTOSCALERS`, name -> class) is the one list the fleet simulator, the
monitor's advice, the fleet file's schema, exports and the web read; :func:`make_autoscaler`
builds the policy a pool's :class:`AutoscalerSettings` names. The interface is
:class:`~servecap.policy.autoscaler_base.Autoscaler`; the signals are computed once, in
:mod:`servecap.policy.signals`. Adding a policy is one file and one line here (docs/extending.md).

- ``target-tracking`` (:mod:`servecap.policy.target_tracking`): HPA / KEDA / Ray Serve;
- ``kpa`` (:mod:`servecap.policy.kpa`): Knative's KPA with its stable and panic windows.

Defaults (:data:`PRESETS`):

- ``keda-vllm``: KEDA driving the HorizontalPodAutoscaler on the requests a vLLM replica holds,
  running + waiting (``vllm:num_requests_running + vllm:num_requests_waiting``: GKE's LLM
  autoscaling guide names the server's batch size and queue size as the signals, KServe's KEDA
  guide vLLM's waiting requests or KV cache usage). Not the waiting queue alone: it is 0 whenever
  capacity suffices, so HPA's ``ceil(waiting / target)`` falls to the minimum under any load the
  fleet serves and the fleet flaps between min and max (issue 32: 2 -> 16 -> 2 every ~10 min at a
  steady 100 req/s). Running + waiting per replica is the load per replica, which has a steady
  state. Target: the requests in flight per replica at 60% of the replica's planned service rate
  (:data:`PLANNED_LOAD_SHARE`, resolved where the pool's plan is known; ours, stated as such).
  Not a share of the batch: in flight grows far faster than the rate near capacity (Llama-3.1-8B
  on an H100: 35 at 60% of the rate, 390 at 100%), so HPA's proportional rule overshoots there
  and the fleet oscillates; at 60% a 10% change of load per replica moves the signal ~25%. HPA as Kubernetes applies it (docs,
  "Horizontal Pod Autoscaling", default behavior): a decision every 15 s (the controller's sync
  period), tolerance 0.1, scale-up window 0 s with at most ``max(100% of current, 4 pods)`` per
  period, scale-down window 300 s (100% per period);
- ``keda-waiting``: the vLLM production-stack's KEDA tutorial as written: KEDA's ScaledObject
  defaults (``pollingInterval`` 30 s, ``cooldownPeriod`` 300 s) on ``vllm:num_requests_waiting``,
  target 5 waiting per replica (ours: KEDA has no default). Kept to show what a waiting-queue
  signal does under steady load (it flaps; the flapping detector warns);
- ``ray-serve``: Ray Serve's ``AutoscalingConfig`` defaults: ``target_ongoing_requests`` 2
  (since Ray 2.32), ``metrics_interval_s`` 10, ``upscale_delay_s`` 30,
  ``downscale_delay_s`` 600, on the ongoing (in-flight) requests per replica;
- ``knative-kpa``: the KPA on ``vllm:num_requests_waiting`` decided every 2 s (Knative's
  ``tick-interval``), target 5 waiting requests per replica (ours, as for ``keda-vllm``); its
  windows and rates are :class:`~servecap.policy.kpa.Kpa`'s option defaults (Knative's).
"""

from __future__ import annotations

from servecap.errors import ServecapError, did_you_mean
from servecap.policy.autoscaler_base import Autoscaler, AutoscalerSettings
from servecap.policy.kpa import Kpa
from servecap.policy.signals import ADDITIVE_SIGNALS, SIGNALS
from servecap.policy.target_tracking import TargetTracking

__all__ = [
    "ADDITIVE_SIGNALS",
    "AUTOSCALERS",
    "DEFAULT_AUTOSCALER",
    "PRESETS",
    "SIGNALS",
    "Autoscaler",
    "AutoscalerSettings",
    "Kpa",
    "TargetTracking",
    "check_autoscaler_settings",
    "make_autoscaler",
]

DEFAULT_AUTOSCALER = "target-tracking"  # a fleet file's ``policy`` when it names none
AUTOSCALERS: dict[str, type[Autoscaler]] = {
    "target-tracking": TargetTracking,
    "kpa": Kpa,
}

PRESETS: dict[str, AutoscalerSettings] = {
    "keda-vllm": AutoscalerSettings(
        signal="inflight",
        target=64.0,  # used only where no plan is known: PLANNED_BATCH_SHARE x the planned batch otherwise
        interval_s=15.0,
        upscale_stabilization_s=0.0,
        downscale_stabilization_s=300.0,
        options=(("scale_up_percent", 100.0), ("scale_up_pods", 4.0)),
    ),
    "keda-waiting": AutoscalerSettings(
        signal="num_requests_waiting",
        target=5.0,
        interval_s=30.0,
        upscale_stabilization_s=0.0,
        downscale_stabilization_s=300.0,
    ),
    "ray-serve": AutoscalerSettings(
        signal="inflight",
        target=2.0,
        interval_s=10.0,
        upscale_stabilization_s=30.0,
        downscale_stabilization_s=600.0,
    ),
    "knative-kpa": AutoscalerSettings(
        signal="num_requests_waiting",
        target=5.0,
        interval_s=2.0,
        downscale_stabilization_s=0.0,
        policy="kpa",
    ),
}


PLANNED_LOAD_SHARE: dict[str, float] = {"keda-vllm": 0.6}
"""Presets whose target is the requests in flight per replica at this share of the replica's
planned service rate (:func:`servecap.core.capacity.inflight_at_rate`)."""


def autoscaler_class(name: str) -> type[Autoscaler]:
    """The registered policy ``name``; an unknown name is an error with a "did you mean"."""
    cls = AUTOSCALERS.get(name)
    if cls is None:
        raise ServecapError(
            "autoscaler.policy",
            name,
            f"unknown autoscaler; one of {', '.join(AUTOSCALERS)}" + did_you_mean(name, AUTOSCALERS),
        )
    return cls


def make_autoscaler(settings: AutoscalerSettings) -> Autoscaler:
    """A fresh policy (no history) of the kind ``settings.policy`` names."""
    return autoscaler_class(settings.policy)(settings)


def check_autoscaler_settings(settings: AutoscalerSettings) -> None:
    """The policy's own checks of its signal and options, run when a file is read rather than
    mid-run (a bad one raises a :class:`~servecap.errors.ServecapError` naming the field)."""
    autoscaler_class(settings.policy)(settings)
