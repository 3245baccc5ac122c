"""The target-tracking autoscaler, in the shape of Kubernetes' HorizontalPodAutoscaler (which
KEDA drives) and Ray Serve's autoscaler:

- the raw recommendation is ``ceil(current x value / target)`` (HPA's formula,
  ``desiredReplicas = ceil[currentReplicas x currentMetricValue / desiredMetricValue]``) for an
  average per-replica signal; for the additive signals (waiting, in-flight requests) the fleet
  passes their sum and the recommendation is ``ceil(sum / target)`` — the same number when
  there are replicas, and one that can leave zero;
- inside the tolerance (``|value / target - 1| <= tolerance``, HPA's default 0.1) nothing
  changes;
- stabilisation: scaling up takes the *lowest* recommendation of the last
  ``upscale_stabilization_s``, scaling down the *highest* of the last
  ``downscale_stabilization_s`` (HPA's ``behavior.*.stabilizationWindowSeconds``; Ray Serve's
  ``upscale_delay_s`` / ``downscale_delay_s`` play the same part);
- HPA's scale-up policy (options ``scale_up_percent``, ``scale_up_pods``; 0: none): at most
  ``max(ceil(current x percent / 100), pods)`` more replicas per decision (the controller's
  ``selectPolicy: Max`` over its two default policies, 100% and 4 pods per 15 s);
- at most ``max_step_up`` / ``max_step_down`` replicas per decision; then clamped to
  ``[min, max]``, where a ``schedule`` of ``(from_s, min_replicas)`` raises the floor from a
  known time (scheduled scale-ahead of a daily curve).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import ClassVar

from servecap.policy.autoscaler_base import Autoscaler, AutoscalerSettings
from servecap.policy.signals import ADDITIVE_SIGNALS


class TargetTracking(Autoscaler):
    """The target-tracking decision; keeps its recent recommendations (the stabilisation windows)."""

    default_preset = "keda-vllm"
    option_defaults: ClassVar[Mapping[str, float]] = {"scale_up_percent": 0.0, "scale_up_pods": 0.0}

    def __init__(self, settings: AutoscalerSettings) -> None:
        super().__init__(settings)
        self._history: deque[tuple[float, int]] = deque()

    def raw(self, current: int, value: float) -> int:
        """The recommendation before stabilisation, step limits and bounds."""
        s = self.settings
        if s.signal in ADDITIVE_SIGNALS:
            if current > 0 and abs(value / current / s.target - 1.0) <= s.tolerance:
                return current
            return math.ceil(value / s.target - 1e-9)
        if current == 0:
            return 1 if value > 0 else 0
        ratio = value / s.target
        if abs(ratio - 1.0) <= s.tolerance:
            return current
        return math.ceil(current * ratio - 1e-9)

    def decide(self, now_s: float, current: int, value: float) -> int:
        s = self.settings
        rec = self.raw(current, value)
        self._history.append((now_s, rec))
        keep = max(s.upscale_stabilization_s, s.downscale_stabilization_s)
        while self._history and self._history[0][0] < now_s - keep:
            self._history.popleft()
        up = min(r for t, r in self._history if t >= now_s - s.upscale_stabilization_s)
        down = max(r for t, r in self._history if t >= now_s - s.downscale_stabilization_s)
        if up > current:
            desired = min(up, current + s.max_step_up)
            pct, pods = self.options["scale_up_percent"], self.options["scale_up_pods"]
            if pct > 0 or pods > 0:
                desired = min(desired, current + max(math.ceil(current * pct / 100.0 - 1e-9), int(pods), 1))
        elif down < current:
            desired = max(down, current - s.max_step_down)
        else:
            desired = current
        return s.bound(now_s, desired)
