"""Autoscaler advice: a fleet pool's own autoscaler policy fed the live servers' signal.

Each tick, the signal the policy names is computed from the scraped replicas by the same
function the fleet simulator uses (:func:`servecap.policy.signals.signal_value`), over the
replicas that answered; the p99 TTFT is the fleet's over the monitor's window (the bucket-wise
sum of the replicas' histogram deltas, :mod:`servecap.monitor.fleet`), 0 when no first token
came in the window, as the simulator's rolling p99 answers with no sample. A live monitor cannot
see requests waiting in front of the replicas (the simulator's router queue): none are counted.

The current count is the replicas that answered (a live monitor cannot see starting ones). The
same policy instance (the pool's ``policy``, from :data:`~servecap.policy.autoscalers.AUTOSCALERS`) decides on every tick, so its
stabilisation windows (``upscale_stabilization_s`` / ``downscale_stabilization_s``, seconds on
the monitor's clock) hold across ticks as they do across the simulator's decisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from servecap.monitor.views import ScrapedReplica
from servecap.monitor.window import WindowStats
from servecap.policy.autoscalers import ADDITIVE_SIGNALS, AutoscalerSettings, make_autoscaler
from servecap.policy.signals import WINDOWED_SIGNALS
from servecap.policy.signals import signal_value as _signal_value


def signal_value(signal: str, replicas: Sequence[ScrapedReplica], fleet: WindowStats | None) -> float | None:
    """The policy's input from the live replicas; ``None`` when it cannot be told yet (the p99
    TTFT or ITL before the first window)."""

    def p99(metric: str) -> float | None:
        if fleet is None:
            return None
        p = fleet.p(metric, 0.99)
        return 0.0 if p is None else p

    return _signal_value(signal, replicas, lambda: p99("ttft"), 0, lambda: p99("itl"))


@dataclass(frozen=True, slots=True)
class Advice:
    pool: str
    source: str  # the fleet file
    settings: AutoscalerSettings
    value: float  # the signal as the policy reads it (a fleet sum for the additive signals)
    current: int  # replicas up
    recommended: int  # the raw recommendation, before stabilisation, steps and bounds
    desired: int  # what the policy decides now (held where the headroom forbids a scale-down)
    mode: str = ""  # the policy's word on its state ("panic mode"), if any
    policy_desired: int | None = None  # the policy's own decision, where the headroom check raised it
    traffic_headroom: float | None = None  # the headroom the scale-down was checked against (+0.29 = 29%)

    @property
    def per_replica(self) -> float:
        """The signal per replica: the sum over the replicas up for the additive signals."""
        if self.settings.signal in ADDITIVE_SIGNALS:
            return self.value / self.current if self.current else self.value
        return self.value

    def summary(self) -> str:
        s = self.settings
        unit = " s" if s.signal in WINDOWED_SIGNALS else ""
        per = " per replica" if s.signal in ADDITIVE_SIGNALS else ""
        digits = 1 if s.signal in ADDITIVE_SIGNALS else 2
        why = f"{s.signal} {self.per_replica:.{digits}f}{unit}{per} vs target {s.target:g}{unit}"
        head = (
            f"with the autoscaler of pool {self.pool!r} in {self.source}: {self.current} → {self.desired} replicas now"
        )
        held = "; ".join(x for x in (self.mode, self._held()) if x)
        return f"{head} ({why}{'; ' + held if held else ''})"

    def _held(self) -> str:
        """Why the decision differs from the raw recommendation, where it does."""
        s, rec, cur, want = self.settings, self.recommended, self.current, self.desired
        if self.policy_desired is not None and self.traffic_headroom is not None:
            more = cur / self.policy_desired - 1.0 if self.policy_desired > 0 else float("inf")
            return (
                f"the policy's {self.policy_desired} held at {want}: {cur} → {self.policy_desired} puts "
                f"{more:+.0%} traffic on each replica, beyond the {self.traffic_headroom:+.0%} at which the SLOs break"
            )
        if rec > cur and want < rec:
            if rec > s.max_replicas and want == s.max_replicas:
                return f"{rec} recommended, capped at max_replicas {s.max_replicas}"
            if want == cur and s.upscale_stabilization_s > 0:
                return f"{rec} recommended, held by the {s.upscale_stabilization_s:g} s upscale stabilisation window"
            return f"{rec} recommended, limited to {want}"
        if rec < cur and want > rec:
            if rec < s.min_replicas and want == s.min_replicas:
                return f"{rec} recommended, floored at min_replicas {s.min_replicas}"
            if want == cur and s.downscale_stabilization_s > 0:
                return (
                    f"{rec} recommended, held by the {s.downscale_stabilization_s:g} s downscale stabilisation window"
                )
            return f"{rec} recommended, limited to {want}"
        return ""


class Advisor:
    """One pool's autoscaler across the monitor's ticks (keeps its stabilisation history).

    A ``schedule`` (floors from given times on the simulated clock) has no meaning against a
    live clock and is left out: the floor is ``min_replicas``."""

    def __init__(self, settings: AutoscalerSettings, pool: str, source: str) -> None:
        self.dropped_schedule = bool(settings.schedule)
        self.policy = make_autoscaler(replace(settings, schedule=()))
        self.pool = pool
        self.source = source

    def advise(
        self,
        now_s: float,
        replicas: Sequence[ScrapedReplica],
        fleet: WindowStats | None,
        traffic_headroom: float | None = None,
    ) -> Advice | None:
        """The policy's decision at ``now_s``; ``None`` (nothing fed to the policy) when no replica
        is up or the signal cannot be told yet. A scale-down is checked against the monitor's own
        ``traffic_headroom`` (+0.29: the SLOs break at 29% more traffic, None: not known): going
        from ``N`` to ``M`` replicas puts ``N / M - 1`` more traffic on each, so the advice never
        goes below ``ceil(N / (1 + headroom))`` (:func:`headroom_floor`)."""
        current = sum(r.is_ready for r in replicas)
        value = signal_value(self.policy.settings.signal, replicas, fleet)
        if current == 0 or value is None:
            return None
        rec = self.policy.raw(current, value)
        desired = self.policy.decide(now_s, current, value)
        held = None
        if traffic_headroom is not None and desired < current:
            floor = headroom_floor(current, traffic_headroom)
            if desired < floor:
                held, desired = desired, floor
        return Advice(
            self.pool,
            self.source,
            self.policy.settings,
            value,
            current,
            rec,
            desired,
            self.policy.mode(),
            held,
            traffic_headroom if held is not None else None,
        )


def headroom_floor(current: int, traffic_headroom: float) -> int:
    """The fewest replicas that carry ``current`` replicas' traffic within the headroom: ``M``
    replicas take ``current / M - 1`` more each, within ``h`` when ``M >= current / (1 + h)``.
    No headroom (``h <= 0``: the SLOs already break) allows no scale-down. By hand: 2 replicas
    at +29% -> ceil(2 / 1.29) = 2 (one replica would take +100%); 8 at +50% -> ceil(5.33) = 6."""
    if traffic_headroom <= 0:
        return current
    return max(1, math.ceil(current / (1.0 + traffic_headroom) - 1e-9))
