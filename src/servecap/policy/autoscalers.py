"""Autoscalers: how many replicas a pool should have, decided every ``interval_s`` from a signal.

A target-tracking autoscaler in the shape of Kubernetes' HorizontalPodAutoscaler (which KEDA
drives) and Ray Serve's autoscaler:

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
- at most ``max_step_up`` / ``max_step_down`` replicas per decision; then clamped to
  ``[min, max]``, where a ``schedule`` of ``(from_s, min_replicas)`` raises the floor from a
  known time (scheduled scale-ahead of a daily curve).

Defaults (:data:`PRESETS`):

- ``keda-vllm``: KEDA's ScaledObject defaults (``pollingInterval`` 30 s, ``cooldownPeriod``
  300 s) on vLLM's ``vllm:num_requests_waiting``, HPA's defaults for the rest (scale-up
  window 0 s, scale-down window 300 s, tolerance 0.1); target 5 waiting requests per replica
  (KEDA has no default target: the value is ours, stated as such);
- ``ray-serve``: Ray Serve's ``AutoscalingConfig`` defaults: ``target_ongoing_requests`` 2
  (since Ray 2.32), ``metrics_interval_s`` 10, ``upscale_delay_s`` 30,
  ``downscale_delay_s`` 600, on the ongoing (in-flight) requests per replica.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from servecap.errors import ServecapError, did_you_mean

SIGNALS = ("num_requests_waiting", "inflight", "kv_usage", "p99_ttft_s")
ADDITIVE_SIGNALS = ("num_requests_waiting", "inflight")


@dataclass(frozen=True, slots=True)
class AutoscalerSettings:
    signal: str = "num_requests_waiting"
    target: float = 5.0
    interval_s: float = 30.0
    min_replicas: int = 1
    max_replicas: int = 8
    upscale_stabilization_s: float = 0.0
    downscale_stabilization_s: float = 300.0
    max_step_up: int = 1 << 30
    max_step_down: int = 1 << 30
    tolerance: float = 0.1
    window_s: float = 60.0  # the p99 TTFT signal's window
    schedule: tuple[tuple[float, int], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise ServecapError(
                "autoscaler.signal", self.signal, f"one of {', '.join(SIGNALS)}" + did_you_mean(self.signal, SIGNALS)
            )
        checks: tuple[tuple[str, float, bool], ...] = (
            ("target", self.target, self.target > 0),
            ("interval_s", self.interval_s, self.interval_s > 0),
            ("min_replicas", self.min_replicas, self.min_replicas >= 0),
            ("max_replicas", self.max_replicas, self.max_replicas >= 1),
            ("upscale_stabilization_s", self.upscale_stabilization_s, self.upscale_stabilization_s >= 0),
            ("downscale_stabilization_s", self.downscale_stabilization_s, self.downscale_stabilization_s >= 0),
            ("max_step_up", self.max_step_up, self.max_step_up >= 1),
            ("max_step_down", self.max_step_down, self.max_step_down >= 1),
            ("tolerance", self.tolerance, 0 <= self.tolerance < 1),
            ("window_s", self.window_s, self.window_s > 0),
        )
        for name, value, ok in checks:
            if not ok:
                raise ServecapError(f"autoscaler.{name}", value, "out of range (see docs/fleet.md)")
        if self.min_replicas > self.max_replicas:
            raise ServecapError(
                "autoscaler.min_replicas", self.min_replicas, f"exceeds max_replicas {self.max_replicas}"
            )
        for at_s, n in self.schedule:
            if at_s < 0 or n < 0 or n > self.max_replicas:
                raise ServecapError("autoscaler.schedule", (at_s, n), "needs time >= 0 and 0 <= replicas <= max")

    def floor_at(self, now_s: float) -> int:
        """The minimum at ``now_s``: ``min_replicas``, raised by the latest schedule entry due."""
        floor = self.min_replicas
        best = -1.0
        for at_s, n in self.schedule:
            if at_s <= now_s and at_s >= best:
                best, floor = at_s, max(self.min_replicas, n)
        return floor


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
}


class TargetTracking:
    """The target-tracking decision; keeps its recent recommendations (the stabilisation windows)."""

    def __init__(self, settings: AutoscalerSettings) -> None:
        self.settings = settings
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
        """The number of replicas the pool should have from ``now_s``, given ``current``
        (ready + starting, not draining) and the signal's ``value``."""
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
        elif down < current:
            desired = max(down, current - s.max_step_down)
        else:
            desired = current
        return max(s.floor_at(now_s), min(s.max_replicas, desired))


AUTOSCALERS: dict[str, type[TargetTracking]] = {"target-tracking": TargetTracking}
