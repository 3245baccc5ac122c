"""A queue-length step autoscaler in the shape of Knative's Pod Autoscaler (KPA, KServe's
default for serverless InferenceServices), with its panic mode.

Every ``interval_s`` (Knative's ``tick-interval``, 2 s) the policy records the signal (a fleet
sum: waiting or in-flight requests) and averages it over two windows:

- the *stable* window (``stable_window_s``, Knative's ``stable-window``, default 60 s): the
  desired count is ``ceil(stable average / target)``;
- the *panic* window, ``panic_window_pct`` percent of the stable one (Knative's
  ``panic-window-percentage``, default 10: 6 s): ``ceil(panic average / target)``.

Both are clamped per decision to ``[floor(ready / max_scale_down_rate), ceil(ready x
max_scale_up_rate)]`` (Knative's ``max-scale-down-rate`` 2.0 and ``max-scale-up-rate`` 1000).
When the panic count reaches ``panic_threshold_pct`` percent of the ready count (Knative's
``panic-threshold-percentage``, default 200) the policy panics: it takes the larger of the two
counts and never scales down while panicking; it leaves panic mode once a whole stable window
has passed without crossing the threshold. Then the pool's ``[min, max]`` and schedule floor
apply. ``target`` plays Knative's target x target-utilization (the value per replica aimed at).
The target-tracking keys (stabilisation windows, step limits, tolerance) are not read.

Sources: Knative Serving docs, "Additional autoscaling configuration for Knative Pod
Autoscaler" (knative.dev/docs/serving/autoscaling/kpa-specific: stable window 60 s, panic
window percentage 10, panic threshold percentage 200, no scale-down while panicking, panic ends
after a stable window with no reason to react quickly); Knative Serving's
``config/config-autoscaler.yaml`` (``max-scale-up-rate`` 1000, ``max-scale-down-rate`` 2.0,
``tick-interval`` 2s) and ``pkg/autoscaler/scaling/autoscaler.go`` (the decision above).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import ClassVar

from servecap.errors import ServecapError
from servecap.policy.autoscaler_base import Autoscaler, AutoscalerSettings
from servecap.policy.signals import ADDITIVE_SIGNALS

_RANGES: dict[str, tuple[float, float]] = {  # Knative's accepted ranges
    "stable_window_s": (6.0, 3600.0),
    "panic_window_pct": (1.0, 100.0),
    "panic_threshold_pct": (110.0, 1000.0),
    "max_scale_up_rate": (1.0, float("inf")),
    "max_scale_down_rate": (1.0, float("inf")),
}


class Kpa(Autoscaler):
    """Knative's KPA decision: stable and panic windows over a queue-length signal."""

    signals = ADDITIVE_SIGNALS
    option_defaults: ClassVar[Mapping[str, float]] = {
        "stable_window_s": 60.0,
        "panic_window_pct": 10.0,
        "panic_threshold_pct": 200.0,
        "max_scale_up_rate": 1000.0,
        "max_scale_down_rate": 2.0,
    }
    default_preset = "knative-kpa"

    def __init__(self, settings: AutoscalerSettings) -> None:
        super().__init__(settings)
        for key, (lo, hi) in _RANGES.items():
            v = self.options[key]
            if not lo <= v <= hi or (key.startswith("max_scale") and v == lo):
                raise ServecapError(f"autoscaler.options.{key}", v, f"out of Knative's range ({lo:g} to {hi:g})")
        self.stable_window_s = self.options["stable_window_s"]
        self.panic_window_s = self.stable_window_s * self.options["panic_window_pct"] / 100.0
        self.panic_threshold = self.options["panic_threshold_pct"] / 100.0
        self._samples: deque[tuple[float, float]] = deque()
        self._panic_since_s: float | None = None  # the last decision over the threshold
        self._max_panic = 0

    def _average(self, now_s: float, window_s: float) -> float:
        vals = [v for t, v in self._samples if t > now_s - window_s]
        return sum(vals) / len(vals) if vals else 0.0

    def raw(self, current: int, value: float) -> int:
        """``ceil(value / target)``: what the stable window would ask for at this value."""
        return math.ceil(value / self.settings.target - 1e-9)

    def decide(self, now_s: float, current: int, value: float) -> int:
        target = self.settings.target
        self._samples.append((now_s, value))
        while self._samples and self._samples[0][0] <= now_s - self.stable_window_s:
            self._samples.popleft()
        ready = float(max(1, current))
        up = math.ceil(self.options["max_scale_up_rate"] * ready)
        down = math.floor(ready / self.options["max_scale_down_rate"])
        stable = math.ceil(self._average(now_s, self.stable_window_s) / target - 1e-9)
        panic = math.ceil(self._average(now_s, self.panic_window_s) / target - 1e-9)
        over = panic / ready >= self.panic_threshold
        stable, panic = min(max(stable, down), up), min(max(panic, down), up)
        if over:
            self._panic_since_s = now_s
        elif self._panic_since_s is not None and self._panic_since_s + self.stable_window_s < now_s:
            self._panic_since_s, self._max_panic = None, 0
        desired = stable
        if self._panic_since_s is not None:
            self._max_panic = max(self._max_panic, stable, panic)  # never scale down while panicking
            desired = self._max_panic
        return self.settings.bound(now_s, desired)

    def mode(self) -> str:
        return "panic mode" if self._panic_since_s is not None else ""
