"""What every autoscaler is: its settings (:class:`AutoscalerSettings`) and its interface
(:class:`Autoscaler`: ``decide(now_s, current, value) -> replicas`` on its declared signal).

An autoscaler is a small class registered by name in
:data:`servecap.policy.autoscalers.AUTOSCALERS`; the fleet simulator and the monitor's advice
build it with :func:`servecap.policy.autoscalers.make_autoscaler` and feed it the value of
``settings.signal`` from :func:`servecap.policy.signals.signal_value`, every ``interval_s``.
The common settings (signal, target, interval, bounds, schedule) are here; a policy's own knobs
travel in ``options`` (name -> number), with defaults and checks in the policy's class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from servecap.errors import ServecapError, did_you_mean
from servecap.policy.signals import SIGNALS


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
    policy: str = "target-tracking"  # a name in servecap.policy.autoscalers.AUTOSCALERS
    options: tuple[tuple[str, float], ...] = ()  # the policy's own knobs (its class checks them)

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

    def bound(self, now_s: float, desired: int) -> int:
        """``desired`` clamped to ``[floor_at(now_s), max_replicas]``."""
        return max(self.floor_at(now_s), min(self.max_replicas, desired))


class Autoscaler(ABC):
    """One pool's autoscaler: keeps its own history across decisions.

    A subclass declares the signals it can read (``signals``), its options with their defaults
    (``option_defaults``) and the preset it starts from when a fleet file names only the policy
    (``default_preset``); it implements :meth:`raw` and :meth:`decide`."""

    signals: ClassVar[tuple[str, ...]] = SIGNALS
    option_defaults: ClassVar[Mapping[str, float]] = {}
    default_preset: ClassVar[str] = "keda-vllm"

    def __init__(self, settings: AutoscalerSettings) -> None:
        if settings.signal not in self.signals:
            raise ServecapError(
                "autoscaler.signal",
                settings.signal,
                f"policy {settings.policy!r} reads one of {', '.join(self.signals)}",
            )
        opts = dict(self.option_defaults)
        for key, value in settings.options:
            if key not in opts:
                known = ", ".join(opts) or "none"
                raise ServecapError(
                    f"autoscaler.options.{key}",
                    value,
                    f"not an option of policy {settings.policy!r} (its options: {known})" + did_you_mean(key, opts),
                )
            opts[key] = float(value)
        self.settings = settings
        self.options = opts

    @property
    def signal(self) -> str:
        """The signal this autoscaler decides on (``settings.signal``)."""
        return self.settings.signal

    @abstractmethod
    def raw(self, current: int, value: float) -> int:
        """The recommendation from ``value`` alone: before windows, step limits and bounds."""

    @abstractmethod
    def decide(self, now_s: float, current: int, value: float) -> int:
        """The number of replicas the pool should have from ``now_s``, given ``current``
        (ready + starting, not draining) and the signal's ``value``."""

    def mode(self) -> str:
        """A word on the policy's state for advice ('' when there is nothing to say)."""
        return ""
