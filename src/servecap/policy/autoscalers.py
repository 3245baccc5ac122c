"""Autoscalers: how many replicas a pool should have, decided every ``interval_s`` from a signal.

The registry (:data:`AUTOSCALERS`, name -> class) is the one list the fleet simulator, the
monitor's advice, the fleet file's schema, exports and the web read; :func:`make_autoscaler`
builds the policy a pool's :class:`AutoscalerSettings` names. The interface is
:class:`~servecap.policy.autoscaler_base.Autoscaler`; the signals are computed once, in
:mod:`servecap.policy.signals`. Adding a policy is one file and one line here (docs/extending.md).

- ``target-tracking`` (:mod:`servecap.policy.target_tracking`): HPA / KEDA / Ray Serve;
- ``kpa`` (:mod:`servecap.policy.kpa`): Knative's KPA with its stable and panic windows.

Defaults (:data:`PRESETS`):

- ``keda-vllm``: KEDA's ScaledObject defaults (``pollingInterval`` 30 s, ``cooldownPeriod``
  300 s) on vLLM's ``vllm:num_requests_waiting``, HPA's defaults for the rest (scale-up
  window 0 s, scale-down window 300 s, tolerance 0.1); target 5 waiting requests per replica
  (KEDA has no default target: the value is ours, stated as such);
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
    "make_autoscaler",
]

DEFAULT_AUTOSCALER = "target-tracking"  # a fleet file's ``policy`` when it names none
AUTOSCALERS: dict[str, type[Autoscaler]] = {
    "target-tracking": TargetTracking,
    "kpa": Kpa,
}

PRESETS: dict[str, AutoscalerSettings] = {
    "keda-vllm": AutoscalerSettings(
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
